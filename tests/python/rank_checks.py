"""The in-rank half of run_checks (dist_harness): a rank collects its failures in a Checker
instead of raising at the first one, and returns them with `result(checker)`, so one spawn
reports every mismatch of a whole matrix."""

from __future__ import annotations

from typing import Any, Callable

import torch


class Checker:
    """Collects failures inside a rank instead of raising at the first one."""

    def __init__(self, rank: int):
        self.rank = rank
        self.failures: list[str] = []
        self.checks = 0

    def fail(self, what: str, detail: str) -> None:
        self.failures.append(f"{what}: {detail}")

    def true(self, what: str, condition: bool, detail: str = "condition is false") -> None:
        self.checks += 1
        if not condition:
            self.fail(what, detail)

    def equal(self, what: str, actual, expected) -> None:
        """Exact equality of dtype, shape and every element (NaN never expected)."""
        self.checks += 1
        if not isinstance(actual, torch.Tensor):
            if actual != expected:
                self.fail(what, f"got {actual!r}, expected {expected!r}")
            return
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            self.fail(
                what,
                f"got {actual.dtype}{tuple(actual.shape)}, "
                f"expected {expected.dtype}{tuple(expected.shape)}",
            )
            return
        if not torch.equal(actual, expected):
            self.fail(what, _first_difference(actual, expected))

    def close(
        self, what: str, actual, expected, rtol: float | None = None, atol: float | None = None
    ) -> None:
        """torch.testing.assert_close (its default tolerances per dtype unless given)."""
        self.checks += 1
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
        except AssertionError as e:
            self.fail(what, " ".join(str(e).split())[:500])

    def raises(
        self,
        what: str,
        fn: Callable[[], Any],
        types=(ValueError, RuntimeError),
        match: str | None = None,
    ) -> BaseException | None:
        self.checks += 1
        try:
            fn()
        except types as e:
            if match is not None and match.lower() not in str(e).lower():
                self.fail(what, f"raised {type(e).__name__} without {match!r}: {e}")
            return e
        except Exception as e:  # noqa: BLE001 - reported, not swallowed
            self.fail(what, f"raised {type(e).__name__} instead of {types}: {e}")
            return e
        self.fail(what, f"did not raise {types}")
        return None


def _first_difference(actual: torch.Tensor, expected: torch.Tensor) -> str:
    a, e = actual.reshape(-1), expected.reshape(-1)
    if a.dtype.is_complex:
        a, e = torch.view_as_real(a).reshape(-1), torch.view_as_real(e).reshape(-1)
    different = (a != e).nonzero().reshape(-1)
    i = int(different[0])
    return (
        f"{len(different)} of {a.numel()} elements differ; first at flat index {i}: "
        f"got {a[i].item()!r}, expected {e[i].item()!r}"
    )


def result(checker: Checker):
    """What a run_checks worker returns."""
    return checker.failures, checker.checks
