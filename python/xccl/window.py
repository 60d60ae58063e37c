"""xccl's writes on torch's one-sided windows: pages and strided rows in one call.

``torch.distributed._new_window(tensor)`` on an xccl group returns an ``xccl._C.Window`` (a
``torch.distributed.Window``): ``put``, ``signal``, ``wait_signal``, ``map_remote_tensor`` and
``get_attr`` behave as torch documents them (docs/p2p.md, "Windows"). The functions here add
what transfer engines of inference systems do: many pages or rows moved by one call with one
completion, e.g. KV-cache pages from a prefill rank into a decode rank's window::

    win = dist._new_window(kv_cache)  # collective: every rank registers its cache
    work = xccl.window.put_pages(win, my_kv, [3, 7, 8], dst_rank=1, dst_pages=[0, 1, 2],
                                 page_elems=16 * 1024, async_op=True)
    work.wait()
    win.signal(1, False)  # rank 1's wait_signal(0, False) returns once the pages are there

Both are ValueErrors, with nothing written, for a page or row outside either tensor, a source
whose dtype differs from the target window's, or a window whose tensor was deregistered.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["put_pages", "put_strided"]

Pages = Sequence[int] | torch.Tensor


def _page_tensor(pages: Pages, name: str) -> torch.Tensor:
    if isinstance(pages, torch.Tensor):
        if pages.dtype != torch.int64 or pages.device.type != "cpu" or pages.dim() != 1:
            raise ValueError(
                f"xccl put_pages: {name} must be a 1-D int64 CPU tensor or a list of ints"
            )
        # A copy, made while we hold the GIL: the call releases it, and another thread must not
        # change indices between their check and their use.
        return pages.clone(memory_format=torch.contiguous_format)
    return torch.tensor(list(pages), dtype=torch.int64)


def _xccl_window(win):
    if not hasattr(win, "_put_pages"):
        raise ValueError(
            "xccl.window: not a window of an xccl group (create it with "
            "torch.distributed._new_window on a group whose backend is xccl)"
        )
    return win


def put_pages(
    win,
    src: torch.Tensor,
    src_pages: Pages,
    dst_rank: int,
    dst_pages: Pages,
    page_elems: int,
    async_op: bool = False,
):
    """Copy pages of ``src`` into pages of ``dst_rank``'s window, as one operation.

    Page ``p`` of a tensor is its elements ``[p * page_elems, (p + 1) * page_elems)``, the
    tensor viewed flat (``src`` must be contiguous; the target is the window's registered
    tensor). Page ``src_pages[i]`` goes to page ``dst_pages[i]``, for every ``i``; the two lists
    (lists of ints, or 1-D int64 CPU tensors) have equal lengths, and pages next to each other
    in both are moved as one run.

    Returns one Work for the whole call. On the same host the pages are copied before the call
    returns, whatever ``async_op`` says; to another host the Work completes when every page is
    visible there (``async_op=False`` waits for that). A later ``win.signal(dst_rank, ...)``
    orders every page before the peer's matching ``wait_signal``.
    """
    return _xccl_window(win)._put_pages(
        src,
        _page_tensor(src_pages, "src_pages"),
        dst_rank,
        _page_tensor(dst_pages, "dst_pages"),
        page_elems,
        async_op,
    )


def put_strided(
    win,
    src: torch.Tensor,
    dst_rank: int,
    target_offset_nelems: int,
    dst_row_stride_nelems: int,
    async_op: bool = False,
):
    """Write the rows of the 2-D ``src`` into ``dst_rank``'s window at a stride, as one operation.

    Row ``i`` of ``src`` lands at element ``target_offset_nelems + i * dst_row_stride_nelems`` of
    the target window (viewed flat). The rows may lie at any stride in ``src`` (a slice of a
    larger tensor, say) but each row must be contiguous; ``dst_row_stride_nelems`` is at least the
    row length so rows do not overlap. One Work, completed as for :func:`put_pages`.
    """
    return _xccl_window(win)._put_strided(
        src, dst_rank, target_offset_nelems, dst_row_stride_nelems, async_op
    )
