"""The array namespace as wgc.fuse traces it: the standard's elementwise functions (one op
table row each) and its final reductions on Traced arrays, checked as the namespace checks."""

from __future__ import annotations

from . import array_api as _xp
from ._fusion_trace import ScalarArg, Traced, _not_elementwise, _Reduction, _source
from .array_api import _elementwise as _ew
from .array_api._dtypes import check_scalar_kind
from .array_api._dtypes import promote as _promote
from .buffer import Buffer
from .dtypes import DTYPES
from .errors import ArgumentError
from .kernels.elementwise.optable import OPS

_REDUCTIONS = ("sum", "max", "min", "mean", "prod")


def namespace_module():
    """The module a traced function's ``xp`` names are replaced in (wgcompute.array_api)."""
    return _xp


class Namespace:
    """wgcompute.array_api inside a fused function: elementwise functions add to the
    trace, reductions end it, constants and dtypes are the namespace's own, and every other
    function is refused by name."""

    def __init__(self, fname: str):
        self._fname = fname

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _ew._UNARY and _ew._UNARY[name] in OPS:
            return lambda x, /: self._unary(name, x)
        if name in _ew._BINARY and _ew._BINARY[name] in OPS:
            return lambda x1, x2, /: self._binary(name, x1, x2)
        if name in _REDUCTIONS:
            return lambda x, /, **kw: self._reduce(name, x, kw)
        value = getattr(_xp, name)  # (an AttributeError for names the namespace lacks)
        if callable(value) and not isinstance(value, type(DTYPES["f32"])):
            raise _not_elementwise(self._fname, f"{name}()")
        return value

    def _array(self, x, argument: str) -> Traced:
        if isinstance(x, Traced):
            return x
        if isinstance(x, Buffer):
            raise ArgumentError(f"fuse: {self._fname}: {argument} is a buffer that is not an "
                                f"argument of the function; pass it as an argument")
        raise ArgumentError(f"{argument}: expected an array of this namespace, got "
                            f"{type(x).__name__}")

    def _unary(self, where: str, x) -> Traced:
        """As array_api's unary: the row by name (bool's logical rows), its dtype check."""
        x = self._array(x, "x")
        dt = x.dtype
        row = OPS[_ew._BOOL[where]] if dt.kind == "b" and where in _ew._BOOL else \
            OPS[_ew._UNARY[where]]
        _ew._check_dtype(where, row, dt, x.device)
        return x._t.apply(row.name, (x,), where)

    def _binary(self, where: str, x1, x2) -> Traced:
        """As array_api's binary: promotion, scalars either side, the row's checks."""
        op = _ew._BINARY[where]
        left_scalar = _source(x1) is not None
        if left_scalar and _source(x2) is not None:
            raise ArgumentError(f"{where}: at least one of x1 and x2 must be an array")
        if left_scalar or _source(x2) is not None:
            a = self._array(x2 if left_scalar else x1, "x2" if left_scalar else "x1")
            source = _source(x1 if left_scalar else x2)
            check_scalar_kind(source.sample, a.dtype, where)
            b = None
        else:
            a, b = self._array(x1, "x1"), self._array(x2, "x2")
            dt = _promote(a.dtype, b.dtype, where)
            a, b = a._t.cast(a, dt.name), a._t.cast(b, dt.name)
        dt = a.dtype
        if dt.kind == "b" and where in _ew._BOOL:
            op = _ew._BOOL[where]
        row = OPS[op]
        _ew._check_dtype(where, row, dt, a.device)
        if op == "div" and dt.kind in "iu":
            _ew._check_op(where, op, dt, None, left_scalar)  # raises: integer true division
        if b is not None:
            return a._t.apply(op, (a, b), where)
        return self._scalar_op(where, op, a, source, left_scalar)

    def _scalar_op(self, where: str, op: str, a: Traced, source: ScalarArg,
                   left_scalar: bool) -> Traced:
        dt = a.dtype

        def convert(value):
            check_scalar_kind(value, dt, where)
            _ew._check_op(where, op, dt, value, left_scalar)
            return _ew.scalar_value(where, value, dt)

        reflected = False
        if left_scalar:
            op, reflected = (_ew._SWAPPED[op], False) if op in _ew._SWAPPED else (op, True)
        s = a._t.scalar(source, dt.name, convert, ("namespace", where, op, left_scalar))
        return a._t.apply(op, (s, a) if reflected else (a, s), where)

    def _reduce(self, name: str, x, kwargs) -> _Reduction:
        x = self._array(x, "x")
        fn = getattr(_xp, name)
        return _Reduction(x, name, lambda b: fn(b, **kwargs))
