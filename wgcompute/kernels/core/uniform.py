"""The memory layout of a user kernel's uniform params (WGSL's "Memory Layout" rules: the
alignment and size of scalars, vectors, matrices, fixed-size arrays and structs) and the
packing of Python values (numbers, tuples, numpy arrays, dicts for structs) into it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...dtypes import DTYPES, convert_exact
from ...errors import ArgumentError, DtypeError
from .reflect import TypeRef

# WGSL scalar -> (dtype name, byte size); also its alignment
SCALAR = {"f32": ("f32", 4), "i32": ("s32", 4), "u32": ("u32", 4), "f16": ("f16", 2),
          "f64": ("f64", 8), "i64": ("s64", 8)}
_MAT = re.compile(r"mat([234])x([234])$")


def _round_up(k: int, n: int) -> int:
    return -(-n // k) * k


@dataclass(frozen=True)
class UniformType:
    """A host-shareable WGSL type as laid out in memory. ``kind``: "scalar", "vector",
    "matrix" (``shape`` (columns, rows)), "array" (``shape`` (count,), ``stride``) or
    "struct" (``members``: (name, offset, UniformType))."""

    text: str
    kind: str
    align: int
    size: int
    scalar: str | None = None
    shape: tuple[int, ...] = ()
    stride: int = 0
    element: UniformType | None = None
    members: tuple[tuple[str, int, UniformType], ...] = ()

    def __str__(self) -> str:
        return self.text

    def pack(self, value, where: str) -> bytes:
        """``value`` in this type's bytes (``size`` of them), converted exactly; anything
        else is an ArgumentError naming ``where`` and what this type takes."""
        out = bytearray(self.size)
        self._into(out, 0, value, where)
        return bytes(out)

    def _into(self, out: bytearray, at: int, value, where: str) -> None:
        if self.kind == "struct":
            if not isinstance(value, dict):
                raise ArgumentError(f"{where}: {self.text} is a struct; give a dict of its "
                                    f"fields ({', '.join(m[0] for m in self.members)}), got "
                                    f"{type(value).__name__} {value!r}")
            names = [m[0] for m in self.members]
            extra = sorted(set(map(str, value)) - set(names))
            missing = [n for n in names if n not in value]
            if extra or missing:
                raise ArgumentError(f"{where}: {self.text} has the fields "
                                    f"{', '.join(names)}; "
                                    + (f"{', '.join(extra)} is not one" if extra else
                                       f"{', '.join(missing)} is missing"))
            for name, offset, t in self.members:
                t._into(out, at + offset, value[name], f"{where}.{name}")
            return
        if self.kind == "array":
            items = _sequence(value, self.shape[0], where, self.text)
            for k, item in enumerate(items):
                self.element._into(out, at + k * self.stride, item, f"{where}[{k}]")
            return
        self._numbers_into(out, at, value, where)

    def _numbers_into(self, out: bytearray, at: int, value, where: str) -> None:
        """A scalar, vector or matrix: numbers, in the layout's places (a matrix's columns
        are vectors ``align`` bytes apart)."""
        dt = DTYPES[SCALAR[self.scalar][0]]
        if isinstance(value, (bool, np.bool_)) or (
                isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value)):
            raise ArgumentError(f"{where}: {self.text} holds numbers, got {value!r}")
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.dtype.kind not in "iuf" or arr.shape != self.shape:
            if self.kind == "matrix":
                want = (f"{self.shape[0]} columns of {self.shape[1]} numbers (shape "
                        f"{self.shape}: value[c] is column c, as WGSL's m[c])")
            else:
                want = f"{self.shape[0]} numbers" if self.shape else "a number"
            raise ArgumentError(f"{where}: {self.text} takes {want}, got {value!r}")
        try:
            arr = convert_exact(np.atleast_1d(arr), dt, where)
        except DtypeError as e:
            raise ArgumentError(str(e)) from None
        arr = arr.reshape(-1, self.shape[-1] if self.shape else 1).astype(
            dt.numpy.newbyteorder("<"))
        column = self.element.align if self.kind == "matrix" else 0
        for c, col in enumerate(arr):
            data = col.tobytes()
            out[at + c * column:at + c * column + len(data)] = data


def _sequence(value, count: int, where: str, text: str) -> list:
    if isinstance(value, np.ndarray):
        value = list(value)
    if not isinstance(value, (list, tuple)) or len(value) != count:
        raise ArgumentError(f"{where}: {text} takes {count} elements (a list, tuple or numpy "
                            f"array), got {value!r}")
    return list(value)


def layout(t: TypeRef, structs: dict, where: str) -> UniformType:
    """The layout of ``t`` (a reflected type; ``structs``: the shader's struct name ->
    fields): WGSL's AlignOf and SizeOf. A type that is not host-shareable, or a struct member
    with @align/@size, is an ArgumentError naming ``where``."""
    text = str(t)
    if t.name in SCALAR and not t.args:
        size = SCALAR[t.name][1]
        return UniformType(text, "scalar", size, size, t.name)
    if t.name in ("vec2", "vec3", "vec4") and t.args and str(t.args[0]) in SCALAR:
        n, s = int(t.name[3]), SCALAR[str(t.args[0])][1]
        return UniformType(text, "vector", s * (2 if n == 2 else 4), s * n, str(t.args[0]),
                           (n,))
    m = _MAT.match(t.name)
    if m and t.args and str(t.args[0]) in SCALAR:
        c, r = int(m.group(1)), int(m.group(2))
        col = layout(TypeRef(f"vec{r}", t.args), structs, where)
        stride = _round_up(col.align, col.size)
        return UniformType(text, "matrix", col.align, c * stride, col.scalar, (c, r),
                           element=col)
    if t.name == "array" and len(t.args) == 2:
        e = layout(t.args[0], structs, where)
        count = _count(t.args[1], where, text)
        stride = _round_up(e.align, e.size)
        return UniformType(text, "array", e.align, count * stride, None, (count,), stride, e)
    if t.name in structs and not t.args:
        return _struct_layout(t.name, structs, where)
    raise ArgumentError(f"{where}: {text} cannot be a params field; wgcompute fills scalars "
                        f"(f32, i32, u32, f16, f64, i64), vectors, matrices, fixed-size "
                        f"arrays and structs of them")


def _struct_layout(name: str, structs: dict, where: str, seen=()) -> UniformType:
    if name in seen:
        raise ArgumentError(f"{where}: struct {name} contains itself")
    members, offset, align = [], 0, 1
    for f in structs[name]:
        if f.layout_attrs:
            raise ArgumentError(f"{where}: struct {name}'s field {f.name!r} is declared with "
                                f"@align/@size; wgcompute lays out params by WGSL's default "
                                f"rules only")
        ft = layout(f.type, structs, f"{where}.{f.name}")
        offset = _round_up(ft.align, offset)
        members.append((f.name, offset, ft))
        offset += ft.size
        align = max(align, ft.align)
    return UniformType(name, "struct", align, _round_up(align, offset), members=tuple(members))


def _count(arg, where: str, text: str) -> int:
    s = str(arg).strip().rstrip("ui")
    try:
        n = int(s, 0)
    except ValueError:
        n = 0
    if n <= 0:
        raise ArgumentError(f"{where}: {text}: wgcompute reads an array's element count from a "
                            f"literal (array<vec4<f32>, 4>), not {arg!r}")
    return n
