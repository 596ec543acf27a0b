"""Argument checks shared by several layers (a blocking call's timeout, a transpose's axes),
so every entry point refuses the same values with the same message."""

from __future__ import annotations

import math
import numbers
import threading

from .errors import ArgumentError


def check_timeout(timeout, argument: str = "timeout") -> float | None:
    """None (wait for ever) or a finite, non-negative number of seconds no longer than the
    platform's lock timeout; nan, inf, negatives, bools and non-numbers are refused (nan
    would otherwise compare false everywhere and wait for ever)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise ArgumentError(f"{argument}: expected a non-negative number of seconds or None, "
                            f"got {type(timeout).__name__} {timeout!r}")
    value = float(timeout)
    if not math.isfinite(value) or value < 0 or value > threading.TIMEOUT_MAX:
        raise ArgumentError(f"{argument}: expected a finite, non-negative number of seconds "
                            f"(at most {threading.TIMEOUT_MAX:.0f}) or None, got {timeout!r}")
    return value


def check_batch(batch) -> None:
    """A timeline tag: None or an int (a batch number)."""
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, numbers.Integral)):
        raise ArgumentError(f"batch: expected an int (a batch number for the timeline) or "
                            f"None, got {type(batch).__name__} {batch!r}")


def check_buffer_list(inputs, prefix: str = "") -> None:
    """``inputs``: a list or tuple of buffers. A single Buffer is refused here, naming the
    argument (asking it for its truth value would read the GPU)."""
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(f"{prefix}inputs must be a list of buffers ([buf] for one buffer), "
                            f"got {type(inputs).__name__}")


def normalize_permutation(axes, ndim: int, where: str) -> tuple[int, ...]:
    """numpy's ``axes`` of a transpose: None (reversed) or a permutation of range(ndim)."""
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    try:
        perm = tuple(axes)
        ok = all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in perm)
    except TypeError:
        ok = False
    if not ok:
        raise ArgumentError(f"{where}: axes must be a tuple of ints, got {axes!r}")
    norm = tuple(int(d) % ndim if -ndim <= d < ndim else -1 for d in perm) if ndim else perm
    if sorted(norm) != list(range(ndim)):
        raise ArgumentError(f"{where}: axes {perm} is not a permutation of the {ndim} axes "
                            f"of a")
    return norm
