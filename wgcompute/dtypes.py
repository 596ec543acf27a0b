"""The one dtype table (name, numpy dtype, WGSL type, item size, feature needed) and the
exact conversion of user data into it: nothing is silently cast or truncated."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import DtypeError, ShapeError


@dataclass(frozen=True, eq=False)
class DType:
    """One dtype of the table. It stands for its name: ``DType == "f32"`` is true (also for
    "float32" and numpy's float32), it hashes, prints and formats as "f32", and
    ``np.dtype(d)`` is its numpy dtype (through the ``dtype`` attribute, numpy's protocol)."""

    name: str  # wgcompute's spelling: f32, f64, f16, s8, s16, s32, s64, u8, u16, u32, u64
    numpy: np.dtype
    wgsl: str  # WGSL scalar type kernels compute in (1- and 2-byte integers travel packed in
    # u32 words, computed in i32 or u32)
    itemsize: int
    feature: str | None  # adapter feature kernels on this dtype need
    kind: str  # "f" float, "i" signed int, "u" unsigned int, "c" complex, "b" bool

    def __repr__(self) -> str:
        return repr(self.name)

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        if isinstance(other, str):
            if _ALIASES.get(other, other) == self.name:
                return True
            if other in DTYPES:
                return False
        elif other is None or isinstance(other, (bool, int, float)):
            return False  # np.dtype(None) would be float64
        if not isinstance(other, (np.dtype, type, str)) and not hasattr(type(other), "dtype"):
            return NotImplemented  # not a dtype spelling (another library's dtype object)
        try:
            return np.dtype(other) == self.numpy
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return dtype, (self.name,)  # unpickles to the table's own entry

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype: ``np.dtype(buf.dtype)``, ``np.zeros(3, buf.dtype)`` read it."""
        return self.numpy

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def packed(self) -> bool:
        """True for the 1- and 2-byte integers and bool: several elements share one u32 word
        on the GPU (``lanes`` of ``bits`` bits each; bool as the bytes 0 and 1)."""
        return self.itemsize < 4 and self.kind in "iub"

    @property
    def lanes(self) -> int:
        """Elements per u32 word on the GPU: 4 for u8, s8 and bool, 2 for s16 and u16, else 1."""
        return 4 // self.itemsize if self.packed else 1

    @property
    def bits(self) -> int:
        return 8 * self.itemsize

    @property
    def part(self) -> DType:
        """A complex dtype's real and imaginary parts' dtype (f32 for c64, f64 for c128)."""
        if self.kind != "c":
            raise DtypeError(f"dtype {self.name} is not complex; it has no parts")
        return DTYPES[_PARTS[self.name]]


_TABLE = [
    DType("f32", np.dtype(np.float32), "f32", 4, None, "f"),
    DType("f64", np.dtype(np.float64), "f64", 8, "shader-f64", "f"),
    DType("f16", np.dtype(np.float16), "f16", 2, "shader-f16", "f"),
    DType("s32", np.dtype(np.int32), "i32", 4, None, "i"),
    DType("s64", np.dtype(np.int64), "i64", 8, "shader-int64", "i"),
    DType("u32", np.dtype(np.uint32), "u32", 4, None, "u"),
    # 1- and 2-byte integers: lanes of u32 words (element e in the word's lane e % lanes, the
    # first in the low bits), computed in i32 (sign-extended when read) or u32
    DType("u8", np.dtype(np.uint8), "u32", 1, None, "u"),
    DType("s8", np.dtype(np.int8), "i32", 1, None, "i"),
    DType("s16", np.dtype(np.int16), "i32", 2, None, "i"),
    DType("u16", np.dtype(np.uint16), "u32", 2, None, "u"),
    DType("u64", np.dtype(np.uint64), "u64", 8, "shader-int64", "u"),
    # bool: the bytes 0 and 1, stored as u8 is (four to a u32 word)
    DType("bool", np.dtype(np.bool_), "u32", 1, None, "b"),
    # complex64: (real, imaginary) f32 pairs; kernels compute it as vec2<f32>
    DType("c64", np.dtype(np.complex64), "vec2<f32>", 8, None, "c"),
    # complex128: (real, imaginary) f64 pairs, vec2<f64> (where f64 is: shader-f64)
    DType("c128", np.dtype(np.complex128), "vec2<f64>", 16, "shader-f64", "c"),
]
_PARTS = {"c64": "f32", "c128": "f64"}  # a complex dtype's parts
DTYPES: dict[str, DType] = {d.name: d for d in _TABLE}
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in _TABLE}
# Other spellings people type; each maps to one wgcompute name.
_ALIASES = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "s32",
            "int64": "s64", "uint32": "u32", "uint8": "u8", "i32": "s32", "i64": "s64",
            "int8": "s8", "int16": "s16", "uint16": "u16", "uint64": "u64", "i8": "s8",
            "i16": "s16", "complex64": "c64",
            "complex128": "c128"}


def dtype(spec, argument: str = "dtype") -> DType:
    """Resolve a dtype given as a wgcompute name ("f32"), a numpy dtype or type, or a DType."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        name = _ALIASES.get(spec, spec)
        if name in DTYPES:
            return DTYPES[name]
        raise DtypeError(f"{argument}: unknown dtype {spec!r}; expected one of {', '.join(DTYPES)}")
    if spec is None:  # np.dtype(None) is float64: a silent default we do not want
        raise DtypeError(f"{argument}: expected a dtype name ({', '.join(DTYPES)}) or a numpy "
                         f"dtype, got None")
    try:
        npd = np.dtype(spec)
    except TypeError:
        raise DtypeError(
            f"{argument}: expected a dtype name ({', '.join(DTYPES)}) or a numpy dtype, "
            f"got {type(spec).__name__} {spec!r}") from None
    if npd.byteorder == ">":
        npd = npd.newbyteorder("<")
    if npd in _BY_NUMPY:
        return _BY_NUMPY[npd]
    raise DtypeError(f"{argument}: numpy dtype {npd} has no wgcompute equivalent; "
                     f"expected one of {', '.join(d.numpy.name for d in _TABLE)}")


def from_numpy_dtype(npd: np.dtype, argument: str = "data") -> DType:
    return dtype(npd, argument)


def _describe(values: np.ndarray, mask: np.ndarray) -> str:
    bad = values[mask]
    shown = ", ".join(repr(v.item()) for v in bad.ravel()[:3])
    return f"{int(mask.sum())} value(s) such as {shown}"


def convert_exact(arr: np.ndarray, target: DType, argument: str = "data") -> np.ndarray:
    """Convert ``arr`` to ``target``'s numpy dtype, refusing any change of value.

    Floats may narrow (f64 to f32 rounds, as floats do) but may not overflow to inf;
    integers must fit; floats become integers only when they are whole and fit."""
    src = arr.dtype
    dst = target.numpy
    if src == dst:
        return arr
    if src.kind == "b":
        arr = arr.astype(np.uint8)
        src = arr.dtype
    if dst.kind == "b":
        return _to_bool_exact(arr, target, argument)
    if src.kind == "c" or dst.kind == "c":
        return _to_complex_exact(arr, target, argument)
    if src.kind not in "iuf":
        raise DtypeError(f"{argument}: cannot store {src} data as {target.name}; expected numbers")
    if dst.kind == "f":
        return _to_float_exact(arr, target, argument)
    info = np.iinfo(dst)
    if src.kind == "f":
        bad = ~np.isfinite(arr)
        with np.errstate(invalid="ignore"):
            bad |= arr != np.trunc(arr)
        if bad.any():
            raise DtypeError(f"{argument}: {_describe(arr, bad)} are not whole numbers; "
                             f"{target.name} holds integers only (round them first)")
        # Bounds as exact powers of two, compared in float64: int64's max is no float, and
        # `arr > info.max` lets 2.0**63 through (it rounds the bound up to 2**63).
        a64 = arr.astype(np.float64)
        bad = (a64 < float(info.min)) | (a64 >= 2.0 ** (8 * dst.itemsize - (info.min < 0)))
    else:
        if src.kind == "u" and info.min == 0:
            bad = arr > info.max
        elif src.kind == "u":
            bad = arr > np.uint64(info.max)
        elif info.min == 0:
            bad = (arr < 0) | (arr.astype(np.int64) > np.int64(min(info.max, 2**63 - 1)))
            if dst.itemsize == 8:
                bad = arr < 0
        else:
            bad = (arr < info.min) | (arr > info.max)
    if np.any(bad):
        raise DtypeError(f"{argument}: {_describe(arr, bad)} are out of range for "
                         f"{target.name} ({info.min}..{info.max})")
    return arr.astype(dst)


def _to_float_exact(arr: np.ndarray, target: DType, argument: str) -> np.ndarray:
    """convert_exact to a float dtype: floats may narrow but not overflow, integers must
    come out exactly."""
    src, dst = arr.dtype, target.numpy
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(dst)
    if src.kind == "f":
        overflow = np.isinf(out) & np.isfinite(arr)
        if overflow.any():
            raise DtypeError(f"{argument}: {_describe(arr, overflow)} are out of range for "
                             f"{target.name} (max {float(np.finfo(dst).max):g})")
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            back = out.astype(np.float64)
        inexact = ~np.isfinite(back) | (back != arr.astype(np.float64))
        if src.kind in "iu" and src.itemsize == 8:
            # float64 cannot hold every int64; compare in integers where they fit
            lo, hi = (0.0, 2.0**64) if src.kind == "u" else (-(2.0**63), 2.0**63)
            ok = np.isfinite(back) & (back >= lo) & (back < hi)
            inexact = ~ok
            if ok.ndim == 0:  # a 0-d array: boolean masks index it only through [()]
                inexact = ~ok | (ok & (back.astype(src) != arr))
            else:
                inexact[ok] = back[ok].astype(src) != arr[ok]
        if inexact.any():
            raise DtypeError(f"{argument}: {_describe(arr, inexact)} cannot be stored "
                             f"exactly as {target.name}")
    return out


def _to_bool_exact(arr: np.ndarray, target: DType, argument: str) -> np.ndarray:
    """convert_exact to bool: numbers that are 0 or 1 (compare with != 0 to make truth values
    of others)."""
    if arr.dtype.kind not in "iuf":
        raise DtypeError(f"{argument}: cannot store {arr.dtype} data as {target.name}; "
                         f"expected True/False or 0/1")
    with np.errstate(invalid="ignore"):
        bad = (arr != 0) & (arr != 1)
    if bad.any():
        raise DtypeError(f"{argument}: {_describe(arr, bad)} are not 0 or 1; {target.name} "
                         f"holds True and False only (compare first, e.g. x != 0)")
    return arr.astype(np.bool_)


def _to_complex_exact(arr: np.ndarray, target: DType, argument: str) -> np.ndarray:
    """convert_exact to or from a complex dtype: complex data is stored as complex only (its
    imaginary part would be lost), each part converted as a float of the part's width."""
    if target.kind != "c":
        raise DtypeError(f"{argument}: cannot store {arr.dtype} data as {target.name}: the "
                         f"imaginary part would be lost (take .real or .imag first)")
    if arr.dtype.kind not in "iufc":
        raise DtypeError(f"{argument}: cannot store {arr.dtype} data as {target.name}; "
                         f"expected numbers")
    part = target.part
    re = _to_float_exact(np.real(arr), part, argument)
    im = _to_float_exact(np.imag(arr), part, argument) if arr.dtype.kind == "c" else 0
    out = np.empty(arr.shape, target.numpy)
    out.real, out.imag = re, im
    return out


def complex_holds(src: DType, target: DType) -> bool:
    """Whether every value of ``src`` is one of complex ``target`` (its parts hold it)."""
    part = src.part if src.kind == "c" else src
    return part == target.part or (target.name == "c128" and part.name in ("f32", "s32",
                                                                           "u32"))


_CPLX = (complex, np.complexfloating)


def list_to_array(data, target: DType, argument: str = "data") -> np.ndarray:
    """Turn a (nested) list of Python numbers into a numpy array of ``target`` exactly."""
    try:
        raw = np.array(data, dtype=object)
    except ValueError as e:
        raise ShapeError(f"{argument}: nested lists are ragged ({e})") from None
    if raw.dtype == object and raw.size:
        flat = raw.ravel()
        for v in flat:
            if isinstance(v, (list, tuple)):
                raise ShapeError(f"{argument}: nested lists are ragged")
            if not isinstance(v, (int, float, np.integer, np.floating, bool, np.bool_)) and \
                    not (target.kind == "c" and isinstance(v, _CPLX)):
                raise DtypeError(f"{argument}: element {v!r} of type {type(v).__name__} "
                                 f"is not a number")
        arr = _exact_from_python(flat.tolist(), target, argument)
        arr = arr.reshape(raw.shape)
    else:
        arr = np.zeros(raw.shape, dtype=target.numpy)
    return convert_exact(arr, target, argument)


def _exact_from_python(values: list, target: DType, argument: str) -> np.ndarray:
    """Python numbers to a 1-D array for convert_exact, checking each int exactly: Python
    ints may exceed int64, and an int must not be rounded by a float on its way in."""
    _int = (int, np.integer, np.bool_)  # bool is an int
    if target.kind == "b":  # through the exact float64 / int64 path, then 0 or 1 only
        is_int = all(isinstance(v, _int) for v in values)
        wide = DTYPES["s64"] if is_int else DTYPES["f64"]
        return _to_bool_exact(_exact_from_python(values, wide, argument), target, argument)
    if target.kind == "c":  # each part exactly as a float of the parts' dtype
        part = target.part
        re = _exact_from_python([v.real if isinstance(v, _CPLX) else v for v in values],
                                part, argument)
        im = _exact_from_python([v.imag if isinstance(v, _CPLX) else 0 for v in values],
                                part, argument)
        return re + 1j * im
    if target.is_float:
        exact_below = 2 ** (np.finfo(target.numpy).nmant + 1)  # every int up to it is exact
        out, bad = [], []
        for v in values:
            if isinstance(v, _int):
                v = int(v)
                if not -exact_below <= v <= exact_below and not _int_fits_float(v, target):
                    bad.append(v)
                    continue
            out.append(float(v))
        if bad:
            raise DtypeError(f"{argument}: {len(bad)} value(s) such as "
                             f"{', '.join(map(repr, bad[:3]))} cannot be stored exactly as "
                             f"{target.name}")
        return np.array(out, dtype=np.float64)
    info = np.iinfo(target.numpy)
    lo, hi = int(info.min), int(info.max)
    ints, fractions, bad = [], [], []
    for v in values:
        if not isinstance(v, _int):
            f = float(v)
            if not math.isfinite(f) or f != math.floor(f):
                fractions.append(f)
                continue
            v = f
        v = int(v)
        if not lo <= v <= hi:
            bad.append(v)
        ints.append(v)
    if fractions:
        raise DtypeError(f"{argument}: {len(fractions)} value(s) such as "
                         f"{', '.join(map(repr, fractions[:3]))} are not whole numbers; "
                         f"{target.name} holds integers only (round them first)")
    if bad:
        raise DtypeError(f"{argument}: {len(bad)} value(s) such as "
                         f"{', '.join(map(repr, bad[:3]))} are out of range for "
                         f"{target.name} ({lo}..{hi})")
    return np.array(ints, dtype=target.numpy)


def _int_fits_float(v: int, target: DType) -> bool:
    """Whether the Python int ``v`` is exactly a finite value of the float dtype."""
    try:
        with np.errstate(over="ignore"):
            t = target.numpy.type(float(v))
    except OverflowError:
        return False
    return bool(np.isfinite(t)) and int(t) == v
