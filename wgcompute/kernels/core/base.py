"""KernelSpec machinery: declared bindings and params, the compiled-pipeline cache keyed by a
frozen dataclass, uniform packing, and Dispatch (a kernel bound to buffers, ready to encode;
bind.py binds them)."""

from __future__ import annotations

import math
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import wgpu

from ...buffer import Buffer
from ...dtypes import DTYPES, DType, convert_exact
from ...dtypes import dtype as _resolve_dtype
from ...errors import (
    ArgumentError,
    DtypeError,
    ShaderCompileError,
    ShapeError,
    UnsupportedDtypeError,
)
from ...runtime import Device
from . import shaders

REQUIRED = object()
UNIFORM_STRIDE = 256  # every launch's params at a 256-byte aligned offset of one buffer

# WGSL scalar type -> (struct format char, size)
_SCALAR = {"f32": ("f", 4), "i32": ("i", 4), "u32": ("I", 4), "f16": ("e", 2),
           "f64": ("d", 8), "i64": ("q", 8), "u64": ("Q", 8)}
_WGSL_TO_DTYPE = {"f32": "f32", "i32": "s32", "u32": "u32", "f16": "f16", "f64": "f64",
                  "i64": "s64"}


@dataclass(frozen=True)
class Param:
    """A kernel parameter: ``type`` is a WGSL scalar type, "T" for the kernel's dtype, "bool"
    for a yes/no flag (check_flag), or a kind the kernel converts itself."""

    name: str
    type: str
    default: Any = REQUIRED
    doc: str = ""
    check: Any = None  # optional callable(value) -> str | None (an error message)


@dataclass(frozen=True)
class PipelineKey:
    """What makes one compiled pipeline: kernel, dtypes, template constants, and which inputs
    share the output's buffer (in place: those are declared read_write)."""

    kernel: str
    dtypes: tuple[str, ...]
    constants: tuple[tuple[str, Any], ...] = ()
    in_place: tuple[int, ...] = ()

    def __post_init__(self):
        # kernels pass buffers' dtypes (DType objects): the key holds their names
        object.__setattr__(self, "dtypes", tuple(str(d) for d in self.dtypes))


@dataclass
class Launch:
    """One dispatch: element ranges bound per storage binding, uniform values, grid."""

    workgroups: tuple[int, int, int]
    uniform: dict
    ranges: tuple[tuple[int, int], ...] | None = None  # (byte offset, byte size) per binding


@dataclass
class Compiled:
    key: PipelineKey
    pipeline: Any
    layout: Any
    uniform_fields: tuple[tuple[str, str], ...]
    source: str


def _by_name(name: str) -> Kernel:
    """The registered kernel ``name`` (what an unpickled kernel becomes)."""
    return lookup_kernel(name)


lookup_kernel = None  # set by kernels/registry.py: its get()


def pipeline_cache_size(device: Device) -> int:
    """Compiled pipelines cached on ``device``."""
    return len(device.pipelines)


# Python numbers converted exactly to a dtype (the numpy round trip costs ~5 us a param):
# (dtype name, type, value) -> the converted value. A value that does not fit raises and is
# never stored.
_CONVERTED: dict = {}


class Kernel:
    """A named compute kernel. Subclasses set the class attributes and override
    ``check``/``output_spec``/``launches``/``render``; see builtin.py for examples."""

    name: str = ""
    inputs: tuple[str, ...] = ()
    output: str | None = "out"
    params: tuple[Param, ...] = ()
    dtypes: tuple[str, ...] = ("f32",)
    workgroup_size: int = 256
    description: str = ""
    # naga's runtime checks (index clamps, loop bounding counters) in the shader. Built-in
    # kernels, written and tested to stay in range, run without them.
    checked: bool = True
    entry_point: str = "main"
    # out= may be one of the inputs only where each output element is computed by the one
    # invocation that reads the same element of the inputs, reading before writing (or where
    # a kernel's first pass copies its input into a temporary). Otherwise: why not.
    not_in_place: str | None = "it is not known to give the same result in place"

    def __reduce__(self):
        # a kernel travels by name: the receiving process has the same built-ins (registry.py
        # sets the lookup, so that this module does not import the registry above it)
        return _by_name, (self.name,)

    # -- what a user sees ------------------------------------------------------------
    def __repr__(self) -> str:
        ins = ", ".join(self.inputs)
        ps = ", ".join(p.name for p in self.params)
        return (f"<wgc.Kernel {self.name}({ins}) -> {self.output} params=({ps}) "
                f"dtypes={self.dtypes}>")

    def resolve_params(self, params, dt: DType) -> dict:
        """Defaults filled in, unknown names refused, values converted exactly."""
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ArgumentError(f"{self.name}: params must be a dict, got {type(params).__name__}")
        for name in params:
            if not isinstance(name, str):
                raise ArgumentError(f"{self.name}: params: key {name!r} is not a str "
                                    f"(params are named by strings)")
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ArgumentError(f"{self.name}: unknown param(s) {', '.join(unknown)}; "
                                f"expected {', '.join(known) or 'none'}")
        out = {}
        for p in self.params:
            if p.name in params:
                value = params[p.name]
            elif p.default is REQUIRED:
                raise ArgumentError(f"{self.name}: param {p.name!r} is required")
            else:
                value = p.default
            out[p.name] = self.convert_param(p, value, dt)
            if p.check is not None:
                msg = p.check(out[p.name])
                if msg:
                    raise ArgumentError(f"{self.name}: param {p.name!r}: {msg}")
        return out

    def convert_param(self, p: Param, value, dt: DType):
        if p.type == "bool":
            return check_flag(self.name, p.name, value)
        if p.type in ("T", "f32", "f64", "f16", "i32", "u32", "i64"):
            target = dt if p.type == "T" else DTYPES[_WGSL_TO_DTYPE[p.type]]
            if p.type == "T" and dt.kind == "b":  # a bool lane holds the numbers 0 and 1
                target = DTYPES["u8"]
                if dt.kind == "b" and isinstance(value, (bool, np.bool_)):
                    value = int(value)  # a bool lane: True and False are its 1 and 0
                if dt.kind == "b" and not (isinstance(value, (int, float, np.number))
                                           and value in (0, 1)):
                    raise ArgumentError(f"{self.name}: param {p.name!r} of a bool buffer must "
                                        f"be True or False (or 1 or 0), got {value!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ArgumentError(f"{self.name}: param {p.name!r} must be a number, got "
                                    f"{type(value).__name__} {value!r}")
            t = type(value)
            key = (target.name, t, value.hex() if t is float else value) \
                if t is float or t is int else None  # (the hex: -0.0 is not 0.0)
            got = _CONVERTED.get(key) if key is not None else None
            if got is not None:
                return got
            try:
                got = convert_exact(np.atleast_1d(np.asarray(value)), target,
                                    f"{self.name}: param {p.name!r}")[0].item()
            except DtypeError as e:
                raise ArgumentError(str(e)) from None
            if key is not None:
                if len(_CONVERTED) > 4096:
                    _CONVERTED.clear()
                _CONVERTED[key] = got
            return got
        return value  # kernel-specific (tuples, strings): the kernel's check() validates

    def check(self, inputs: list[Buffer], output: Buffer, params: dict) -> None:
        """Raise ShapeError/DtypeError if these buffers do not fit the kernel."""

    def output_spec(self, inputs: list[Buffer], params: dict) -> tuple[tuple[int, ...], str]:
        """Shape and dtype of the output that ``out=None`` allocates."""
        if not inputs:
            raise ArgumentError(f"{self.name}: needs an output buffer (it has no inputs to "
                                f"derive one from)")
        return inputs[0].shape, inputs[0].dtype

    def key(self, inputs: list[Buffer], output: Buffer, params: dict) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), ())

    def render(self, key: PipelineKey) -> tuple[str, tuple[tuple[str, str], ...]]:
        """WGSL source and the uniform struct's fields for this key."""
        raise NotImplementedError(f"kernel {self.name} defines no shader")

    def launches(self, inputs: list[Buffer], output: Buffer, params: dict,
                 device: Device) -> list[Launch]:
        raise NotImplementedError(f"kernel {self.name} defines no grid")

    def tune_problems(self, inputs, output, params) -> list:
        """The tuning.TuneProblems whose choices ``key`` and ``passes`` will look up for these
        buffers; ``bind`` tunes them first (when tuning is on). None by default (an empty list)."""
        return []

    def pin(self, inputs, output, params) -> dict:
        """``params`` with the choices ``key``, ``passes`` and ``launches`` look up fixed for
        this binding (a tuned choice that background tuning may change between those calls,
        whose shader and grid must agree); by default the params as they are."""
        return params

    def passes(self, inputs, output, params):
        """Multi-pass kernels return ``(temporaries, steps)``: temporaries a list of
        (shape, dtype) buffers to allocate or numpy arrays to upload (small tables such as
        filter weights), steps a list of (kernel, input refs, output ref,
        params) run in order inside one compute pass, a ref being "in0", "in1"..., "out",
        "tmp0"... or a persistent Buffer on the output's device that its owner keeps there
        (registered with ``Device.state_for``: the device releases it; the bound dispatch
        holds a reference, never frees it). Inputs and output are Buffers or Metas (only
        shape, dtype and device are read).
        None (the default) means a single pass through render()/launches()."""
        return None

    # -- machinery ---------------------------------------------------------------------------------
    def in_place_refusal(self, inputs, output, aliased: tuple[int, ...]) -> str | None:
        """None if ``output`` may share its buffer with the inputs at indices ``aliased``;
        otherwise why not (a phrase for the error)."""
        return self.not_in_place

    def storage_bindings(self) -> tuple[str, ...]:
        return self.inputs + ((self.output,) if self.output else ())

    def binding_slots(self) -> tuple[int, ...]:
        """The @binding numbers of the storage bindings (inputs, then the output), then the
        params uniform's. Built-in shaders number them in that order from 0."""
        return tuple(range(len(self.storage_bindings()) + 1))

    def compiled(self, key: PipelineKey, device: Device) -> Compiled:
        """The pipeline for ``key`` on ``device``, compiled once per device. Threads asking
        for the same key wait for one compile; different keys compile side by side (naga and
        the driver run without the GIL), so the device's cache lock is never held across one."""
        cache = device.pipelines
        c = cache.get(key)
        if c is not None:
            return c
        with device.pipelines_lock:
            c = cache.get(key)
            if c is not None:
                return c
            compiling = device.extras.setdefault("compiling", {})  # key -> its compile's lock
            gate = compiling.setdefault(key, threading.Lock())
        with gate:
            c = cache.get(key)
            if c is not None:
                return c
            try:
                c = self._compile(key, device)
            finally:
                with device.pipelines_lock:
                    # a registry.add or a device reset meanwhile dropped the gate: this
                    # pipeline may be of a replaced kernel, so it is returned but not kept
                    if device.extras.get("compiling", {}).get(key) is gate:
                        del device.extras["compiling"][key]
                        if c is not None:
                            cache[key] = c
            return c

    def _compile(self, key: PipelineKey, device: Device) -> Compiled:
        for name in key.dtypes:
            feature = DTYPES[name].feature
            if feature and not device.has(feature):
                raise UnsupportedDtypeError(
                    f"{self.name}: dtype {name} needs the adapter feature {feature!r}, which "
                    f"{device.name} does not have (storing and copying {name} still works)",
                    feature)
        source, fields = self.render(key)
        label = f"{self.name}[{','.join(key.dtypes)}]"
        slots = self.binding_slots()
        if key.in_place:  # the inputs bound to the output's buffer must be read_write too
            from .reflect import with_read_write

            label += "[in place]"
            source = with_read_write(source, [slots[i] for i in key.in_place])
        dev = device.gpu_device
        device.check()
        try:
            module = shaders.create_module(device, label, source, self.checked)
        except Exception as e:
            if not device.alive or "lost" in str(e).lower():
                raise device.wrap(e, f"compiling {label}") from e
            raise ShaderCompileError(label, source, str(e)) from e
        entries = []
        n_storage = len(self.storage_bindings())
        for i in range(n_storage):
            read_only = i < len(self.inputs) and i not in key.in_place
            entries.append({"binding": slots[i], "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": "read-only-storage" if read_only else "storage"}})
        if fields:
            entries.append({"binding": slots[n_storage], "visibility": wgpu.ShaderStage.COMPUTE,
                            "buffer": {"type": "uniform"}})
        try:
            bgl = dev.create_bind_group_layout(label=label, entries=entries)
            layout = dev.create_pipeline_layout(label=label, bind_group_layouts=[bgl])
            pipeline = dev.create_compute_pipeline(
                label=label, layout=layout,
                compute={"module": module, "entry_point": self.entry_point})
        except Exception as e:
            if not device.alive or "lost" in str(e).lower():
                raise device.wrap(e, f"compiling {label}") from e
            raise ShaderCompileError(label, source, str(e)) from e
        with device.pipelines_lock:  # compiles run on several threads
            device.stats["pipelines_created"] += 1
        return Compiled(key, pipeline, bgl, tuple(fields), source)


_F32_NAN = "((bitcast<{u}>({v}) & {u}(0x7fffffffu)) > {u}(0x7f800000u))"


def wgsl_is_nan(v: str, t: str) -> str:
    """WGSL: whether ``v`` of type ``t`` (f32, f16, f64, or vec4 of f32 / f16: then per lane)
    is nan. By its bits, never by comparisons: NVIDIA's shader compiler assumes no nan in
    comparisons, min and max (``v != v`` folds to false there). f16 is widened to f32 (nan
    stays nan); f64 has no bitcast in WGSL: ordered comparisons on both sides of the largest
    f64, which nan fails."""
    if t == "f64":
        big = "f64(1.7976931348623157e308)"
        return f"(!(abs({v}) <= {big}) && !(abs({v}) > {big}))"
    if t in ("f16", "vec4<f16>"):
        v = f"{t.replace('16', '32')}({v})"
    return _F32_NAN.format(u="vec4<u32>" if t.startswith("vec4") else "u32", v=v)


def check_flag(where: str, name: str, value) -> bool:
    """A yes/no param's value: a bool (numpy's too) or the int 0 or 1, and nothing else (a
    string such as "no" is truthy: taken as True it would silently do the opposite)."""
    if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise ArgumentError(f"{where}: param {name!r} is a flag: True or False (or 1 or 0), got "
                        f"{type(value).__name__} {value!r}")


class BuiltinKernel(Kernel):
    """A kernel shipped with wgcompute. They are written to stay in range and tested at
    awkward shapes, so they compile without naga's runtime checks (see shaders.create_module)."""

    checked = False


# uniform fields -> one struct.Struct packing them all (scalar fields only), or False: each
# binding packs its params, and one pack call costs what one field's did
_PACKERS: dict = {}


def _packer(fields):
    if not all(type(t) is str for _, t in fields):
        return False
    fmt, at = "<", 0
    for _, wgsl_type in fields:
        code, size = _SCALAR[wgsl_type]
        pad = (-at) % size
        fmt += "x" * pad + code
        at += pad + size
    return struct.Struct(fmt + "x" * ((-at) % 16)) if fields else False


def pack_uniform(fields, values: dict) -> bytes:
    """Pack scalars into a WGSL uniform struct (natural alignment, size rounded to 16). A
    field whose type is a uniform.UniformType (a user kernel's vector, matrix, array or
    struct) is placed at its alignment; its value is its bytes (UniformType.pack)."""
    try:
        packer = _PACKERS.get(fields)
        if packer is None:
            packer = _PACKERS[fields] = _packer(fields)
    except TypeError:  # unhashable fields (a list): packed field by field
        packer = False
    if packer:
        try:
            return packer.pack(*[values[name] for name, _ in fields])
        except (OverflowError, struct.error):
            pass  # a value that does not fit: the loop below names it
    out = bytearray()
    for name, wgsl_type in fields:
        if not isinstance(wgsl_type, str):
            out += b"\0" * ((-len(out)) % wgsl_type.align)
            value = values[name]
            out += value if isinstance(value, bytes) else wgsl_type.pack(value, f"param {name!r}")
            continue
        fmt, size = _SCALAR[wgsl_type]
        pad = (-len(out)) % size
        out += b"\0" * pad
        try:
            out += struct.pack("<" + fmt, values[name])
        except (OverflowError, struct.error) as e:  # a kernel let through a value too big
            raise ArgumentError(f"param {name!r}: {values[name]!r} does not fit the shader's "
                                f"{wgsl_type} ({e})") from None
    out += b"\0" * ((-len(out)) % 16)
    return bytes(out) or b"\0" * 16


def fold_grid(workgroups: int, device: Device, name: str) -> tuple[int, int, int]:
    """Spread a 1-D count of workgroups over x and y (at most max-per-dimension each)."""
    limit = device.limit("max-compute-workgroups-per-dimension")
    if workgroups <= limit:
        return (max(workgroups, 0), 1, 1)
    y = math.ceil(workgroups / limit)
    x = math.ceil(workgroups / y)
    if y > limit:
        raise ShapeError(f"{name}: {workgroups} workgroups exceed {limit}² for one dispatch")
    return (x, y, 1)


@dataclass(frozen=True)
class Meta:
    """Shape and dtype of a bound buffer, kept instead of the Buffer (no strong reference)."""

    shape: tuple
    dtype: str
    device: Any = field(default=None, compare=False)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def of(cls, b: Buffer) -> Meta:
        return cls(b.shape, str(b.dtype), b._dev)


@dataclass
class Dispatch:
    """A kernel bound to its buffers: pipeline, bind groups and params, ready to encode.

    Built once, encoded many times; ``set_params`` rewrites the uniform in place. It keeps
    only the buffers' metadata: the bind groups hold the GPU memory, the caller the Buffers."""

    kernel: Kernel
    inputs: list
    output: Meta | None
    params: dict
    compiled: Compiled = None
    launches: list = field(default_factory=list)
    bind_groups: list = field(default_factory=list)
    uniform: Any = None
    device: Device = None
    _raw: Any = None  # the launches as the device's native calls, made on first use
    # bound with params that never change (bind's ``fixed``): its params buffer may be shared
    fixed: bool = False

    def encode(self, cpass) -> None:
        """Record the launches into a wgpu-py compute pass (profiled pipelines, surfaces)."""
        self.device.link.record_wgpu_pass(cpass, self.raw_calls())

    def raw_calls(self) -> list:
        """Each launch as the device's native (pipeline, bind group, x, y, z) call, for its
        encoders' ``record_calls``: wgpu-py's wrappers cost ~2 us a call, most of a small
        pipeline stage's host time. The Dispatch keeps the objects behind them alive."""
        raw = self._raw
        if raw is None:
            call = self.device.link.call
            pipeline = self.compiled.pipeline
            raw = self._raw = [call(pipeline, bg, *la.workgroups)
                               for la, bg in zip(self.launches, self.bind_groups)
                               if all(la.workgroups)]
        return raw

    def set_params(self, **params) -> None:
        dt = DTYPES[self.output.dtype] if self.output is not None else DTYPES["f32"]
        merged = dict(self.params)
        merged.update(params)
        new = self.kernel.resolve_params(merged, dt)
        launches = self.kernel.launches(self.inputs, self.output, new, self.device)
        if [la.workgroups for la in launches] != [la.workgroups for la in self.launches]:
            raise ArgumentError(f"{self.kernel.name}: these params change the grid; build a "
                                f"new stage instead")
        if self.fixed and not _same_params(new, self.params):
            raise ArgumentError(f"{self.kernel.name}: this binding's params are fixed (a queued "
                                f"run's); bind the kernel anew (wgc.pipeline) to change them")
        self.params = new
        self.launches = launches
        self._raw = None
        if self.compiled.uniform_fields and self.uniform is not None:
            self.device.check()
            self.device.queue.write_buffer(self.uniform, 0, self._uniform_bytes())

    def _uniform_bytes(self) -> bytes:
        fields = self.compiled.uniform_fields
        blob = bytearray()
        for launch in self.launches:
            packed = pack_uniform(fields, launch.uniform)
            blob += packed + b"\0" * (UNIFORM_STRIDE - len(packed))
        return bytes(blob)


def _same_params(a: dict, b: dict) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays among them: taken as changed
        return False


@dataclass
class MultiDispatch(Dispatch):
    """A multi-pass kernel bound: its steps' Dispatches, encoded in order into one compute
    pass (WebGPU orders dispatches inside a pass), and the temporaries it owns between them."""

    parts: list = field(default_factory=list)
    temps: list = field(default_factory=list)
    keep: list = field(default_factory=list)  # persistent Buffers the steps bind (not freed)
    # its temporaries are tables and the device's shared scratch (bind.py), none tied to its
    # buffers' lives: it may stay bound to pooled memory, whose key outlives a Buffer object
    reusable: bool = False

    def encode(self, cpass) -> None:
        for part in self.parts:
            part.encode(cpass)

    def raw_calls(self) -> list:
        return [call for part in self.parts for call in part.raw_calls()]

    def set_params(self, **params) -> None:
        dt = DTYPES[self.output.dtype]
        merged = dict(self.params)
        merged.update(params)
        new = self.kernel.resolve_params(merged, dt)
        temps, steps = self.kernel.passes(self.inputs, self.output, new)
        if ([temp_spec(t) for t in temps] != [(t.shape, t.dtype) for t in self.temps]
                or [s[0] for s in steps] != [p.kernel for p in self.parts]):
            raise ArgumentError(f"{self.kernel.name}: these params change the passes; build a "
                                f"new stage instead")
        for spec, t in zip(temps, self.temps, strict=True):
            if isinstance(spec, np.ndarray):
                t.write(spec)
        for part, step in zip(self.parts, steps, strict=True):
            part.set_params(**step[3])
        self.params = new
        self.launches = [launch for part in self.parts for launch in part.launches]


def temp_spec(spec) -> tuple[tuple[int, ...], str]:
    if isinstance(spec, np.ndarray):
        return spec.shape, _resolve_dtype(spec.dtype).name
    shape, dtype = spec
    return tuple(shape), dtype
