"""The user's own WGSL kernels (registry.register_kernel): CustomKernel, what travels of one
to another process (KernelRecipe), and the checks that read a kernel's bindings, params,
dtypes and workgroup size from its shader against what register_kernel was given."""

from __future__ import annotations

import math
import os
import pickle
from dataclasses import dataclass

import numpy as np

from ...dtypes import DTYPES
from ...dtypes import dtype as resolve_dtype
from ...errors import ArgumentError, DtypeError, ShaderCompileError, ShapeError
from ...runtime import current_device
from . import shaders
from .base import Kernel, Launch, Param, PipelineKey, fold_grid
from .reflect import reflect
from .template import TemplateError

_ACCESS = ("read", "read_write", "uniform")
_PARAM_TYPES = ("f32", "i32", "u32", "f16", "f64", "i64", "T")  # "T": the kernel's dtype
_WGSL_DTYPE = {"f32": "f32", "f16": "f16", "i32": "s32", "u32": "u32", "f64": "f64",
               "i64": "s64"}
T_PROBE = "__wgcompute_T"  # stands for ${T} while the structure of a templated shader is read
DEFAULT_WG = 256  # what ${WG} becomes when workgroup_size= is not given
_AUTO = {"n": "the number of output elements",
         "offset": "the index of the first element of each dispatch"}
# how a custom kernel unpickles: registry.kernel_from_recipe, which the registry (above this
# module) installs here
from_recipe = None


@dataclass(frozen=True)
class KernelRecipe:
    """What register_kernel was given, as data: a custom kernel pickles as this, and the
    receiving process registers it once (kernel_from_recipe). The shader declares its
    bindings, params and workgroup size; ``workgroup_size`` is the ${WG} a templated shader
    was given, ``grid`` the pickled grid callable (bytes), so that two copies of one recipe
    compare equal."""

    name: str
    source: str
    workgroup_size: tuple[int, ...] | None  # as given to register_kernel (None: the shader's)
    dtypes: tuple[str, ...]
    entry_point: str
    grid: bytes | None
    checked: bool


def _pickle_grid(name: str, grid) -> bytes | None:
    if grid is None:
        return None
    try:
        return pickle.dumps(grid)
    except (pickle.PicklingError, TypeError, AttributeError):
        pass
    try:  # a lambda or closure: cloudpickle (installed with wgcompute[dask]) carries it
        import cloudpickle
    except ImportError:
        raise ArgumentError(f"{name}: its grid callable {grid!r} does not pickle (a lambda or a "
                            f"local function); define it at module level or install "
                            f"cloudpickle") from None
    return cloudpickle.dumps(grid)

class CustomKernel(Kernel):
    """A user's WGSL kernel, described by what its shader declares (see register_kernel):
    inputs are its read-only storage buffers in @binding order, the output its one
    read_write buffer, the params the fields of its uniform struct. It pickles as its
    KernelRecipe."""

    _recipe: KernelRecipe | None = None

    def __init__(self, name, source, *, inputs, output, slots, elements, lanes, types,
                 param_fields, workgroup_size, wg_fill, dtypes, grid, checked, entry_point,
                 builtins, follows=()):
        self.name = name
        self.checked = checked
        self.source_text = source
        self.templated = "${" in source
        self.inputs = inputs
        self.output = output
        self.slots = slots
        self.elements = elements  # per storage binding: WGSL scalar, "T", or None (a struct)
        self.lanes = lanes  # per storage binding: scalars per array element
        self.types = types  # per storage binding: the declared type, for messages
        self.param_fields = param_fields
        self.auto = tuple(n for n, _ in param_fields if n in _AUTO)
        self.params = tuple(Param(n, t) for n, t in param_fields if n not in _AUTO)
        self.workgroup_size = workgroup_size
        self.wg_fill = wg_fill
        self.dtypes = dtypes
        self.grid = grid
        self.entry_point = entry_point
        self.builtins = builtins
        # per input: None, or (how, index) where the shader reads it at the index it writes
        # the output at: "same" (only there: an elementwise input, same element count) or
        # "cover" (there and elsewhere: at least the output's count)
        self.follows = tuple(follows) or (None,) * len(inputs)
        self.description = "user kernel"

    def recipe(self) -> KernelRecipe:
        """The registration as data (what travels to another process)."""
        if self._recipe is None:
            self._recipe = KernelRecipe(
                self.name, self.source_text, self.given_workgroup_size, tuple(self.dtypes),
                self.entry_point, _pickle_grid(self.name, self.grid), self.checked)
        return self._recipe

    def __reduce__(self):
        return from_recipe, (self.recipe(),)

    def binding_slots(self):
        return self.slots

    def resolve_params(self, params, dt):
        if isinstance(params, dict):
            for name in self.auto:
                if name in params:
                    raise ArgumentError(f"{self.name}: param {name!r} is set by wgcompute "
                                        f"({_AUTO[name]}); leave it out")
        return super().resolve_params(params, dt)

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        src = self.source_text
        if self.templated:
            src = render_source(self.name, src, t, self.wg_fill, shaders.enable_directives([t]))
        return src, tuple((n, t if pt == "T" else pt) for n, pt in self.param_fields)

    def check(self, inputs, output, params) -> None:
        """Each input's dtype is the one its binding declares (an f32 buffer read as
        array<i32> would be reinterpreted bit for bit)."""
        for i, (name, b) in enumerate(zip(self.inputs, inputs)):
            elem = self.elements[i]
            if elem is None:
                continue  # an array of structs: any bytes
            if elem == "T":
                if b.dtype != output.dtype:
                    raise DtypeError(f"{self.name}: input {name!r} is {b.dtype} and the output "
                                     f"{output.dtype}; the shader declares both with ${{T}}")
            elif DTYPES[b.dtype].wgsl != elem:
                want = " or ".join(d for d, t in ((d, DTYPES[d].wgsl) for d in DTYPES)
                                   if t == elem)
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype}, but the shader "
                                 f"declares {name}: {self.types[i]} (expected {want})")
        lanes = self.lanes[-1]
        if lanes > 1 and output.size % lanes:
            raise ShapeError(f"{self.name}: output {output.shape} holds {output.size} "
                             f"elements, not a whole number of the shader's "
                             f"{self.types[-1]} items of {lanes}")
        self._check_sizes(inputs, output)

    def _check_sizes(self, inputs, output) -> None:
        """An input the shader reads at the output's own index (``out[i] = x[i] ...``) must
        hold as many array elements as the output: fewer would be read past its end (naga's
        checks clamp the index: silently wrong), more would be left unread."""
        count = None
        for i, (name, b) in enumerate(zip(self.inputs, inputs)):
            rule = self.follows[i]
            if rule is None:
                continue
            if count is None:
                count = self.items(output)
            lanes = self.lanes[i]
            have = b.size // lanes if lanes > 1 else b.size
            how, at = rule
            if have == count or (how == "cover" and have > count):
                continue
            shapes = ", ".join([f"input {n!r} {x.shape}" for n, x in zip(self.inputs, inputs)]
                               + [f"output {self.output!r} {output.shape}"])
            need = "as many" if how == "same" else "at least as many"
            raise ShapeError(f"{self.name}: shapes differ: {shapes}; the shader reads "
                             f"{name}[{at}] where it writes {self.output}[{at}], so {name!r} "
                             f"needs {need} elements as the output ({count}), not {have}")

    def items(self, output) -> int:
        """Elements of the output array: one per dtype element, or per vector/matrix."""
        lanes = self.lanes[-1]
        return output.size // lanes if lanes > 1 else output.size

    def launches(self, inputs, output, params, device):
        values = dict(params)
        count = self.items(output)
        if "n" in self.auto:
            values["n"] = count
        if "offset" in self.auto:
            values["offset"] = 0
        if self.grid is not None:
            wg = self._check_grid(self.grid(inputs, output, params), device)
            return [Launch(wg, values)] if all(wg) else []
        wgx = self.workgroup_size[0]
        groups = math.ceil(count / wgx)
        if groups == 0:
            return []
        limit = device.limit("max-compute-workgroups-per-dimension")
        if groups <= limit:
            return [Launch((groups, 1, 1), values)]
        if "offset" in self.auto:
            # Several dispatches of at most `limit` workgroups, each told where it starts:
            # gid.x + offset is the element index in every one of them.
            per = limit * wgx
            return [Launch((math.ceil(min(per, count - start) / wgx), 1, 1),
                           dict(values, offset=start)) for start in range(0, count, per)]
        if "num_workgroups" in self.builtins:
            return [Launch(fold_grid(groups, device, self.name), values)]
        raise ShapeError(
            f"{self.name}: {count} output elements need {groups} workgroups of {wgx}, more "
            f"than the {limit} one dispatch allows along x; wgcompute does not fold them into "
            f"y behind the shader's back (gid.x would not be the element index). Either add "
            f"`offset: u32` to the params struct and index with `let i = gid.x + p.offset;` "
            f"(wgcompute then splits the work into several dispatches), or take "
            f"@builtin(num_workgroups) nwg and @builtin(workgroup_id) wid and index with "
            f"`(wid.y * nwg.x + wid.x) * {wgx}u + lid` (the grid is then folded into x and "
            f"y), or pass grid=")

    def _check_grid(self, wg, device) -> tuple[int, int, int]:
        """The user's grid() result: 1 to 3 whole, non-negative counts within the adapter's
        workgroups per dimension."""
        ok = isinstance(wg, (list, tuple)) and 1 <= len(wg) <= 3 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in wg)
        if not ok:
            raise ArgumentError(f"{self.name}: grid() must return 1 to 3 non-negative ints "
                                f"(workgroup counts), got {wg!r}")
        wg = (tuple(int(v) for v in wg) + (1, 1))[:3]
        limit = device.limit("max-compute-workgroups-per-dimension")
        if max(wg) > limit:
            raise ShapeError(f"{self.name}: grid() returned {wg} workgroups; "
                             f"{device.name} allows at most {limit} per dimension")
        return wg


def render_source(name: str, source: str, t: str, wg, enable: str) -> str:
    try:
        return shaders.render(source, {"T": t, "WG": wg, "ENABLE": enable}, name=name)
    except TemplateError as e:
        if e.missing is None:
            raise ArgumentError(f"{name}: {e}") from None
        raise ArgumentError(f"{name}: template placeholder {e.missing!r} has no value; "
                            f"available: T, WG, ENABLE") from None


def _size_text(size) -> str:
    size = tuple(size)
    while len(size) > 1 and size[-1] == 1:
        size = size[:-1]
    return ", ".join(map(str, size))


def check_args(bindings, params, workgroup_size, dtypes, entry_point, grid, checked):
    """The explicit arguments, on their own; normalized."""
    if bindings is not None:
        bindings = _check_bindings_arg(bindings, params)
    if params is not None:
        if not isinstance(params, dict):
            raise ArgumentError(f"params: expected a dict of field name to WGSL scalar type, "
                                f"got {type(params).__name__}")
        for pn, pt in params.items():
            if pt not in _PARAM_TYPES:
                raise ArgumentError(f"params: field {pn!r} has type {pt!r}; expected one of "
                                    f"{', '.join(_PARAM_TYPES)}")
        params = list(params.items())
    if workgroup_size is not None:
        workgroup_size = _check_workgroup_size_arg(workgroup_size)
    if dtypes is not None:
        if isinstance(dtypes, str):
            dtypes = (dtypes,)
        if not isinstance(dtypes, (list, tuple)) or not dtypes:
            raise ArgumentError(f"dtypes: expected a non-empty list of dtype names, got "
                                f"{dtypes!r}")
        dtypes = tuple(resolve_dtype(d, "dtypes").name for d in dtypes)
    if entry_point is not None and not isinstance(entry_point, str):
        raise ArgumentError(f"entry_point: expected a function name, got {entry_point!r}")
    if not isinstance(checked, bool):
        raise ArgumentError(f"checked: expected True or False, got {checked!r}")
    if grid is not None and not callable(grid):
        raise ArgumentError("grid: expected a callable(inputs, output, params) -> (x, y, z)")
    return bindings, params, workgroup_size, dtypes


def _check_bindings_arg(bindings, params) -> list[tuple[str, str]]:
    """bindings= as (name, access) pairs: reads, one read_write, at most one uniform."""
    if isinstance(bindings, dict):
        bindings = list(bindings.items())
    try:
        bindings = [(str(n), str(a)) for n, a in bindings]
    except (TypeError, ValueError):
        raise ArgumentError("bindings: expected a list of (name, access) pairs") from None
    accesses = [a for _, a in bindings]
    bad = [a for a in accesses if a not in _ACCESS]
    if bad:
        raise ArgumentError(f"bindings: access {bad[0]!r} is not one of "
                            f"{', '.join(_ACCESS)}")
    if accesses.count("read_write") != 1:
        raise ArgumentError("bindings: exactly one binding must be 'read_write' (the "
                            "output)")
    order = [_ACCESS.index(a) for a in accesses]
    if order != sorted(order) or accesses.count("uniform") > 1:
        raise ArgumentError("bindings: declare reads first, then the read_write output, "
                            "then at most one uniform")
    if params is not None and "uniform" not in accesses and params:
        raise ArgumentError("params: declared, but bindings has no 'uniform' entry")
    if "uniform" in accesses and not params and params is not None:
        raise ArgumentError("bindings: a 'uniform' binding needs params (its struct "
                            "fields)")
    return bindings


def _check_workgroup_size_arg(workgroup_size) -> tuple[int, int, int]:
    sizes = workgroup_size if isinstance(workgroup_size, (tuple, list)) else \
        (workgroup_size,)
    if not 1 <= len(sizes) <= 3 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
            for v in sizes):
        raise ArgumentError(f"workgroup_size: expected a positive int or 1 to 3 of them, "
                            f"got {workgroup_size!r}")
    return (tuple(int(v) for v in sizes) + (1, 1))[:3]


def reflect_shader(name: str, probe: str, compile_source, checked: bool):
    """The shader's reflection; where the WGSL reader cannot read it, the compiler's own
    error if the compiler refuses it too."""
    try:
        return reflect(probe)
    except ShaderCompileError as reader_error:
        label, source = compile_source()
        try:
            shaders.create_module(current_device(), label, source, checked)
        except Exception as e:
            raise ShaderCompileError(label, source, str(e)) from e
        raise ShaderCompileError(label, probe, reader_error.compiler_message) from None


def storage_bindings(name: str, refl, bindings):
    """The shader's read buffers, its one read_write output and its uniforms (at most one),
    all in @group(0); ``bindings`` (checked by check_args) must be what it declares."""
    for b in refl.bindings:
        if b.group != 0:
            raise ArgumentError(f"{name}: binding {b.name!r} is in @group({b.group}); "
                                f"wgcompute binds @group(0) only")
        if b.space not in ("storage", "uniform"):
            raise ArgumentError(f"{name}: binding {b.name!r} is a {b.type}; wgcompute kernels "
                                f"bind storage buffers and one uniform")
    reads = [b for b in refl.bindings if b.space == "storage" and b.access == "read"]
    writes = [b for b in refl.bindings if b.space == "storage" and b.access != "read"]
    uniforms = [b for b in refl.bindings if b.space == "uniform"]
    if len(writes) != 1:
        listed = ", ".join(b.name for b in writes) or "none"
        raise ArgumentError(f"{name}: the shader declares {len(writes)} read_write storage "
                            f"buffers ({listed}); a kernel writes exactly one, its output")
    if len(uniforms) > 1:
        raise ArgumentError(f"{name}: the shader declares {len(uniforms)} uniforms "
                            f"({', '.join(b.name for b in uniforms)}); params are one struct")
    out_b = writes[0]
    declared = [(b.name, "read") for b in reads] + [(out_b.name, "read_write")] + \
        [(b.name, "uniform") for b in uniforms]
    if bindings is not None and bindings != declared:
        raise ArgumentError(f"{name}: bindings={bindings!r} but the shader declares "
                            f"{declared!r} (reads in @binding order, the output, the uniform)")
    return reads, out_b, uniforms


def kernel_dtypes(name: str, out_b, user_dtypes, templated: bool) -> tuple[str, ...]:
    """The kernel's dtypes: the ones given, which the output's element type must allow, or
    that element type's (f32 for a templated shader)."""
    out_elem = "T" if out_b.element == T_PROBE else out_b.element
    if user_dtypes is None:
        if out_elem == "T" or (out_elem is None and templated):
            return ("f32",)
        if out_elem in _WGSL_DTYPE:
            return (_WGSL_DTYPE[out_elem],)
        raise ArgumentError(f"{name}: the output {out_b.name!r} is {out_b.type}; pass "
                            f"dtypes= (the dtypes its buffers may have)")
    if out_elem not in (None, "T"):
        wrong = [d for d in user_dtypes if DTYPES[d].wgsl != out_elem]
        if wrong:
            raise ArgumentError(f"{name}: dtypes={user_dtypes!r} but the shader's output "
                                f"{out_b.name!r} is {out_b.type}; {wrong[0]} is not "
                                f"{out_elem}")
    return user_dtypes


def param_fields(name: str, uniforms, user_params, dts) -> list[tuple[str, str]]:
    """The params: the uniform struct's scalar fields as (name, type or "T"); ``user_params``
    (checked by check_args) must be the same."""
    fields = []
    if uniforms:
        u = uniforms[0]
        if not u.fields:
            raise ArgumentError(f"{name}: the uniform {u.name!r} is {u.type}; wgcompute fills "
                                f"a struct of scalars (its fields are the params)")
        for f in u.fields:
            t = "T" if f.type.name == T_PROBE else f.type.name
            if f.type.args or t not in _PARAM_TYPES or f.layout_attrs:
                raise ArgumentError(
                    f"{name}: params field {f.name!r} is "
                    f"{'declared with @align/@size' if f.layout_attrs else str(f.type)}; "
                    f"wgcompute fills scalar fields ({', '.join(_PARAM_TYPES[:-1])}, or ${{T}})")
            if f.name == "offset" and t != "u32":
                raise ArgumentError(f"{name}: params field 'offset' is {t}; wgcompute sets it "
                                    f"({_AUTO['offset']}), as a u32")
            fields.append((f.name, t))
    if user_params is not None:
        def same(user_t, shader_t):
            return user_t == shader_t or (user_t == "T" and all(
                DTYPES[d].wgsl == shader_t for d in dts))
        if [n for n, _ in user_params] != [n for n, _ in fields] or not all(
                same(ut, st) for (_, ut), (_, st) in zip(user_params, fields)):
            raise ArgumentError(f"{name}: params={dict(user_params)!r} but the shader's "
                                f"params struct declares {dict(fields)!r}")
    return fields


def check_workgroup(name: str, size, user_wg, workgroup_size, uses_wg: bool, wg_fill: int,
                    grid, device) -> None:
    """The shader's @workgroup_size ``size``: the one given (``user_wg``, normalized from
    ``workgroup_size``), the one its ${WG} computes with, within the device's limits, and 1-D
    for the default launch."""
    shown = f"@workgroup_size({_size_text(size)})"
    if user_wg is not None and user_wg != size:
        raise ArgumentError(f"{name}: workgroup_size={workgroup_size!r} but the shader "
                            f"declares {shown}")
    if uses_wg and user_wg is None and size != (wg_fill, 1, 1):
        raise ArgumentError(f"{name}: the shader computes with ${{WG}} = {wg_fill} but "
                            f"declares {shown}; pass workgroup_size= or declare "
                            f"@workgroup_size(${{WG}})")
    lim = device.limit("max-compute-invocations-per-workgroup")
    if math.prod(size) > lim:
        raise ArgumentError(f"{name}: {shown} is {math.prod(size)} invocations per "
                            f"workgroup; {device.name} allows at most {lim} "
                            f"(max-compute-invocations-per-workgroup)")
    for axis, v in zip("xyz", size):
        lim = device.limit(f"max-compute-workgroup-size-{axis}")
        if v > lim:
            raise ArgumentError(f"{name}: {shown} is {v} along {axis}; {device.name} allows "
                                f"at most {lim} (max-compute-workgroup-size-{axis})")
    if grid is None and size[1:] != (1, 1):
        raise ArgumentError(f"{name}: the shader declares {shown}; the default launch runs "
                            f"one invocation per output element along x and needs a 1-D "
                            f"workgroup: pass grid=")


def input_follows(refl, reads, out_b, grid) -> list:
    """Which inputs the default launch (one invocation per output element) reads at the
    output's own index: their sizes are then checked against the output's (a grid= kernel
    chooses its own launch, and its sizes are the user's business)."""
    written_at = set(refl.indexed_at(out_b.name))
    follows = []
    for b in reads:
        at = set(refl.indexed_at(b.name))
        shared = sorted(at & written_at)
        if grid is not None or not shared or not b.lanes or not out_b.lanes:
            follows.append(None)
        else:
            follows.append(("same" if at <= written_at else "cover", shared[0]))
    return follows


def make_kernel(name: str, source: str, refl_parts, fields, size, wg_fill, dts, grid,
                checked: bool, entry, follows) -> CustomKernel:
    """The CustomKernel of a checked shader (``refl_parts``: storage_bindings' result)."""
    reads, out_b, uniforms = refl_parts
    storage = reads + [out_b]
    return CustomKernel(
        name, source, inputs=tuple(b.name for b in reads), output=out_b.name,
        slots=tuple(b.binding for b in storage) + ((uniforms[0].binding,) if uniforms else ()),
        elements=tuple("T" if b.element == T_PROBE else b.element for b in storage),
        lanes=tuple(b.lanes for b in storage),
        types=tuple(str(b.type).replace(T_PROBE, "${T}") for b in storage),
        param_fields=tuple(fields), workgroup_size=size, wg_fill=wg_fill, dtypes=dts,
        grid=grid, checked=checked, entry_point=entry.name, builtins=entry.builtins,
        follows=follows)


def read_source(source) -> str:
    """register_kernel's source: WGSL text, or the text of the .wgsl file it names."""
    if not isinstance(source, str):
        raise ArgumentError(f"source: expected WGSL text or a path, got {type(source).__name__}")
    if source.endswith(".wgsl") and "\n" not in source:
        if not os.path.exists(source):
            raise ArgumentError(f"source: file {source!r} does not exist")
        with open(source, encoding="utf-8") as f:
            source = f.read()
    return source
