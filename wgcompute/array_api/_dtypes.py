"""The standard's dtype objects (wgcompute's own DTypes under the standard's names), its type
promotion table, and the data type functions: result_type, can_cast, isdtype, finfo, iinfo."""

from __future__ import annotations

import builtins
from dataclasses import dataclass

import numpy as np

from ..dtypes import DTYPES, DType
from ..errors import DtypeError

# the standard's name -> wgcompute's dtype name; a name whose dtype wgcompute lacks is absent
_STANDARD = {"bool": "bool", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
             "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
             "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128"}
NAMES: dict[str, DType] = {n: DTYPES[w] for n, w in _STANDARD.items() if w in DTYPES}
STANDARD_NAME: dict[str, str] = {d.name: n for n, d in NAMES.items()}

_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float32", "float64")
_COMPLEX = ("complex64", "complex128")


def _promote_names(a: str, b: str) -> str | None:
    """The standard's promotion table for two dtype names; None where it has no entry."""
    if a == b:
        return a
    for group in (_SIGNED, _UNSIGNED, _FLOATS, _COMPLEX):
        if a in group and b in group:
            return group[max(group.index(a), group.index(b))]
    if a in _UNSIGNED and b in _SIGNED or a in _SIGNED and b in _UNSIGNED:
        u, s = (a, b) if a in _UNSIGNED else (b, a)
        need = _UNSIGNED.index(u) + 1  # a signed type one size up holds every unsigned value
        if need >= len(_SIGNED):
            return None
        return _SIGNED[max(need, _SIGNED.index(s))]
    if a in _FLOATS + _COMPLEX and b in _FLOATS + _COMPLEX:
        wide = "64" in a and a in _FLOATS or "128" in a or "64" in b and b in _FLOATS or \
            "128" in b
        return "complex128" if wide else "complex64"
    return None


def standard_name(dt: DType, argument: str = "dtype") -> str:
    name = STANDARD_NAME.get(dt.name)
    if name is None:
        raise DtypeError(f"{argument}: {dt.name} is not a dtype of the array API standard "
                         f"(expected one of {', '.join(NAMES)})")
    return name


def as_dtype(spec, argument: str = "dtype") -> DType:
    """A dtype of this namespace from one of its dtype objects (or a name it knows)."""
    if isinstance(spec, DType):
        standard_name(spec, argument)
        return spec
    if isinstance(spec, str) and spec in NAMES:
        return NAMES[spec]
    raise DtypeError(f"{argument}: expected one of the namespace's dtypes "
                     f"({', '.join(NAMES)}), got {spec!r}")


def promote(a: DType, b: DType, argument: str = "operands") -> DType:
    """The dtype of an operation between arrays of dtypes ``a`` and ``b`` by the standard's
    promotion table; mixing kinds it leaves undefined (an integer with a float) is refused."""
    na, nb = standard_name(a, argument), standard_name(b, argument)
    out = _promote_names(na, nb)
    if out is None or out not in NAMES:
        raise DtypeError(f"{argument}: {na} and {nb} have no promoted dtype in the array API "
                         f"standard; convert one with astype() first")
    return NAMES[out]


def result_type(*arrays_and_dtypes) -> DType:
    from ..buffer import Buffer

    if not arrays_and_dtypes:
        raise DtypeError("result_type: at least one array or dtype is required")
    dts, scalars = [], []
    for i, x in enumerate(arrays_and_dtypes):
        if isinstance(x, Buffer):
            dts.append(x.dtype)
        elif isinstance(x, (builtins.bool, int, float, complex)):
            scalars.append(x)
        else:
            dts.append(as_dtype(x, f"arrays_and_dtypes[{i}]"))
    if not dts:
        raise DtypeError("result_type: Python scalars alone have no array dtype; pass an "
                         "array or a dtype too")
    out = dts[0]
    for d in dts[1:]:
        out = promote(out, d, "result_type")
    for s in scalars:
        check_scalar_kind(s, out, "result_type")
    return out


def check_scalar_kind(value, dt: DType, argument: str) -> None:
    """A Python scalar combines with an array of its own kind (bool with bool, int with
    integers and floats, float with floats, complex with complex)."""
    kind = dt.kind
    if isinstance(value, builtins.bool):
        ok = True if kind == "b" else kind in "iufc"
    elif isinstance(value, int):
        ok = kind in "iufc"
    elif isinstance(value, float):
        ok = kind in "fc"
    elif isinstance(value, complex):
        ok = kind == "c"
    else:
        ok = False
    if not ok:
        raise DtypeError(f"{argument}: a Python {type(value).__name__} does not combine with "
                         f"a {standard_name(dt)} array in the array API standard")


def can_cast(from_, to, /) -> builtins.bool:
    from ..buffer import Buffer

    src = from_.dtype if isinstance(from_, Buffer) else as_dtype(from_, "from_")
    dst = as_dtype(to, "to")
    if src == dst:
        return True
    out = _promote_names(standard_name(src), standard_name(dst))
    return out == standard_name(dst)


_KINDS = {
    "bool": lambda n: n == "bool",
    "signed integer": lambda n: n in _SIGNED,
    "unsigned integer": lambda n: n in _UNSIGNED,
    "integral": lambda n: n in _SIGNED + _UNSIGNED,
    "real floating": lambda n: n in _FLOATS,
    "complex floating": lambda n: n in _COMPLEX,
    "numeric": lambda n: n != "bool",
}


def isdtype(dtype, kind) -> builtins.bool:
    name = standard_name(as_dtype(dtype), "dtype")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise DtypeError(f"kind: unknown kind {kind!r}; expected a dtype or one of "
                             f"{', '.join(map(repr, _KINDS))}")
        return _KINDS[kind](name)
    return as_dtype(kind, "kind") == as_dtype(dtype)


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 - the standard's spelling
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DType


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801 - the standard's spelling
    bits: int
    max: int
    min: int
    dtype: DType


def _dtype_of(type, argument: str) -> DType:
    from ..buffer import Buffer

    return type.dtype if isinstance(type, Buffer) else as_dtype(type, argument)


def finfo(type, /) -> finfo_object:
    dt = _dtype_of(type, "type")
    if dt.kind not in "fc":
        raise DtypeError(f"type: finfo takes a floating dtype, got {standard_name(dt)}")
    f = np.finfo(dt.numpy)
    return finfo_object(int(f.bits), float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal),
                        dt if dt.kind == "f" else NAMES["float32" if f.bits == 32 else
                                                        "float64"])


def iinfo(type, /) -> iinfo_object:
    dt = _dtype_of(type, "type")
    if dt.kind not in "iu":
        raise DtypeError(f"type: iinfo takes an integer dtype, got {standard_name(dt)}")
    i = np.iinfo(dt.numpy)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), dt)
