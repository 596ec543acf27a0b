"""The standard's complex functions (real, imag, conj) and complex arithmetic on the GPU
(complex_axis and complex_binary kernels): the elementwise functions route complex64 and
complex128 here."""

from __future__ import annotations

from .._lazy import enqueue
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import DtypeError
from ..kernels.fft.complex import COMPLEX_AXIS, COMPLEX_BINARY
from ._dtypes import standard_name
from ._helpers import array, new, operands

__all__ = ["real", "imag", "conj"]


def _part(x, mode: str, where: str) -> Buffer:
    x = array(x, "x")
    dt = DTYPES[x.dtype]
    if dt.kind != "c":
        raise DtypeError(f"{where}: x is {standard_name(x.dtype)}; expected a complex "
                         f"floating-point array")
    out = new(x.shape, dt if mode == "conj" else dt.part, x.device, where)
    if out.size:
        enqueue(COMPLEX_AXIS, [x], out, {"mode": mode})
    return out


def real(x, /) -> Buffer:
    """The real part of each element of complex x (float32 of complex64, float64 of
    complex128)."""
    return _part(x, "real", "real")


def imag(x, /) -> Buffer:
    """The imaginary part of each element of complex x (its parts' real dtype)."""
    return _part(x, "imag", "imag")


def conj(x, /) -> Buffer:
    """The complex conjugate of each element of x: of a real (or bool) array, a copy of it
    (the standard's 2024.12 conj takes every numeric dtype)."""
    if isinstance(x, Buffer) and x.dtype.kind != "c":
        from ..array import copy

        return copy(array(x, "x"))
    return _part(x, "conj", "conj")


def complex_abs(x, /) -> Buffer:
    """|x| of each element of complex x (its parts' real dtype), without overflow on the
    way."""
    return _part(x, "abs", "abs")


def _binary(op: str, where: str, x1, x2) -> Buffer:
    a, b, dt = operands(where, x1, x2)
    if dt.kind != "c":
        raise DtypeError(f"{where}: complex arithmetic takes complex64 or complex128 "
                         f"operands, got {standard_name(dt)}")
    if not isinstance(b, Buffer):  # a Python scalar: one element uploaded as the operand
        from ..buffer import buffer

        b = buffer([complex(b)], (), dt, device=a.device)
    if isinstance(x1, (int, float, complex)) and not isinstance(x1, Buffer):
        a, b = b, a  # the scalar was the left operand
    out = new(_broadcast(a, b), dt, a.device, where)
    if out.size:
        enqueue(COMPLEX_BINARY, [a, b], out, {"op": op})
    return out


def _broadcast(a: Buffer, b: Buffer) -> tuple[int, ...]:
    shape, _ = COMPLEX_BINARY.output_spec([a, b], {})
    return shape


def complex_add(x1, x2, /) -> Buffer:
    return _binary("add", "add", x1, x2)


def complex_subtract(x1, x2, /) -> Buffer:
    return _binary("sub", "subtract", x1, x2)


def complex_multiply(x1, x2, /) -> Buffer:
    return _binary("mul", "multiply", x1, x2)


def complex_divide(x1, x2, /) -> Buffer:
    return _binary("div", "divide", x1, x2)
