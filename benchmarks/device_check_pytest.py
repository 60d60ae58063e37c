"""pytest plugin of benchmarks/device_check.sh (`-p device_check_pytest`, with benchmarks/ on
PYTHONPATH): a bound on each test inside the stage's limit, and which tests a run takes.

Environment (set by the script; nothing is bounded without them):
  DEVICE_CHECK_TEST_S    per-test bound, seconds. Every spawn of tests/python/dist_harness.py
                         gets at most this as its wall-clock bound, so a hung rank is killed by
                         the harness, which first has it write its Python stacks to its log (the
                         failure then says what each rank waited for); a test still running 30 s
                         after the bound (a hang outside the ranks) ends its pytest process,
                         after its Python stacks (DEVICE_CHECK_BACKSTOP_S: other than 30 s).
  DEVICE_CHECK_DEADLINE  the stage's end (seconds since the epoch): a test still running then is
                         reported as cut off by the deadline, not as hung.
  DEVICE_CHECK_SELECT    `pairs`: only tests parametrized with world_size 2 (two such groups fit
                         the GPU together); `rest`: every other test; unset: all.
  DEVICE_CHECK_DONE_FILE each test that ends (or hangs) is added to this file, and a test in it is
                         not collected again: after a hang ended the pytest process, the script
                         runs pytest again for the tests it had not reached.
Each hang is reported as `device_check: HUNG <test> ...` and `device_check: WAITED <test>: ...`
lines (benchmarks/device_check.py's tally reads them).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_check  # noqa: E402  (benchmarks/device_check.py: waited_for)
import pytest  # noqa: E402

# The real stderr, before pytest's capture replaces fd 2: a test's output is captured, these
# lines must reach the stage's log even when the process is ended.
_ERR = os.dup(2)
# After the per-test bound: the harness's own kill and join come first.
BACKSTOP_S = float(os.environ.get("DEVICE_CHECK_BACKSTOP_S", "") or 30)


def _write(text: str) -> None:
    os.write(_ERR, (text.rstrip("\n") + "\n").encode("utf-8", "replace"))


def _number(name: str) -> float:
    try:
        return float(os.environ.get(name, "") or 0)
    except ValueError:
        return 0.0


def _bound_spawn(limit: float) -> None:
    try:
        import dist_harness
    except ImportError:
        return
    original = dist_harness.spawn

    def spawn(*args, timeout: float = 120.0, **kwargs):
        return original(*args, timeout=min(timeout, limit), **kwargs)

    spawn.__doc__ = original.__doc__
    dist_harness.spawn = spawn


_worker = []  # [True] in a pytest-xdist worker, whose controller reports the hangs


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        _worker.append(True)
    limit = _number("DEVICE_CHECK_TEST_S")
    if limit > 0:
        _bound_spawn(limit)


def _done() -> set:
    path = os.environ.get("DEVICE_CHECK_DONE_FILE", "")
    try:
        with open(path, encoding="utf-8") as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()


def _mark_done(nodeid: str) -> None:
    path = os.environ.get("DEVICE_CHECK_DONE_FILE", "")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(nodeid + "\n")


def pytest_collection_modifyitems(config, items):
    select = os.environ.get("DEVICE_CHECK_SELECT", "")
    done = _done()
    keep, drop = [], []
    for item in items:
        world = getattr(getattr(item, "callspec", None), "params", {}).get("world_size")
        wanted = select not in ("pairs", "rest") or (world == 2) == (select == "pairs")
        (keep if wanted and item.nodeid not in done else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _Backstop:
    """Ends this process when a test outlives its bound plus BACKSTOP_S (or the stage's end)."""

    def __init__(self, nodeid: str, path: str, limit: float, deadline: float):
        self.nodeid, self.path, self.started = nodeid, path, time.monotonic()
        wait = limit + BACKSTOP_S if limit > 0 else float("inf")
        self.cut = False
        if deadline > 0 and deadline - time.time() - 5 < wait:
            wait, self.cut = max(1.0, deadline - time.time() - 5), True
        self.timer = None
        if wait != float("inf"):
            self.timer = threading.Timer(wait, self.fire)
            self.timer.daemon = True
            self.timer.start()

    def fire(self):
        took = time.monotonic() - self.started
        _mark_done(self.nodeid)
        if self.cut:
            _write(f"device_check: DEADLINE {self.nodeid} after {took:.0f} s")
        else:
            _write(f"device_check: HUNG {self.nodeid} after {took:.0f} s (no result)")
            _write(f"device_check: WAITED {self.nodeid}: {self.where()} (Python stacks follow)")
        faulthandler.dump_traceback(file=_ERR, all_threads=True)
        os._exit(124 if self.cut else 70)

    def where(self) -> str:
        """The main thread's innermost frame, and the test file's innermost one if another."""
        frame = sys._current_frames().get(threading.main_thread().ident)
        stack = traceback.extract_stack(frame) if frame is not None else []
        if not stack:
            return "no Python frame"

        def text(f):
            return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"

        test = next((f for f in reversed(stack) if f.filename == self.path), None)
        inner = text(stack[-1])
        return inner if test is None or test is stack[-1] else f"{inner}, from {text(test)}"

    def cancel(self):
        if self.timer is not None:
            self.timer.cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    limit, deadline = _number("DEVICE_CHECK_TEST_S"), _number("DEVICE_CHECK_DEADLINE")
    backstop = None
    if limit > 0 or deadline > 0:
        backstop = _Backstop(item.nodeid, str(item.path), limit, deadline)
    try:
        yield
    finally:
        if backstop is not None:
            backstop.cancel()


def pytest_runtest_logreport(report):
    # A rank the harness killed at the bound: the test hung; say what its ranks waited for.
    if report.when != "call" or not report.failed:
        return
    if _worker:
        return
    text = str(report.longrepr or "")
    if "still running at the wall-clock bound" not in text:
        return
    limit = _number("DEVICE_CHECK_TEST_S")
    _write(
        f"device_check: HUNG {report.nodeid} after {report.duration:.0f} s "
        f"(a rank was still running at the bound, {limit:g} s)"
    )
    _write(
        f"device_check: WAITED {report.nodeid}: "
        f"{device_check.waited_for(text) or 'the rank logs say nothing more'}"
    )


def pytest_runtest_logfinish(nodeid, location):
    _mark_done(nodeid)
