"""A Buffer's numpy-style methods (operators, indexing, views, reductions, astype, scalar
reads), and the slot through which wgcompute.array, the layer above, does their work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .errors import ArgumentError, DtypeError, ShapeError, WgComputeError

if TYPE_CHECKING:  # the class these methods are part of
    from .buffer import Buffer

# -- the layer above, installed from above -------------------------------------------------
# A Buffer's operators, views, indexing, reductions and astype are methods, as numpy's; the
# work is done above this layer: array.py runs the kernels and installs itself here when
# imported (wgcompute's __init__ imports it), so this module imports nothing above it.
class ArrayOps(Protocol):
    """What Buffer's array methods call: wgcompute.array, installed by it."""

    def binary(self, op: str, a: Buffer, b: Any, reflected: bool = False) -> Buffer: ...
    def inplace(self, op: str, a: Buffer, b: Any) -> Buffer: ...
    def unary(self, op: str, a: Buffer) -> Buffer: ...
    def matmul_op(self, a: Buffer, b: Any, reflected: bool = False) -> Buffer: ...
    def reduction(self, name: str, x: Buffer, axis: Any, keepdims: bool,
                  out: Buffer | None) -> Buffer: ...
    def reshape(self, x: Buffer, shape: Any) -> Buffer: ...
    def view(self, x: Buffer, dtype: Any = None) -> Buffer: ...
    def getitem(self, x: Buffer, key: Any) -> Buffer: ...
    def setitem(self, x: Buffer, key: Any, value: Any) -> None: ...
    def copy(self, x: Buffer) -> Buffer: ...
    def item(self, x: Buffer) -> Any: ...
    def transpose(self, a: Buffer, out: Buffer | None = None, *, axes: Any = None
                  ) -> Buffer: ...
    def astype(self, x: Buffer, dtype: Any, *, rounding: str | None = None,
               casting: str = "exact") -> Buffer: ...
    def relu(self, x: Buffer, slope: Any) -> Buffer: ...


class NotInstalled:
    """Holds the place of a layer above until it installs itself: any use is an error that
    says which module to import (only code that imports wgcompute.buffer by itself, without
    the package's __init__, can see it)."""

    __slots__ = ("_module", "_what")

    def __init__(self, module: str, what: str):
        self._module = module
        self._what = what

    def __getattr__(self, name: str):
        raise WgComputeError(f"{self._what} need {self._module}, which is not imported yet; "
                             f"`import wgcompute` first")


_array: ArrayOps = NotInstalled(  # type: ignore[assignment]
    "wgcompute.array", "a Buffer's operators, views, indexing, reductions and astype")


def install_array_ops(ops: ArrayOps) -> None:
    """Called by wgcompute.array as it is imported."""
    global _array
    _array = ops


_namespace: Any = NotInstalled("wgcompute.array_api", "__array_namespace__")


def install_namespace(module) -> None:
    """Called by wgcompute.array_api as it is imported (which `import wgcompute` does)."""
    global _namespace
    _namespace = module


class NumpyMethods:
    """Buffer's numpy-style methods, kept apart from its memory: wgc.Buffer inherits them."""

    __slots__ = ()

    # -- numpy-style arrays: operators, views, indexing (array.py does the work) -----------
    # Each operator runs one kernel on the GPU and waits for it, like wgc.add; none reads the
    # GPU back. float(), int() and item() are reads (they block); bool() refuses, since it
    # would read behind `if` and `and`.
    def __add__(self, other) -> Buffer:
        return _array.binary("add", self, other)

    def __radd__(self, other) -> Buffer:
        return _array.binary("add", self, other, reflected=True)

    def __sub__(self, other) -> Buffer:
        return _array.binary("sub", self, other)

    def __rsub__(self, other) -> Buffer:
        return _array.binary("sub", self, other, reflected=True)

    def __mul__(self, other) -> Buffer:
        return _array.binary("mul", self, other)

    def __rmul__(self, other) -> Buffer:
        return _array.binary("mul", self, other, reflected=True)

    def __truediv__(self, other) -> Buffer:
        return _array.binary("div", self, other)

    def __rtruediv__(self, other) -> Buffer:
        return _array.binary("div", self, other, reflected=True)

    def __floordiv__(self, other) -> Buffer:
        return _array.binary("floordiv", self, other)

    def __rfloordiv__(self, other) -> Buffer:
        return _array.binary("floordiv", self, other, reflected=True)

    def __mod__(self, other) -> Buffer:
        return _array.binary("mod", self, other)

    def __rmod__(self, other) -> Buffer:
        return _array.binary("mod", self, other, reflected=True)

    def __pow__(self, other, modulo=None) -> Buffer:
        if modulo is not None:
            raise ArgumentError("pow: three-argument pow(buf, y, mod) is not supported")
        return _array.binary("pow", self, other)

    def __rpow__(self, other) -> Buffer:
        return _array.binary("pow", self, other, reflected=True)

    # in place, as numpy's: the kernel writes this buffer (every reference sees it)
    def __iadd__(self, other) -> Buffer:
        return _array.inplace("add", self, other)

    def __isub__(self, other) -> Buffer:
        return _array.inplace("sub", self, other)

    def __imul__(self, other) -> Buffer:
        return _array.inplace("mul", self, other)

    def __itruediv__(self, other) -> Buffer:
        return _array.inplace("div", self, other)

    def __ifloordiv__(self, other) -> Buffer:
        return _array.inplace("floordiv", self, other)

    def __imod__(self, other) -> Buffer:
        return _array.inplace("mod", self, other)

    def __ipow__(self, other) -> Buffer:
        return _array.inplace("pow", self, other)

    def __matmul__(self, other) -> Buffer:
        return _array.matmul_op(self, other)

    def __rmatmul__(self, other) -> Buffer:
        return _array.matmul_op(self, other, reflected=True)

    def __neg__(self) -> Buffer:
        return _array.unary("neg", self)

    def __pos__(self) -> Buffer:
        return _array.copy(self)

    def __abs__(self) -> Buffer:
        return _array.unary("abs", self)

    # & | ^ ~: the logical ops of bool buffers
    def __and__(self, other) -> Buffer:
        return _array.binary("and", self, other)

    def __rand__(self, other) -> Buffer:
        return _array.binary("and", self, other, reflected=True)

    def __or__(self, other) -> Buffer:
        return _array.binary("or", self, other)

    def __ror__(self, other) -> Buffer:
        return _array.binary("or", self, other, reflected=True)

    def __xor__(self, other) -> Buffer:
        return _array.binary("xor", self, other)

    def __rxor__(self, other) -> Buffer:
        return _array.binary("xor", self, other, reflected=True)

    def __invert__(self) -> Buffer:
        return _array.unary("invert", self)

    # (& | ^ ~ are the bitwise ops of integer buffers; << and >> shift them as numpy does)
    def __lshift__(self, other) -> Buffer:
        return _array.binary("lshift", self, other)

    def __rlshift__(self, other) -> Buffer:
        return _array.binary("lshift", self, other, reflected=True)

    def __rshift__(self, other) -> Buffer:
        return _array.binary("rshift", self, other)

    def __rrshift__(self, other) -> Buffer:
        return _array.binary("rshift", self, other, reflected=True)

    def __iand__(self, other) -> Buffer:
        return _array.inplace("and", self, other)

    def __ior__(self, other) -> Buffer:
        return _array.inplace("or", self, other)

    def __ixor__(self, other) -> Buffer:
        return _array.inplace("xor", self, other)

    def __ilshift__(self, other) -> Buffer:
        return _array.inplace("lshift", self, other)

    def __irshift__(self, other) -> Buffer:
        return _array.inplace("rshift", self, other)

    def __lt__(self, other) -> Buffer:
        return _array.binary("lt", self, other)

    def __le__(self, other) -> Buffer:
        return _array.binary("le", self, other)

    def __gt__(self, other) -> Buffer:
        return _array.binary("gt", self, other)

    def __ge__(self, other) -> Buffer:
        return _array.binary("ge", self, other)

    def __eq__(self, other) -> Buffer:  # type: ignore[override]
        return _array.binary("eq", self, other)

    def __ne__(self, other) -> Buffer:  # type: ignore[override]
        return _array.binary("ne", self, other)

    __hash__ = object.__hash__  # buffers stay usable as dict keys (by identity)

    def __bool__(self) -> bool:
        """The element of a 0-d buffer as a bool (nan is True): a read (blocks until ready).
        Other shapes are refused: bool() would read the GPU behind an `if`."""
        if self._shape:
            raise ArgumentError(
                f"bool() of {self!r} would read the GPU behind an `if`; only a 0-d buffer "
                f"converts (a read); read explicitly: buf.item() (one element), or "
                f"buf.to_numpy() and numpy's any()/all()")
        return bool(_array.item(self))

    def __index__(self) -> int:
        """The element of a 0-d integer buffer as an int (operator.index): a read."""
        from .dtypes import DTYPES

        if DTYPES[self.dtype].kind not in "iu":
            raise DtypeError(f"__index__: {self!r} is {self.dtype}; only an integer buffer "
                             f"is an index")
        if self._shape:
            raise ShapeError(f"__index__: {self!r} is not 0-d; only a 0-d buffer is an index")
        return int(_array.item(self))

    def __complex__(self) -> complex:
        """The one element as a complex: a read (blocks until ready)."""
        return complex(_array.item(self))

    def __array_namespace__(self, /, *, api_version: str | None = None):
        """wgcompute.array_api, the array API standard's namespace of these arrays (2023.12;
        api_version may name it or an earlier version it contains)."""
        if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12"):
            raise ArgumentError(f"__array_namespace__: api_version {api_version!r} is not "
                                f"available; wgcompute.array_api follows 2023.12 (and "
                                f"2021.12, 2022.12, which it contains)")
        if isinstance(_namespace, NotInstalled):
            _namespace.__array_namespace__  # noqa: B018 - raises: says what to import
        return _namespace

    def to_device(self, device, /, *, stream=None) -> Buffer:
        """This buffer on ``device`` (a Device, or None for the default one): itself when it
        is there already, else a copy (see Buffer.to). ``stream`` must be None: wgcompute
        copies on the devices' own queues."""
        if stream is not None:
            raise ArgumentError(f"to_device: stream={stream!r}; wgcompute copies on the "
                                f"devices' own queues (pass stream=None)")
        from .runtime import resolve

        target = resolve(device)
        return self if target is self.device else self.to(target)

    def __contains__(self, value):
        raise ArgumentError("`in` on a buffer would read the GPU; compare with == and read "
                            "the result (to_numpy())")

    def __float__(self) -> float:
        """The one element as a float: a read (blocks until ready)."""
        return float(_array.item(self))

    def __int__(self) -> int:
        """The one element as an int: a read (blocks until ready)."""
        return int(_array.item(self))

    def item(self):
        """The one element as a Python number: a read (blocks until ready)."""
        return _array.item(self)

    def _scalar(self, where: str, hint: str):
        """The element of a 0-d buffer as numpy's scalar of its dtype: a read (blocks)."""
        if self._shape:
            raise TypeError(f"{where}: {self!r} is not 0-d; only a 0-d buffer (a reduction "
                            f"over everything, x.sum()) {hint}")
        return self.to_numpy()[()]

    def __format__(self, spec: str) -> str:
        """``f"{x.sum():.2f}"``: a 0-d buffer formats as its value (a read: it blocks, as
        item() does); without a spec, as str() (which reads nothing). A spec on a buffer of
        other shapes is a TypeError, as numpy's."""
        if not spec:
            return str(self)
        return format(self._scalar(f"format spec {spec!r}",
                                   "formats as a number; read it first: x.to_numpy()"), spec)

    def __round__(self, ndigits=None):
        """round() of a 0-d buffer: numpy's round of its scalar (a read: it blocks), an int
        without ``ndigits``, else a numpy scalar of the buffer's dtype. Other shapes are a
        TypeError, as numpy's arrays; round elementwise with x.astype('s32',
        rounding='round') (to integers, on the GPU) or np.round(x.to_numpy(), n)."""
        if ndigits is not None and (isinstance(ndigits, bool)
                                    or not isinstance(ndigits, (int, np.integer))):
            raise ArgumentError(f"round: ndigits must be an int or None, got {ndigits!r}")
        value = self._scalar("round", "rounds to a number; round elementwise with "
                                      "x.astype('s32', rounding='round') on the GPU, or "
                                      "np.round(x.to_numpy(), n)")
        return round(value) if ndigits is None else round(value, int(ndigits))

    def __getitem__(self, key) -> Buffer:
        """numpy's basic indexing (ints, slices, ..., None): a view without a copy when the
        result is contiguous in memory (rows, leading-axis slices), else a copy made on the
        GPU. As the sole index, a boolean mask of the leading dimensions or an integer
        array (indices along the first axis) gathers on the GPU; a mask reads back its count."""
        return _array.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        """``x[key] = value`` on the GPU, for basic keys (ints, slices, ..., None) and, as
        the sole index, a boolean mask or integer indices along the first axis; value a
        Python number or an array that broadcasts to the selection."""
        _array.setitem(self, key, value)

    def __iter__(self) -> Iterator[Buffer]:
        if not self._shape:
            raise TypeError("iteration over a 0-d buffer")
        for i in range(self._shape[0]):
            yield self[i]

    def reshape(self, *shape) -> Buffer:
        """The same memory in another shape (one dimension may be -1): a view, no copy."""
        return _array.reshape(self, shape)

    def view(self, dtype=None) -> Buffer:
        """A view of the same memory, as ``dtype`` when given (numpy's view): no copy."""
        return _array.view(self, dtype)

    def ravel(self) -> Buffer:
        """The elements as 1-D: a view."""
        return self.reshape(-1)

    def flatten(self) -> Buffer:
        """The elements as a new 1-D buffer (a copy, as numpy's flatten)."""
        return self.copy().reshape(-1)

    def copy(self) -> Buffer:
        """A new buffer with the same elements, copied on the GPU."""
        return _array.copy(self)

    def astype(self, dtype, *, rounding: str | None = None, casting: str = "exact"
               ) -> Buffer:
        """A new buffer converted to ``dtype``, exactly unless told otherwise: see
        wgc.astype (it checks on the GPU, and reads one word back, when values could change)."""
        return _array.astype(self, dtype, rounding=rounding, casting=casting)

    @property
    def T(self) -> Buffer:
        """A 2-D buffer transposed: a new buffer, copied on the GPU. Other shapes are refused,
        as the array API standard says (x.transpose() reverses any number of axes, x.mT
        transposes a stack of matrices)."""
        if self.ndim != 2:
            raise ShapeError(f"T: {self!r} is {self.ndim}-d; T transposes a 2-D buffer (use "
                             f"x.transpose() to reverse every axis, x.mT for a stack of "
                             f"matrices)")
        return self.transpose()

    @property
    def mT(self) -> Buffer:
        """The last two axes swapped (the array API's matrix transpose; a stack of matrices
        transposed one by one): a new buffer, copied on the GPU."""
        if self.ndim < 2:
            raise ShapeError(f"mT: {self!r} is {self.ndim}-d; the matrix transpose needs "
                             f"at least 2 axes (x.transpose() reverses any number of axes)")
        n = self.ndim
        return self.transpose(tuple(range(n - 2)) + (n - 1, n - 2))

    def transpose(self, *axes) -> Buffer:
        """numpy's transpose (reversed axes, or the order given): a new buffer."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _array.transpose(self, axes=axes or None)

    def sum(self, axis=None, *, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
        """numpy's sum (default: everything): see wgc.sum for dtypes."""
        return _array.reduction("sum", self, axis, keepdims, out)

    def max(self, axis=None, *, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
        return _array.reduction("max", self, axis, keepdims, out)

    def min(self, axis=None, *, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
        return _array.reduction("min", self, axis, keepdims, out)

    def mean(self, axis=None, *, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
        return _array.reduction("mean", self, axis, keepdims, out)

    def argmax(self, axis=None, *, keepdims: bool = False, out: Buffer | None = None
               ) -> Buffer:
        """u32 index of the first maximum (of the flattened buffer by default)."""
        return _array.reduction("argmax", self, axis, keepdims, out)

    def relu(self, slope: float = 0.0) -> Buffer:
        """max(x, 0), or x * slope where x < 0: wgc.relu as a method, as a wgc.fuse function's
        arrays have it (one function then runs fused or not)."""
        return _array.relu(self, slope)
