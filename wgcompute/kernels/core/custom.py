"""The user's own WGSL kernels (registry.register_kernel): CustomKernel, what travels of one
to another process (KernelRecipe), and the checks that read a kernel's bindings, params,
dtypes and workgroup size from its shader against what register_kernel was given."""

from __future__ import annotations

import inspect
import math
import pickle
from dataclasses import dataclass

import numpy as np

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShaderCompileError, ShapeError
from ...runtime import current_device
from . import shaders, uniform
from .base import UNIFORM_STRIDE, Kernel, Launch, Param, PipelineKey, fold_grid, pack_uniform
from .custom_args import (  # noqa: F401 - register_kernel's, from here
    _PARAM_TYPES,  # the scalar param types ("T": the kernel's dtype)
    check_args,
    read_source,
)
from .reflect import reflect
from .template import TemplateError

_WGSL_DTYPE = {"f32": "f32", "f16": "f16", "i32": "s32", "u32": "u32", "f64": "f64",
               "i64": "s64"}
T_PROBE = "__wgcompute_T"  # stands for ${T} while the structure of a templated shader is read
DEFAULT_WG = 256  # what ${WG} becomes when workgroup_size= is not given
_AUTO = {"n": "the number of output elements",
         "offset": "the index of the first element of each dispatch"}
# how a custom kernel unpickles: registry.kernel_from_recipe, which the registry (above this
# module) installs here
from_recipe = None
# how a kernel object runs when called: commands.run_kernel(kernel, inputs, output, params),
# which the facade installs here (the one submit path sits above the kernels)
runner = None


class CallSignature:
    """``__signature__`` of a kernel object: its ``call_signature()`` (for help() and
    inspect.signature); on the class itself, none (inspect then reads __init__)."""

    def __get__(self, obj, cls=None):
        return None if obj is None else obj.call_signature()


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

def _has_two_row_matrix(t) -> bool:
    if t.kind == "matrix":
        return t.shape[1] == 2
    if t.kind == "array":
        return _has_two_row_matrix(t.element)
    if t.kind == "struct":
        return any(_has_two_row_matrix(m) for _, _, m in t.members)
    return False


class CustomKernel(Kernel):
    """A user's WGSL kernel, described by what its shader declares (see register_kernel):
    inputs are its read-only storage buffers in @binding order, the output its one
    read_write buffer, the params the fields of its uniform struct. It pickles as its
    KernelRecipe."""

    _recipe: KernelRecipe | None = None
    __signature__ = CallSignature()

    def __init__(self, name, source, *, inputs, output, slots, elements, lanes, types,
                 param_fields, workgroup_size, wg_fill, dtypes, grid, checked, entry_point,
                 builtins, follows=(), outputs=None):
        self.name = name
        self.outputs = outputs or (output,)  # every read_write binding, in @binding order
        # the machinery's indices of the outputs after the first (they end its inputs)
        self.extra = tuple(range(len(inputs) - len(self.outputs) + 1, len(inputs)))
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
        out = super().resolve_params(params, dt)
        for p in self.params:  # vectors, matrices, arrays, structs: their bytes, checked now
            if not isinstance(p.type, str) and not isinstance(out[p.name], bytes):
                out[p.name] = p.type.pack(out[p.name], f"{self.name}: param {p.name!r}")
        return out

    def key(self, inputs, output, params) -> PipelineKey:
        return self.base_key(output.dtype)

    def base_key(self, dtype) -> PipelineKey:
        """The pipeline of ``dtype``: the outputs after the first bound read_write."""
        return PipelineKey(self.name, (dtype,), (), self.extra)

    def in_place_refusal(self, inputs, output, aliased):
        if any(i in self.extra for i in aliased):
            return "two of its outputs would be one buffer"
        return self.not_in_place

    def __repr__(self) -> str:
        ins = ", ".join(self.inputs[:len(self.inputs) - len(self.extra)])
        outs = self.outputs[0] if len(self.outputs) == 1 else f"({', '.join(self.outputs)})"
        ps = ", ".join(f"{p.name}: {p.type}" for p in self.params)
        return f"<wgc.Kernel {self.name}({ins}) -> {outs} params=({ps}) dtypes={self.dtypes}>"

    def call_signature(self) -> inspect.Signature:
        """How the kernel is called: its inputs, then ``out=`` and its params by name."""
        kind = inspect.Parameter
        ins = self.inputs[:len(self.inputs) - len(self.extra)]
        return inspect.Signature(
            [kind(n, kind.POSITIONAL_ONLY) for n in ins] + [kind("out", kind.KEYWORD_ONLY,
                                                                  default=None)]
            + [kind(p.name, kind.KEYWORD_ONLY) for p in self.params])

    def __call__(self, *inputs, out=None, **params):
        """Run the kernel on ``inputs`` (Buffers, in the order of the shader's read bindings)
        and return its output, or a tuple of its outputs: new Buffers shaped like the first
        input, or ``out=`` (a Buffer, or a tuple of one per read_write binding). Params are
        keyword arguments. Blocks until the outputs are ready, as run_kernel."""
        outs = self._outs(inputs, out, params)
        first = runner(self, list(inputs) + list(outs[1:]), outs[0], params)
        return first if len(self.outputs) == 1 else (first,) + tuple(outs[1:])

    def render(self, key: PipelineKey):
        t = _element(DTYPES[key.dtypes[0]])
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
            elif _element(DTYPES[b.dtype]) != elem:  # (packed dtypes bind as u32 words)
                want = " or ".join(d for d in DTYPES if _element(DTYPES[d]) == elem)
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype}, but the shader "
                                 f"declares {name}: {self.types[i]} (expected {want})")
        if self.extra:
            self._check_extra_outputs(inputs)
        self._check_structured_params(output.device)
        lanes = self.lanes[-1]
        if lanes > 1 and output.size % lanes:
            raise ShapeError(f"{self.name}: output {output.shape} holds {output.size} "
                             f"elements, not a whole number of the shader's "
                             f"{self.types[-1]} items of {lanes}")
        self._check_sizes(inputs, output)

    def _check_structured_params(self, device) -> None:
        """wgpu's GL backend (naga's GLSL, std140) pads each column of a matCx2 to 16 bytes
        where WGSL packs them in 8: such a param (or one holding it) is refused there."""
        if device.adapter.info.get("backend_type") != "OpenGL":
            return
        for p in self.params:
            if isinstance(p.type, uniform.UniformType) and _has_two_row_matrix(p.type):
                raise DtypeError(f"{self.name}: param {p.name!r} is {p.type}; on wgpu's GL "
                                 f"backend a matrix of two rows is not laid out as WGSL says "
                                 f"(its columns are padded to 16 bytes): pass its columns as "
                                 f"vec2 params there")

    def _outs(self, inputs, out, params) -> tuple:
        """The outputs of a call: ``out`` checked, or new buffers like the first input (an
        output of a concrete element type in that dtype)."""
        n = len(self.outputs)
        if out is not None:
            outs = (out,) if n == 1 and not isinstance(out, (tuple, list)) else out
            if not isinstance(outs, (tuple, list)) or len(outs) != n:
                raise ArgumentError(f"{self.name}: out: expected {n} Buffer(s) "
                                    f"({', '.join(self.outputs)}), got {out!r}")
            return tuple(outs)
        if n == 1:
            return (None,)
        if not inputs:
            raise ArgumentError(f"{self.name}: has no inputs to shape its outputs by; pass "
                                f"out=({', '.join(self.outputs)})")
        from ...buffer import check_buffer, empty

        first = check_buffer(inputs[0], f"{self.name}: input {self.inputs[0]!r}")
        base = first.dtype if first.dtype in self.dtypes else self.dtypes[0]
        kinds = self.elements[len(self.inputs) - len(self.extra):]
        kinds = kinds[-1:] + kinds[:-1]  # the machinery's order: the first output is last
        return tuple(empty(first.shape, base if e in (None, "T") else _WGSL_DTYPE[e],
                           label=f"{self.name}-{o}", device=first.device)
                     for o, e in zip(self.outputs, kinds))

    def _check_extra_outputs(self, inputs) -> None:
        """The outputs after the first (bound as inputs): whole buffers of their own."""
        from .bind import _shared_memory

        for i in self.extra:
            b = inputs[i]
            if b._base is not None:
                raise ArgumentError(f"{self.name}: output {self.inputs[i]!r} {b!r} is part "
                                    f"of another buffer's memory; outputs are buffers of their "
                                    f"own")
            for j, other in enumerate(inputs):
                if j != i and _shared_memory(b, other) is not None:
                    what = "output" if j in self.extra else "input"
                    raise ArgumentError(f"{self.name}: output {self.inputs[i]!r} is also "
                                        f"{what} {self.inputs[j]!r}; each output is a buffer of "
                                        f"its own, read by no input")

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
            size = len(pack_uniform([(n, "f64" if t == "T" else t) for n, t in
                                     self.param_fields], _zeros(self.param_fields)))
            if size > UNIFORM_STRIDE:
                raise ShapeError(f"{self.name}: {count} output elements need several "
                                 f"dispatches, each with its own params, and its params "
                                 f"struct of {size} bytes is larger than the {UNIFORM_STRIDE} "
                                 f"wgcompute gives each; take @builtin(num_workgroups) "
                                 f"instead of `offset` (one dispatch), or pass grid=")
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


def _zeros(fields) -> dict:
    return {n: 0 if isinstance(t, str) else bytes(t.size) for n, t in fields}


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
    if not writes:
        raise ArgumentError(f"{name}: the shader declares no read_write storage buffer; a "
                            f"kernel writes at least one, its output")
    if len(uniforms) > 1:
        raise ArgumentError(f"{name}: the shader declares {len(uniforms)} uniforms "
                            f"({', '.join(b.name for b in uniforms)}); params are one struct")
    declared = [(b.name, "read") for b in reads] + [(b.name, "read_write") for b in writes] + \
        [(b.name, "uniform") for b in uniforms]
    if bindings is not None and bindings != declared:
        raise ArgumentError(f"{name}: bindings={bindings!r} but the shader declares "
                            f"{declared!r} (reads in @binding order, the outputs, the uniform)")
    return reads, writes, uniforms


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
        wrong = [d for d in user_dtypes if _element(DTYPES[d]) != out_elem]
        if wrong:
            raise ArgumentError(f"{name}: dtypes={user_dtypes!r} but the shader's output "
                                f"{out_b.name!r} is {out_b.type}; {wrong[0]} is not "
                                f"{out_elem}")
    return user_dtypes


def _element(dt) -> str:
    """The WGSL element a binding of dtype ``dt`` declares: its type, or u32 for the packed
    ones (the shader sees their words: s8 lanes are not i32 elements)."""
    return "u32" if dt.packed else dt.wgsl


def param_fields(name: str, uniforms, user_params, dts, structs=None) -> list[tuple]:
    """The params: the uniform struct's fields as (name, type): a scalar's WGSL name or "T",
    or the uniform.UniformType of a vector, matrix, array or struct (``structs``: the
    shader's); ``user_params`` (checked by check_args) must be the same."""
    fields = []
    if uniforms:
        u = uniforms[0]
        if not u.fields:
            raise ArgumentError(f"{name}: the uniform {u.name!r} is {u.type}; wgcompute fills "
                                f"a struct (its fields are the params)")
        for f in u.fields:
            t = "T" if f.type.name == T_PROBE else f.type.name
            if f.layout_attrs:
                raise ArgumentError(f"{name}: params field {f.name!r} is declared with "
                                    f"@align/@size; wgcompute lays out params by WGSL's "
                                    f"default rules only")
            if f.type.args or t not in _PARAM_TYPES:
                if T_PROBE in str(f.type):
                    raise ArgumentError(f"{name}: params field {f.name!r} is {f.type}; ${{T}} "
                                        f"may be the type of a scalar field only")
                fields.append((f.name, uniform.layout(f.type, dict(structs or ()),
                                                      f"{name}: params field {f.name!r}")))
                continue
            if f.name == "offset" and t != "u32":
                raise ArgumentError(f"{name}: params field 'offset' is {t}; wgcompute sets it "
                                    f"({_AUTO['offset']}), as a u32")
            fields.append((f.name, t))
    if user_params is not None:
        def same(user_t, shader_t):
            return user_t == str(shader_t) or (user_t == "T" and all(
                DTYPES[d].wgsl == shader_t for d in dts))
        if [n for n, _ in user_params] != [n for n, _ in fields] or not all(
                same(ut, st) for (_, ut), (_, st) in zip(user_params, fields)):
            shown = {n: str(t) for n, t in fields}
            raise ArgumentError(f"{name}: params={dict(user_params)!r} but the shader's "
                                f"params struct declares {shown!r}")
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
    """The CustomKernel of a checked shader (``refl_parts``: storage_bindings' result: the
    reads, the read_write outputs, the uniforms)."""
    reads, writes, uniforms = refl_parts
    # the machinery binds one output: the outputs after the first travel as inputs bound
    # read_write (PipelineKey.in_place), after the reads
    storage = reads + writes[1:] + writes[:1]
    follows = list(follows) + [None] * (len(writes) - 1)
    return CustomKernel(
        name, source, inputs=tuple(b.name for b in reads + writes[1:]), output=writes[0].name,
        outputs=tuple(b.name for b in writes),
        slots=tuple(b.binding for b in storage) + ((uniforms[0].binding,) if uniforms else ()),
        elements=tuple("T" if b.element == T_PROBE else b.element for b in storage),
        lanes=tuple(b.lanes for b in storage),
        types=tuple(str(b.type).replace(T_PROBE, "${T}") for b in storage),
        param_fields=tuple(fields), workgroup_size=size, wg_fill=wg_fill, dtypes=dts,
        grid=grid, checked=checked, entry_point=entry.name, builtins=entry.builtins,
        follows=follows)
