"""The one-sided ops of the benchmark, put and put_pages, as one rank runs them (docs/p2p.md).

Rank 0 writes into the window of the last rank (on namespace hosts, the last host), and a
signal / wait_signal pair closes each timed call, or each batch of calls with --timing batch: the
writer's time covers the write and the signal that publishes it, the target's time the arrival
of each signal, and the record keeps the slower. Beside each put, in the same run and on the
same bytes, interleaved as the collectives' backends are: send/recv over the tested backend,
send/recv over the reference (gloo on CPU), and one core's memcpy on the writer (the same-host
bound: a put into shared memory is that copy). Beside each put_pages call: one contiguous put
of all its pages. Ranks between the two only join the barriers.

Every op here runs with torch.set_num_threads(1), so the memcpy is one core's, as the put's
copy is.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from . import method, onesided_report
from .options import BATCH_CALLS, ONE_SIDED, PAGES_TOTAL, parse_size

WRITER = 0
CHECK_SENTINEL = 99  # the target's window holds this before a checked call (no input equals it)


def plan(args, itemsize: int) -> list:
    return method.one_sided_plan(
        args.ops, args.put_sizes, args.page_sizes, args.pages, itemsize, parse_size(PAGES_TOTAL)
    )


def metadata(args) -> dict:
    if not any(op in ONE_SIDED for op in args.ops):
        return {}
    return {
        "one_sided": "rank 0 writes into the last rank's window; a signal closes each timed "
        "call (--timing batch: each batch); torch threads 1",
        "put_sizes": args.put_sizes,
        "page_sizes": args.page_sizes,
        "pages": args.pages,
    }


def _idle() -> None:
    pass


def _done(work) -> None:
    """Completes a synchronous call's Work, where the binding returns one."""
    if work is not None:
        work.wait()


class Pair:
    """The writer, the target, and the window between them, over the tested backend's group.
    Made collectively by every rank once per run; close() is collective too."""

    def __init__(self, me, shapes: list):
        if not hasattr(dist, "_new_window"):
            raise RuntimeError(
                f"{' and '.join(ONE_SIDED)} need torch's window API (torch 2.14 or later); "
                f"this is torch {torch.__version__}"
            )
        self.me = me
        self.target = me.world - 1
        self.role = "writer" if me.rank == WRITER else "target" if me.rank == self.target else None
        largest = max(shape["count"] for shape in shapes)
        self.group = me.sides[0].group
        self.reference = me.sides[1].group if len(me.sides) > 1 else None
        # The registered tensor is the window's memory: the writer's puts land in the target's.
        self.memory = torch.zeros(largest, dtype=me.dtype)
        self.window = dist._new_window(self.memory, group=self.group)
        self.src = torch.empty(largest, dtype=me.dtype)
        self.dst = torch.empty(largest, dtype=me.dtype)
        # --timing batch: one signal per BATCH_CALLS puts, on CPU too (a put's batch is real).
        self.batch = BATCH_CALLS if me.args.timing == "batch" else 1

    def close(self) -> None:
        self.window.tensor_deregister()

    # -- the calls: (call, close, batch) loops for Rank.interleave ---------------------------

    def _loop(self, writer_call, target_call=None, one_sided: bool = False) -> tuple:
        """This rank's part of a loop: the writer calls writer_call, the target target_call
        (or nothing), the others nothing. A one-sided loop closes each call (or batch) with the
        writer's signal and the target's wait for it: what makes the data visible there."""
        idle = _idle
        if self.role == "writer":
            signal = lambda: _done(self.window.signal(self.target, False))  # noqa: E731
            return writer_call, (signal if one_sided else idle), self.batch
        if self.role == "target":
            wait = lambda: _done(self.window.wait_signal(WRITER, False))  # noqa: E731
            return target_call or idle, (wait if one_sided else idle), self.batch
        return idle, idle, self.batch

    def _put(self, count: int) -> tuple:
        view = self.src[:count]
        return self._loop(lambda: _done(self.window.put(view, self.target, 0, False)), None, True)

    def _put_pages(self, shape: dict, salt: int) -> tuple:
        from ..window import put_pages

        # As tensors made once: a transfer engine keeps its page tables as tensors, and a list
        # would be converted on every call.
        src_pages, dst_pages = (
            torch.tensor(pages, dtype=torch.int64)
            for pages in method.scattered_pages(shape["pages"], salt)
        )
        window, src, target, elems = self.window, self.src, self.target, shape["page_elems"]
        call = lambda: _done(put_pages(window, src, src_pages, target, dst_pages, elems))  # noqa: E731
        return self._loop(call, None, True)

    def _send_recv(self, group, count: int) -> tuple:
        src, dst, target = self.src[:count], self.dst[:count], self.target
        return self._loop(
            lambda: dist.send(src, target, group=group), lambda: dist.recv(dst, WRITER, group=group)
        )

    def loops(self, op: str, shape: dict, salt: int) -> dict:
        """role -> loop, the tested role ("backend") first; every rank builds the same roles."""
        count = shape["count"]
        if op == "put_pages":
            return {"backend": self._put_pages(shape, salt), "put": self._put(count)}
        loops = {"backend": self._put(count), "send_recv": self._send_recv(self.group, count)}
        if self.reference is not None:
            loops["reference"] = self._send_recv(self.reference, count)
        src, dst = self.src[:count], self.dst[:count]
        loops["memcpy"] = self._loop(lambda: dst.copy_(src))
        return loops

    # -- one size ----------------------------------------------------------------------------

    def check(self, op: str, shape: dict, salt: int, write) -> bool:
        """One checked call of the tested op: the target's window must hold the writer's check
        input at the places the op names, and the rest of the window the sentinel."""
        me, count = self.me, shape["count"]
        if self.role == "target":
            self.memory.fill_(CHECK_SENTINEL)
        if self.role == "writer":
            self.src[:count].copy_(me.check_input(WRITER, count, salt).to(me.dtype))
        me.barrier()  # the sentinel is in place before the write
        write_call, close, _ = write
        write_call()
        close()
        if self.role != "target":
            return True
        expected = torch.full_like(self.memory, CHECK_SENTINEL)
        source = me.check_input(WRITER, count, salt).to(me.dtype)
        if op == "put":
            expected[:count] = source
        else:
            elems = shape["page_elems"]
            src_pages, dst_pages = method.scattered_pages(shape["pages"], salt)
            pages_in, pages_out = source.view(-1, elems), expected[:count].view(-1, elems)
            pages_out[torch.tensor(dst_pages)] = pages_in[torch.tensor(src_pages)]
        return bool(torch.equal(self.memory, expected))

    def measure(self, op: str, shape: dict, salt: int) -> dict:
        me, threads = self.me, torch.get_num_threads()
        loops = self.loops(op, shape, salt)
        passed = self.check(op, shape, salt, loops["backend"]) if me.args.check else None
        me.fill_random(self.src[: shape["count"]], salt)
        torch.set_num_threads(1)  # the memcpy baseline is one core's (module docstring)
        try:
            timed = me.interleave(loops)
        finally:
            torch.set_num_threads(threads)
        return {
            role: {
                "stats": method.summarize(result["times"]),
                "iters": result["iters"],
                "warmup": result["warmup"],
                "check": passed if role == "backend" else None,
            }
            for role, result in timed.items()
        }

    def record(self, op: str, shape: dict, gathered: list) -> dict:
        me = self.me
        backend = me.sides[0].name
        names = {"backend": backend, "send_recv": backend, "put": backend, "memcpy": "memcpy"}
        if len(me.sides) > 1:
            names["reference"] = me.sides[1].name
        return onesided_report.record(op, shape, me.args.dtype, me.itemsize, names, gathered)
