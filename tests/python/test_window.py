"""torch's one-sided windows on backend "xccl" (docs/p2p.md, "Windows"): put, signal and
wait_signal with release/acquire meaning, map_remote_tensor, async Works, xccl.window's put_pages
and put_strided, every bad input (ValueError, nothing written, window and group usable after),
timeouts and a dead peer. One host here (shared memory); test_window_hosts.py runs the same
writes across hosts. Skipped on torch without windows (2.13)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import checks_test, describe, kill_self, spawn, transport_cases

pytestmark = pytest.mark.skipif(
    not hasattr(dist, "_new_window"), reason="this torch has no one-sided windows (torch 2.14+)"
)

N = 1000  # elements each rank writes into a peer's window per step


def _data(src: int, step: int, n: int = N, dtype=torch.float32) -> torch.Tensor:
    return (torch.arange(n, dtype=torch.int64) * 3 + src * 1000 + step * 7).to(dtype)


def _wait_opts(seconds: float):
    opts = dist.WaitSignalOptions() if hasattr(dist, "WaitSignalOptions") else None
    if opts is None:
        from torch._C._distributed_c10d import WaitSignalOptions

        opts = WaitSignalOptions()
    opts.timeout = timedelta(seconds=seconds)
    return opts


@checks_test(transport_cases(tcp_worlds=(), worlds=(2, 4)), min_checks=10)
def test_put_signal_wait_and_map(chk, rank, world):
    import xccl

    chk.true("supports windows", dist._supports_window())
    t = torch.zeros(world * N + 10)
    t[-10:] = rank + 0.5  # nobody writes there: what registration must keep
    before = t
    win = dist._new_window(t)
    chk.true("an xccl window", isinstance(win, xccl._C.Window), type(win).__name__)
    chk.true("the tensor object is kept", t is before)
    chk.equal("contents kept at registration", t[-10:], torch.full((10,), rank + 0.5))
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    for step in range(3):
        # Each step a fresh value at our slot of the next rank's window, then one signal: the
        # matching wait must see exactly that step's data in our own (registered) tensor.
        win.put(_data(rank, step), nxt, rank * N, False)
        win.signal(nxt, False)
        win.wait_signal(prev, False)
        chk.equal(
            f"step {step}: prev's put in my tensor", t[prev * N : (prev + 1) * N], _data(prev, step)
        )
        dist.barrier()  # nobody overwrites a slot before its reader looked
    # map_remote_tensor: a live view of the next rank's window (our last put is in it).
    view = win.map_remote_tensor(nxt)
    chk.equal("map_remote_tensor shape", tuple(view.shape), (world * N + 10,))
    chk.equal(
        "map_remote_tensor sees the peer's own values", view[-10:], torch.full((10,), nxt + 0.5)
    )
    chk.equal("map_remote_tensor sees our put", view[rank * N : (rank + 1) * N], _data(rank, 2))
    chk.equal(
        "get_attr",
        win.get_attr(nxt).access_type,
        dist.WindowAccessType.UNIFIED
        if hasattr(dist, "WindowAccessType")
        else win.get_attr(nxt).access_type,
    )
    # Async: the put's future and an async wait_signal posted before the signal was sent.
    waiting = win.wait_signal(prev, True)
    dist.barrier()
    work = win.put(_data(rank, 9), nxt, rank * N, True)
    work.wait()
    chk.true("async put's future done", work.get_future().done())
    win.signal(nxt, True).wait()
    chk.true("async wait_signal completes", waiting.wait(timedelta(seconds=30)))
    chk.equal("async put seen after async wait", t[prev * N : (prev + 1) * N], _data(prev, 9))
    # Several signals count: three in a row, three waits.
    dist.barrier()
    for _ in range(3):
        win.signal(nxt, False)
    for i in range(3):
        win.wait_signal(prev, False)
        chk.true(f"signal {i} consumed", True)
    # A non-contiguous source goes in row-major order (as .contiguous() gives it).
    src = _data(rank, 4, 2 * N).reshape(N, 2).t()  # 2 x N, strided
    dist.barrier()
    win.put(src, nxt, rank * N // 2 * 0, False) if world == 2 else None
    if world == 2:
        win.signal(nxt, False)
        win.wait_signal(prev, False)
        mine = _data(prev, 4, 2 * N).reshape(N, 2).t().contiguous().reshape(-1)
        chk.equal("non-contiguous put in row-major order", t[: 2 * N], mine)
    dist.barrier()
    win.tensor_deregister()
    chk.equal(
        "the tensor keeps its values after deregistration", t.sum().item(), t.clone().sum().item()
    )


@checks_test(transport_cases(tcp_worlds=(), worlds=(2, 4)), min_checks=3)
def test_put_pages_and_put_strided(chk, rank, world):
    import xccl.window

    page = 64
    pages = 16
    t = torch.zeros(pages * page, dtype=torch.float64)
    win = dist._new_window(t)
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    src = torch.arange(pages * page, dtype=torch.float64) + 10_000 * (rank + 1)
    # Out of order, a run of neighbours (merged into one copy) and a tensor for the lists.
    src_pages, dst_pages = [5, 6, 7, 0, 9], [1, 2, 3, 12, 0]
    work = xccl.window.put_pages(win, src, torch.tensor(src_pages), nxt, dst_pages, page, True)
    work.wait()
    win.signal(nxt, False)
    win.wait_signal(prev, False)
    theirs = torch.arange(pages * page, dtype=torch.float64) + 10_000 * (prev + 1)
    expected = torch.zeros(pages, page, dtype=torch.float64)
    for s, d in zip(src_pages, dst_pages):
        expected[d] = theirs.reshape(pages, page)[s]
    chk.equal(
        "put_pages: every page where it belongs, the rest untouched",
        t.reshape(pages, page),
        expected,
    )
    dist.barrier()
    # put_strided: rows 1, 3, 5 of a 6 x 10 tensor (strided rows) at offset 100, stride 40.
    big = torch.arange(60, dtype=torch.float64).reshape(6, 10) + rank
    rows = big[1::2, 2:9]
    before = t.clone()
    xccl.window.put_strided(win, rows, nxt, 100, 40)
    win.signal(nxt, False)
    win.wait_signal(prev, False)
    expected = before.clone()
    their_rows = (torch.arange(60, dtype=torch.float64).reshape(6, 10) + prev)[1::2, 2:9]
    for i in range(3):
        expected[100 + 40 * i : 100 + 40 * i + 7] = their_rows[i]
    chk.equal("put_strided rows at their stride, gaps untouched", t, expected)
    dist.barrier()
    # An empty page list is one completed Work.
    chk.true("empty put_pages", xccl.window.put_pages(win, src, [], nxt, [], page).is_completed())
    win.tensor_deregister()


def _bad_cases(win, world, t):
    import xccl.window

    f = torch.ones(4)
    n = t.numel()
    return [
        ("put past the end", lambda: win.put(torch.ones(n), 1, 1, False), f"{n} elements"),
        ("put at a negative offset", lambda: win.put(f, 1, -1, False), "offset"),
        ("put with another dtype", lambda: win.put(f.double(), 1, 0, False), "Double"),
        ("put to a rank outside", lambda: win.put(f, world, 0, False), f"rank {world}"),
        ("put to a negative rank", lambda: win.put(f, -1, 0, False), "outside"),
        ("signal to a rank outside", lambda: win.signal(world, False), "outside"),
        ("wait_signal on a rank outside", lambda: win.wait_signal(world + 3, False), "outside"),
        ("map_remote_tensor of a rank outside", lambda: win.map_remote_tensor(world), "outside"),
        ("get_attr of a rank outside", lambda: win.get_attr(-2), "outside"),
        (
            "put_pages page out of range",
            lambda: xccl.window.put_pages(win, torch.ones(64), [0], 1, [n // 16], 16),
            "outside",
        ),
        (
            "put_pages source page out of range",
            lambda: xccl.window.put_pages(win, torch.ones(64), [4], 1, [0], 16),
            "src_pages",
        ),
        (
            "put_pages unequal lengths",
            lambda: xccl.window.put_pages(win, torch.ones(64), [0, 1], 1, [0], 16),
            "dst_pages",
        ),
        (
            "put_pages negative page",
            lambda: xccl.window.put_pages(win, torch.ones(64), [-1], 1, [0], 16),
            "outside",
        ),
        (
            "put_pages zero page_elems",
            lambda: xccl.window.put_pages(win, torch.ones(64), [0], 1, [0], 0),
            "page_elems",
        ),
        (
            "put_strided past the end",
            lambda: xccl.window.put_strided(win, torch.ones(3, 4), 1, n - 8, 4),
            "past",
        ),
        (
            "put_strided overlapping rows",
            lambda: xccl.window.put_strided(win, torch.ones(3, 4), 1, 0, 2),
            "stride",
        ),
        (
            "put_strided non-contiguous rows",
            lambda: xccl.window.put_strided(win, torch.ones(4, 3).t(), 1, 0, 8),
            "contiguous",
        ),
        (
            "put of a meta tensor",
            lambda: win.put(torch.ones(2, device="meta"), 1, 0, False),
            "CPU",
        ),
    ]


@checks_test((2, 3), min_checks=10)
def test_bad_input_leaves_window_and_group_usable(chk, rank, world):
    t = torch.zeros(256)
    win = dist._new_window(t)
    dist.barrier()
    if rank == 0:
        target = win.map_remote_tensor(1).clone()
        for name, call, text in _bad_cases(win, world, t):
            chk.raises(name, call, types=(ValueError,), match=text)
        chk.equal("nothing written by the bad calls", win.map_remote_tensor(1), target)
        if torch.cuda.is_available():
            chk.raises(
                "put of a CUDA tensor",
                lambda: win.put(torch.ones(2, device="cuda"), 1, 0, False),
                types=(ValueError,),
                match="CUDA windows are not supported yet",
            )
        # Still usable: a good put and signal.
        win.put(torch.full((4,), 5.0), 1, 0, False)
        win.signal(1, False)
    elif rank == 1:
        win.wait_signal(0, False)
        chk.equal("the window works after the bad calls", t[:4], torch.full((4,), 5.0))
    dist.barrier()
    # The group works too.
    x = torch.ones(3)
    dist.all_reduce(x)
    chk.equal("all_reduce after the bad calls", x, torch.full((3,), float(world)))
    # A non-contiguous or meta tensor cannot be registered: ValueError on every rank, alike.
    chk.raises(
        "register a second tensor",
        lambda: win.tensor_register(torch.zeros(4)),
        types=(ValueError,),
        match="already registered",
    )
    win.tensor_deregister()
    for name, call in [
        ("put", lambda: win.put(torch.ones(1), (rank + 1) % world, 0, False)),
        ("signal", lambda: win.signal((rank + 1) % world, False)),
        ("wait_signal", lambda: win.wait_signal((rank + 1) % world, False)),
        ("map_remote_tensor", lambda: win.map_remote_tensor(rank)),
        ("tensor_deregister", lambda: win.tensor_deregister()),
    ]:
        chk.raises(
            f"{name} after tensor_deregister", call, types=(ValueError,), match="deregistered"
        )
    chk.raises(
        "register a non-contiguous tensor",
        lambda: win.tensor_register(torch.zeros(4, 6).t()),
        types=(ValueError,),
        match="contiguous",
    )
    # Registering again works, with a new size and dtype.
    u = torch.zeros(8, dtype=torch.int32)
    win.tensor_register(u)
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    win.put(torch.full((2,), rank + 1, dtype=torch.int32), nxt, 6, False)
    win.signal(nxt, False)
    win.wait_signal(prev, False)
    chk.equal("registered again", u[6:], torch.full((2,), prev + 1, dtype=torch.int32))
    x = torch.ones(3)
    dist.all_reduce(x)
    chk.equal("all_reduce at the end", x, torch.full((3,), float(world)))


@checks_test((2,), min_checks=4)
def test_wait_signal_times_out_naming_the_peer(chk, rank, world):
    t = torch.zeros(16)
    win = dist._new_window(t)
    other = 1 - rank
    err = chk.raises(
        "sync wait times out",
        lambda: win.wait_signal(other, False, _wait_opts(0.2)),
        types=(RuntimeError,),
        match=f"rank {other}",
    )
    chk.true("says it timed out", err is not None and "timed out" in str(err), str(err))
    work = win.wait_signal(other, True, _wait_opts(0.2))
    chk.raises(
        "async wait times out", lambda: work.wait(), types=(RuntimeError,), match=f"rank {other}"
    )
    dist.barrier()
    # The window and the group carry on.
    win.put(torch.full((2,), 3.0), other, 0, False)
    win.signal(other, False)
    win.wait_signal(other, False)
    chk.equal("usable after timeouts", t[:2], torch.full((2,), 3.0))
    win.tensor_deregister()


def _dead_peer(rank, world):
    t = torch.zeros(16)
    win = dist._new_window(t)
    dist.barrier()
    if rank == 2:
        kill_self()
    try:
        win.wait_signal(2, False)
        return "no error"
    except RuntimeError as e:
        error = str(e)
    # Between the live ranks the window still works.
    other = 1 - rank
    win.put(torch.full((3,), 7.0 + rank), other, 0, False)
    win.signal(other, False)
    win.wait_signal(other, False)
    return error, t[:3].tolist()


def test_dead_peer_fails_the_wait_naming_it():
    outcomes = spawn(_dead_peer, 3, timeout=60, pg_timeout=30)
    assert outcomes[2].exitcode is not None and outcomes[2].exitcode < 0, describe(outcomes)
    for rank in (0, 1):
        assert outcomes[rank].ok, describe(outcomes)
        error, values = outcomes[rank].value
        assert "rank 2" in error, error
        assert values == [7.0 + 1 - rank] * 3, values
        assert outcomes[rank].elapsed < 25, f"noticed only after {outcomes[rank].elapsed:.1f} s"


def across_hosts(chk, rank, world, shift=1, same_host=None):
    """Ranks on two hosts: the rank `shift` ahead is on the other host, so every put, page, row
    and signal of this ring crosses the network engine; `same_host` (a rank of our host, or
    None) stays mapped. Also run by window_hosts_rank.py across namespace hosts."""
    import xccl.window

    t = torch.zeros(world * N)
    win = dist._new_window(t)
    nxt, prev = (rank + shift) % world, (rank - shift) % world
    for step in range(3):
        # Async puts not waited on: the signal alone must carry them (it fences them).
        win.put(_data(rank, step, N // 2), nxt, rank * N, True)
        win.put(_data(rank, step + 50, N // 2), nxt, rank * N + N // 2, True)
        win.signal(nxt, False)
        win.wait_signal(prev, False)
        got = t[prev * N : (prev + 1) * N]
        want = torch.cat([_data(prev, step, N // 2), _data(prev, step + 50, N // 2)])
        chk.equal(f"step {step}: prev's async puts carried by its signal", got, want)
        dist.barrier()
    chk.raises(
        "map_remote_tensor of another host's rank",
        lambda: win.map_remote_tensor(nxt),
        types=(ValueError,),
        match="another host",
    )
    if same_host is not None:
        view = win.map_remote_tensor(same_host)
        chk.equal("map_remote_tensor of our host's rank", view.numel(), world * N)
    # Pages and strided rows across, one Work each, and an async wait_signal across.
    page = 50
    src = torch.arange(world * N, dtype=torch.float32) + 100_000 * rank
    waiting = win.wait_signal(prev, True)
    dist.barrier()
    work = xccl.window.put_pages(win, src, [7, 1, 2], nxt, [0, 5, 6], page, async_op=True)
    xccl.window.put_strided(win, src.reshape(-1, 100)[::3, :30], nxt, 1000, 40)
    win.signal(nxt, False)
    chk.true("async wait_signal across hosts", waiting.wait(timedelta(seconds=30)))
    work.wait()
    theirs = torch.arange(world * N, dtype=torch.float32) + 100_000 * prev
    chk.equal("page 7 -> 0", t[0:page], theirs[7 * page : 8 * page])
    chk.equal("pages 1, 2 -> 5, 6", t[5 * page : 7 * page], theirs[page : 3 * page])
    rows = theirs.reshape(-1, 100)[::3, :30]
    chk.equal("strided row 0", t[1000:1030], rows[0])
    chk.equal("strided row 3", t[1120:1150], rows[3])
    chk.raises(
        "put past the end, across hosts",
        lambda: win.put(torch.ones(2), nxt, world * N - 1, False),
        types=(ValueError,),
        match="do not fit",
    )
    dist.barrier()
    win.tensor_deregister()


# Two hosts simulated on this one (XCCL_SHM_HOST_ID: even and odd ranks), the network engine
# between them; test_window_hosts.py does the same across namespace hosts.
HOSTS = transport_cases(tcp_worlds=(), hierarchical_worlds=(4,), worlds=())


@checks_test(HOSTS, min_checks=10, env={"XCCL_NET": "ofi"})
def test_across_simulated_hosts_over_ofi(chk, rank, world):
    across_hosts(chk, rank, world, 1, (rank + 2) % world)


@checks_test(HOSTS, min_checks=10, env={"XCCL_NET": "tcp"})
def test_across_simulated_hosts_over_tcp(chk, rank, world):
    across_hosts(chk, rank, world, 1, (rank + 2) % world)
