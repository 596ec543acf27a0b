"""The Python array API standard (2024.12) on any GPU: ``import wgcompute.array_api as xp``.

Its arrays are wgcompute Buffers (``x.__array_namespace__()`` returns this module), so code
written for the standard (scipy, scikit-learn with ``array_api_dispatch``, array-api-extra)
runs on Vulkan, Metal and D3D12 through wgcompute. Every function computes on the GPU;
functions whose result's shape depends on the data (``nonzero``, ``unique_*``, boolean masks,
``repeat`` with an array of counts) read that shape back, which waits for the GPU.
docs/guide/array-api.md says what conforms and what differs."""

from __future__ import annotations

import sys as _sys

from .. import _buffer_numpy as _buffer_numpy
from .. import array as _array
from ..dtypes import DTYPES as _DTYPES
from . import _elementwise as _elementwise_module
from ._complex import (  # noqa: F401 - the namespace's functions
    conj,
    imag,
    real,
)
from ._creation import (  # noqa: F401
    asarray,
    astype,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ._cumulative import (  # noqa: F401 - the namespace's functions
    cumulative_prod,
    cumulative_sum,
)
from ._dtypes import NAMES as _NAMES  # noqa: F401 - the standard's name -> dtype
from ._dtypes import can_cast, finfo, iinfo, isdtype, result_type  # noqa: F401
from ._elementwise import (  # noqa: F401 - the namespace's functions
    abs,
    acos,
    acosh,
    add,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clip,
    copysign,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    hypot,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    reciprocal,
    remainder,
    round,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    trunc,
)
from ._indexing import (  # noqa: F401 - the namespace's functions
    nonzero,
    take,
    take_along_axis,
)
from ._info import __array_namespace_info__  # noqa: F401
from ._linear import (  # noqa: F401 - the namespace's functions
    matmul,
    matrix_transpose,
    tensordot,
    vecdot,
)
from ._manipulation import (  # noqa: F401 - the namespace's functions
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    unstack,
)
from ._ranges import (  # noqa: F401 - the namespace's functions
    arange,
    eye,
    from_dlpack,
    linspace,
    meshgrid,
    tril,
    triu,
)
from ._searching import (  # noqa: F401 - the namespace's functions
    argmax,
    argmin,
    count_nonzero,
    searchsorted,
    where,
)
from ._set import (  # noqa: F401 - the namespace's functions
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from ._sorting import (  # noqa: F401 - the namespace's functions
    argsort,
    sort,
)
from ._statistical import (  # noqa: F401 - the namespace's functions
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from ._utility import (  # noqa: F401 - the namespace's functions
    all,
    any,
    diff,
)

__array_api_version__ = "2024.12"

e = 2.718281828459045
inf = float("inf")
nan = float("nan")
pi = 3.141592653589793
newaxis = None

# the dtype objects: wgcompute's own DTypes under the standard's names (only those it has)
bool = _DTYPES["bool"]  # noqa: A001 - the standard's name
int8 = _DTYPES["s8"]
int16 = _DTYPES["s16"]
int32 = _DTYPES["s32"]
int64 = _DTYPES["s64"]
uint8 = _DTYPES["u8"]
uint16 = _DTYPES["u16"]
uint32 = _DTYPES["u32"]
uint64 = _DTYPES["u64"]
float32 = _DTYPES["f32"]
float64 = _DTYPES["f64"]
complex64 = _DTYPES["c64"]
complex128 = _DTYPES["c128"]  # where the adapter has float64 (__array_namespace_info__ says)

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "abs", "acos", "acosh", "add", "all",
    "any", "arange", "argmax", "argmin", "argsort", "asarray", "asin", "asinh", "astype", "atan",
    "atan2", "atanh", "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "bool", "broadcast_arrays", "broadcast_to", "can_cast",
    "ceil", "clip", "complex64", "complex128", "concat", "conj", "copysign", "cos", "cosh",
    "count_nonzero",
    "cumulative_prod", "cumulative_sum", "diff", "divide", "e", "empty", "empty_like", "equal",
    "exp", "expand_dims", "expm1", "eye", "fft", "finfo", "flip", "float32", "float64", "floor",
    "floor_divide", "from_dlpack", "full", "full_like", "greater", "greater_equal", "hypot",
    "iinfo", "imag", "inf", "int8", "int16", "int32", "int64", "isdtype", "isfinite", "isinf",
    "isnan", "less",
    "less_equal", "linalg", "linspace", "log", "log10", "log1p", "log2", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "matmul", "matrix_transpose", "max",
    "maximum", "mean", "meshgrid", "min", "minimum", "moveaxis", "multiply", "nan", "negative",
    "newaxis", "nextafter", "nonzero", "not_equal", "ones", "ones_like", "permute_dims", "pi",
    "positive", "pow", "prod", "real", "reciprocal", "remainder", "repeat", "reshape",
    "result_type", "roll", "round", "searchsorted", "sign", "signbit", "sin", "sinh", "sort",
    "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "take", "take_along_axis",
    "tan", "tanh", "tensordot", "tile", "tril", "triu", "trunc", "uint16", "uint32", "uint64",
    "uint8", "unique_all",
    "unique_counts", "unique_inverse", "unique_values", "unstack", "var", "vecdot", "where",
    "zeros", "zeros_like"
]

# Buffer's __array_namespace__ and complex64 buffers' operators are this namespace's
_buffer_numpy.install_namespace(_sys.modules[__name__])
_array.install_complex_ops(_elementwise_module.unary, _elementwise_module.binary)


def __getattr__(name: str):
    # the standard's extensions, xp.fft and xp.linalg, imported on first use (importing them
    # sets them here): `import wgcompute` does not load them
    import importlib

    if name == "fft":
        return importlib.import_module(".fft", __name__)
    if name == "linalg":
        return importlib.import_module(".linalg", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"fft", "linalg"})
