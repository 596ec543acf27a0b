"""The typed argument lists of user kernels (``"x: T, y: T, a: f32"``): parsing, the
generic types (``T``) resolved from the arguments, and scalars converted exactly."""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass

import numpy as np

from ...buffer import Buffer, check_buffer
from ...dtypes import DTYPES, DType, convert_exact
from ...dtypes import dtype as resolve_dtype
from ...errors import ArgumentError, DtypeError
from ..core import shaders

# the dtypes user kernels compute in, and the WGSL type a body sees for each (u8 as u32,
# bool as bool: their lanes are unpacked from u32 words and packed again)
TYPES = ("f32", "f64", "f16", "s32", "s64", "u32", "u8", "bool")
_BODY_TYPE = {"f32": "f32", "f64": "f64", "f16": "f16", "s32": "i32", "s64": "i64",
              "u32": "u32", "u8": "u32", "bool": "bool"}
# a scalar's uniform field: u8 and bool travel as a u32
UNIFORM_TYPE = {"f32": "f32", "f64": "f64", "f16": "f16", "s32": "i32", "s64": "i64",
                "u32": "u32", "u8": "u32", "bool": "u32"}
_ARG = re.compile(r"\s*([A-Za-z_]\w*)\s*:\s*([A-Za-z_]\w*)\s*$")
_GENERIC = re.compile(r"[A-Z][A-Z0-9]*$")
RESERVED = ("i", "n", "p")  # the body's element index, element count; the params struct


@dataclass(frozen=True)
class Arg:
    """One argument of a signature: its name and type, a dtype name or a generic ("T")."""

    name: str
    type: str

    @property
    def generic(self) -> bool:
        return self.type not in DTYPES


def parse_args(where: str, what: str, text) -> tuple[Arg, ...]:
    """``"x: T, y: T, a: f32"`` as Args (a list of such strings is taken too); types are
    dtype names (f32, s32, i32, u8, bool, ...) or generics (upper case: T, U, T2)."""
    if isinstance(text, (list, tuple)):
        text = ", ".join(map(str, text))
    if not isinstance(text, str):
        raise ArgumentError(f"{where}: {what}: expected a string like 'x: T, y: f32', got "
                            f"{type(text).__name__} {text!r}")
    out = []
    for part in filter(str.strip, text.split(",")):
        m = _ARG.match(part)
        if not m:
            raise ArgumentError(f"{where}: {what}: {part.strip()!r} is not 'name: type' (e.g. "
                                f"'x: T' or 'a: f32')")
        name, t = m.groups()
        if name in [a.name for a in out]:
            raise ArgumentError(f"{where}: {what}: argument {name!r} is named twice")
        if name in RESERVED or name.startswith("wgc_") or name in DTYPES:
            raise ArgumentError(f"{where}: {what}: argument name {name!r} is taken (i, n, p, "
                                f"dtype names and names starting with wgc_ are wgcompute's)")
        if _GENERIC.match(t) and t not in DTYPES:
            out.append(Arg(name, t))
            continue
        try:
            d = resolve_dtype(t, f"{where}: {what}: {name}")
        except DtypeError:
            raise ArgumentError(f"{where}: {what}: {name!r} has type {t!r}; expected one of "
                                f"{', '.join(TYPES)} or a generic name in upper case (T)") \
                from None
        if d.name not in TYPES:
            raise ArgumentError(f"{where}: {what}: {name!r} is {d.name}; user kernels compute "
                                f"in {', '.join(TYPES)}")
        out.append(Arg(name, d.name))
    return tuple(out)


def check_names(where: str, ins: tuple[Arg, ...], outs: tuple[Arg, ...]) -> None:
    if not outs:
        raise ArgumentError(f"{where}: out_params: a kernel needs at least one output")
    names = [a.name for a in ins + outs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ArgumentError(f"{where}: argument {twice[0]!r} is named twice in in_params and "
                            f"out_params")


def body_type(dtype_name: str) -> str:
    return _BODY_TYPE[dtype_name]


def digest(*parts) -> str:
    """A short fingerprint of a kernel's source, for its compiled programs' cache key."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def bind_types(where: str, args: tuple[Arg, ...], values, bound: dict[str, DType],
               first: dict[str, str]) -> None:
    """Fill ``bound`` (generic -> DType) from the Buffers among ``values`` and check every
    typed Buffer; ``first`` remembers which argument fixed each generic (for messages)."""
    for a, v in zip(args, values):
        if not isinstance(v, Buffer):
            continue
        check_buffer(v, f"{where}: {a.name}")
        dt = v._dt
        if dt.name not in TYPES:
            raise DtypeError(f"{where}: {a.name} is {dt.name}; user kernels compute in "
                             f"{', '.join(TYPES)}")
        if not a.generic:
            if dt.name != a.type:
                raise DtypeError(f"{where}: {a.name} is {dt.name}, but the kernel declares "
                                 f"{a.name}: {a.type}")
        elif a.type not in bound:
            bound[a.type], first[a.type] = dt, a.name
        elif bound[a.type] != dt:
            raise DtypeError(f"{where}: {a.name} is {dt.name}, but {first[a.type]} is "
                             f"{bound[a.type].name} and both are declared {a.type}")


def bind_scalar_types(where: str, args, values, bound: dict[str, DType], first) -> None:
    """Generics no Buffer fixed: from numpy scalars (np.float32(2) is f32); a Python number
    cannot fix one (which width would it be?)."""
    for a, v in zip(args, values):
        if isinstance(v, Buffer) or not a.generic or a.type in bound:
            continue
        if isinstance(v, np.generic):
            d = resolve_dtype(v.dtype, f"{where}: {a.name}")
            if d.name not in TYPES:
                raise DtypeError(f"{where}: {a.name} is {d.name}; user kernels compute in "
                                 f"{', '.join(TYPES)}")
            bound[a.type], first[a.type] = d, a.name


def convert_scalar(where: str, a: Arg, value, dt: DType):
    """A scalar argument as the exact value of ``dt`` (a Python int, float or bool); a value
    that would change (2.5 as s32, 300 as u8) is an ArgumentError naming it."""
    ok = isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))
    if not ok:
        raise ArgumentError(f"{where}: {a.name} must be a wgc.Buffer or a number, got "
                            f"{type(value).__name__} {value!r}")
    if dt.kind == "b":
        if not (isinstance(value, (bool, np.bool_)) or value in (0, 1)):
            raise ArgumentError(f"{where}: {a.name} is bool: True or False (or 1 or 0), got "
                                f"{value!r}")
        return int(bool(value))
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{where}: {a.name} is {dt.name}, got the bool {value!r}")
    try:
        return convert_exact(np.atleast_1d(np.asarray(value)), dt,
                             f"{where}: {a.name}")[0].item()
    except DtypeError as e:
        raise ArgumentError(str(e)) from None


def resolved(where: str, a: Arg, bound: dict[str, DType]) -> DType:
    if not a.generic:
        return DTYPES[a.type]
    if a.type not in bound:
        raise DtypeError(f"{where}: the type {a.type} of {a.name} is not fixed by any "
                         f"argument; pass a Buffer or a numpy scalar (np.float32(2)) for one "
                         f"of the arguments declared {a.type}, or the output in out=")
    return bound[a.type]


def call_types(where: str, in_args, out_args, args, outs):
    """The dtypes of one call's arguments and outputs: generics fixed by the Buffers among
    ``args``, then by ``outs`` (given outputs, or None), then by numpy scalars. Returns
    (input dtypes, output dtypes, generic -> DType)."""
    bound: dict[str, DType] = {}
    first: dict[str, str] = {}
    bind_types(where, in_args, args, bound, first)
    if outs is not None:
        bind_types(where, out_args, outs, bound, first)
    bind_scalar_types(where, in_args, args, bound, first)
    return ([resolved(where, a, bound) for a in in_args],
            [resolved(where, a, bound) for a in out_args], bound)


def check_count(where: str, in_args, args) -> None:
    if len(args) != len(in_args):
        raise ArgumentError(f"{where}: takes {len(in_args)} argument(s) "
                            f"({', '.join(a.name for a in in_args)}), got {len(args)}")


def read_element(name: str, dt: str, at: str) -> str:
    """WGSL reading element ``at`` of array input ``name`` as its body type (u8 and bool
    unpacked from their u32 word: packed.wgsl's lane_u)."""
    if DTYPES[dt].packed:
        lane = f"lane_u(wgc_in_{name}[({at}) / 4u], {at}, 8u)"
        return f"({lane} != 0u)" if dt == "bool" else lane
    return f"wgc_in_{name}[{at}]"


def storage_element(dt: str) -> str:
    return "u32" if DTYPES[dt].packed else body_type(dt)


def scalar_read(a: Arg, dt: str) -> str:
    return f"(p.u_{a.name} != 0u)" if dt == "bool" else f"p.u_{a.name}"


def check_wgsl_text(where: str, what: str, text, required: bool = True) -> str:
    if not isinstance(text, str) or "${" in text:
        raise ArgumentError(f"{where}: {what}: expected WGSL text (without ${{...}}), got "
                            f"{text!r}")
    if required and not text.strip():
        raise ArgumentError(f"{where}: {what}: empty; expected WGSL")
    return text


def check_name(name, default: str) -> str:
    name = default if name is None else name
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(f"name: expected an identifier-like string, got {name!r}")
    return name


def call_signature(in_args, **keywords) -> inspect.Signature:
    """A user kernel's call, for help() and inspect: its arguments, then keywords."""
    kind = inspect.Parameter
    return inspect.Signature([kind(a.name, kind.POSITIONAL_ONLY) for a in in_args]
                             + [kind(k, kind.KEYWORD_ONLY, default=v)
                                for k, v in keywords.items()])


def program_values(owner, types, fields, storage, packed: bool, more_wgsl=()) -> dict:
    """The names user/params.wgsl reads, for either user kernel (``owner``: its in_args,
    out_args and preamble) over the dtypes ``types`` (inputs then outputs): the enable lines
    (also for the WGSL types ``more_wgsl``), the generic types' aliases, the user's
    preamble, the uniform's ``fields`` (name, type), the ``storage`` bindings (slot, access,
    name, element) with the uniform after them, and whether a packed dtype is read or
    written."""
    generics = {a.type: body_type(t)
                for a, t in zip(owner.in_args + owner.out_args, types) if a.generic}
    return {
        "ENABLE": shaders.enable_directives([DTYPES[t].wgsl for t in types] + list(more_wgsl)),
        "ALIASES": "\n".join(f"alias {g} = {t};" for g, t in generics.items()),
        "PREAMBLE": owner.preamble, "FIELDS": fields, "STORAGE": storage, "UB": len(storage),
        "PACKED": packed,
    }
