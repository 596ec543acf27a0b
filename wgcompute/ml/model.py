"""Model: a loaded ONNX graph that runs on the GPU (numpy in, numpy out; Buffer in, Buffer
out), its plans per input shape, its weights uploaded once per device, and its kernel for
pipelines; register_model names one for run_kernel / pipeline_add / submit."""

from __future__ import annotations

import math
import os
import threading
import weakref

import numpy as np

from .. import transfers
from .._extras import require
from ..buffer import Buffer, empty
from ..commands import run_blocking
from ..dtypes import dtype as resolve_dtype
from ..errors import (
    ArgumentError,
    DtypeError,
    ModelError,
    ShapeError,
    WgComputeError,
)
from ..kernels import bind, registry
from ..kernels.core.base import Kernel, Param
from ..runtime import open_devices
from . import eager, replay
from .executable import (
    _device,
    _Executable,
    _OnDevice,
    collect,
    plan_passes,
    run_one_submit,
)
from .graph import Graph, read_onnx
from .plan import Plan, lower
from .profile import profile_model, profile_replayed

DTYPES = ("f32", "f16")
PRECISIONS = ("f32", "mixed")
FLOAT_TYPES = (1, 10, 11)  # ONNX FLOAT, FLOAT16, DOUBLE
_FLOAT_NUMPY = {1: np.float32, 10: np.float16, 11: np.float64}  # ONNX elem type -> numpy

# A numpy run whose input and output together are at most this many bytes keeps its staging
# between calls and records its next command buffer while the GPU works on this one.
KEEP_STAGING = 32 << 20


class Model:
    """A neural network loaded from ONNX, run on the GPU.

    ``m(x)`` runs it: numpy in (float arrays, rounded to float32), numpy out; a wgc.Buffer in,
    a new Buffer out. Any batch size fits a model whose batch axis is dynamic, and a fixed
    one is taken as declared. A model with several inputs takes them in order (``m(a, b)``)
    or by name (``m(a=..., b=...)``); ``run()`` returns every output.

    ``m.kernel`` is the model as a kernel (one input, one output): a pipeline stage, recorded
    with the stages around it into one command buffer. Weights are uploaded once per device,
    on first use, and kept by that device (closing it releases them); ``free()`` releases
    them on every device."""

    def __init__(self, graph: Graph, name: str, dtype: str = "f32", source: str | None = None,
                 precision: str = "f32"):
        self.graph = graph
        self.name = name
        self.dtype = dtype
        self.precision = precision
        self.source = source
        self._plans: dict = {}
        self._lock = threading.RLock()
        self._kernel = None
        self._weak_kernel = None  # the kernel of its own runs: the device's caches keep those
        self._freed = False
        self._onnx: bytes | None = None  # the model's bytes when it came from no file
        self._interpreter = eager.Owner()  # owns the interpreted path's per-device state

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}{_fmt_dims(d)}" for n, d, _ in self.graph.inputs)
        state = " freed" if self._freed else ""
        mixed = " (mixed precision)" if self.precision == "mixed" else ""
        return (f"<wgc.ml.Model {self.name!r} ({ins}) -> {len(self.graph.outputs)} output(s), "
                f"{len(self.graph.nodes)} nodes, {self.dtype}{mixed}, {self.path}{state}>")

    @property
    def path(self) -> str:
        """"planned" (fused kernels, one submit a call) or "interpreted" (node by node)."""
        return "planned" if self.graph.eager is None else "interpreted"

    @property
    def interpreted_because(self) -> str | None:
        """Why the model runs interpreted (None when it runs planned)."""
        return self.graph.eager

    @property
    def replayed(self) -> str | None:
        """Why calls of an interpreted model on numpy inputs are not replayed on the default
        device (None: they are, or will be from their second call; ml/replay.py)."""
        if self.graph.eager is None:
            return "it runs planned (one command buffer a call already)"
        if not replay.enabled():
            return "WGCOMPUTE_REPLAY=0"
        return _device().state_for(self._interpreter, eager.EagerState).no_replay

    # -- description ------------------------------------------------------------------------
    def onnx_bytes(self) -> bytes:
        """The ONNX model this was loaded from, serialized (read from its file, if it came
        from one): what another process needs to load the same model."""
        if self._onnx is not None:
            return self._onnx
        if self.source is None:
            raise ModelError(f"{self.name}: not loaded from an ONNX file or bytes")
        with open(self.source, "rb") as f:
            return f.read()

    @property
    def input_names(self) -> list[str]:
        return [n for n, _, _ in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.graph.outputs)

    @property
    def input_shapes(self) -> list[tuple]:
        """Declared input shapes: an int per fixed axis, a name or None per dynamic one."""
        return [d for _, d, _ in self.graph.inputs]

    # -- plans ----------------------------------------------------------------------------------
    def _check_open(self):
        if self._freed:
            raise ModelError(f"{self!r} was freed")

    @property
    def host_inputs(self) -> list[str]:
        """Integer inputs: shape parameters (axes, target shapes, indices) whose values are
        folded on the host; each new value plans the model anew (interpreted: none)."""
        if self.graph.eager is not None:
            return []
        return [n for n, _, t in self.graph.inputs if t not in FLOAT_TYPES]

    def _is_host(self, i: int) -> bool:
        return self.graph.inputs[i][2] not in FLOAT_TYPES and self.graph.eager is None

    def _input_shape(self, i: int, shape) -> tuple:
        """The shape input ``i`` runs with: as given, or with a batch axis of 1 prepended
        when it has one axis less than declared (a preprocessed (C, H, W) image)."""
        name, dims, _ = self.graph.inputs[i]
        shape = tuple(int(d) for d in shape)
        if dims is None:
            return shape
        if len(shape) == len(dims) - 1:
            shape = (1,) + shape
        fixed = all(isinstance(d, int) and d > 0 for d in dims) or not dims
        if fixed and len(shape) != len(dims) and math.prod(shape) == math.prod(dims):
            return tuple(dims)  # e.g. a scalar given as a 1-element array
        bad = len(shape) != len(dims) or any(
            isinstance(d, int) and d > 0 and d != s for d, s in zip(dims, shape, strict=True))
        if bad:
            raise ShapeError(f"{self.name}: input {name!r} is {shape}; the model takes "
                             f"{_fmt_dims(dims)}")
        return shape

    def plan(self, *inputs, device=None, dtypes=None) -> Plan:
        """The plan for these inputs, made once per shapes and cached: a shape per float
        input, the array itself per integer input (see host_inputs); for ``device`` (default:
        the current one). ``dtypes``: per float input, the dtype it arrives in ("f32", the
        default, or "f16": half the bytes to upload; the plan converts it to the model's
        dtype where the two differ)."""
        self._check_open()
        self._refuse_interpreted("plan")
        n_float = len(self.graph.inputs) - len(self.host_inputs)
        dtypes = ("f32",) * n_float if dtypes is None else tuple(dtypes)
        if len(dtypes) != n_float or any(d not in DTYPES for d in dtypes):
            raise ArgumentError(f"dtypes: expected {n_float} of {', '.join(DTYPES)} (one per "
                                f"float input), got {dtypes!r}")
        if len(inputs) != len(self.graph.inputs):
            raise ArgumentError(f"{self.name}: takes {len(self.graph.inputs)} input(s) "
                                f"({', '.join(self.input_names)}), got {len(inputs)}")
        spec = []
        for i, v in enumerate(inputs):
            if self._is_host(i):
                if not isinstance(v, np.ndarray):
                    raise ArgumentError(f"{self.name}: input {self.input_names[i]!r} is an "
                                        f"integer input; give its values (an array)")
                spec.append(v)
            else:
                spec.append(self._input_shape(i, v))
        # a plan depends on the device only through its binding limit (how a classifier runs)
        limit = (device or _device()).limit("max-storage-buffer-binding-size")
        key = (limit,) + tuple(("host", v.dtype.str, v.shape, v.tobytes())
                               if isinstance(v, np.ndarray) else v for v in spec)
        if any(d != "f32" for d in dtypes):
            key += (dtypes,)
        p = self._plans.get(key)
        if p is None:
            with self._lock:
                p = self._plans.get(key)
                if p is None:
                    p = lower(self.graph, tuple(spec), self.dtype, limit, dtypes,
                              self.precision)
                    p.key = key
                    self._plans[key] = p
        return p

    def _refuse_interpreted(self, what: str) -> None:
        if self.graph.eager is not None:
            raise ModelError(f"{self.name}: {what} needs the planned path; this model runs "
                             f"interpreted ({self.graph.eager})")

    def _on(self, device=None) -> _OnDevice:
        """What this model keeps on ``device`` (default: the current one)."""
        return (device or _device()).state_for(self, _OnDevice)

    def passes(self, plan: Plan, device=None):
        """``Kernel.passes()`` of ``plan`` on ``device``: (temporaries, steps) with the weights
        as Buffers; ``plan.extra_temps`` says which temporary holds each further output."""
        return plan_passes(self, plan, device)

    # -- running ----------------------------------------------------------------------------------
    @property
    def kernel(self) -> ModelKernel:
        """The model as a kernel: ``wgc.run_kernel(m.kernel, [x])``, a pipeline stage."""
        if self._kernel is None:
            self._kernel = ModelKernel(f"model:{self.name}", self)
        return self._kernel

    def _own_kernel(self, plan: Plan | None = None) -> ModelKernel:
        """The model as a kernel for the runs it binds itself: it holds the model weakly, as
        the device keeps those runs (and their kernel) in its caches and state."""
        if plan is not None:
            return ModelKernel(f"model:{self.name}", weakref.proxy(self), plan=plan)
        if self._weak_kernel is None:
            self._weak_kernel = ModelKernel(f"model:{self.name}", weakref.proxy(self))
        return self._weak_kernel

    def _arrays(self, args, kwargs) -> list:
        names = self.input_names
        if kwargs:
            if args:
                raise ArgumentError(f"{self.name}: pass inputs by position or by name, not both")
            unknown = sorted(set(kwargs) - set(names))
            missing = [n for n in names if n not in kwargs]
            if unknown or missing:
                raise ArgumentError(f"{self.name}: inputs are {', '.join(names)}; unknown "
                                    f"{unknown or 'none'}, missing {missing or 'none'}")
            args = [kwargs[n] for n in names]
        if len(args) == 1 and isinstance(args[0], dict):
            return self._arrays((), args[0])
        if len(args) != len(names):
            raise ArgumentError(f"{self.name}: takes {len(names)} input(s) ({', '.join(names)})"
                                f", got {len(args)}")
        return list(args)

    def __call__(self, *args, **kwargs):
        """Run the model: numpy in -> numpy out (the first output, or a tuple of all when the
        model has several); Buffers in -> a new Buffer (models of one output)."""
        xs = self._arrays(args, kwargs)
        if self.graph.eager is not None:
            self._check_open()
            outs = replay.run_model(self.graph, self._interpreter, xs, _device())
            return outs[0] if len(outs) == 1 else tuple(outs)
        if all(isinstance(x, Buffer) for x in xs):
            if len(self.graph.outputs) != 1:
                raise ModelError(f"{self.name}: has {len(self.graph.outputs)} outputs; run it "
                                 f"on numpy arrays, or use run()")
            from .._lazy import enqueue

            return enqueue(self._own_kernel(), xs, label=f"model {self.name}")
        outs = self.run(xs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def _upload_type(dt: np.dtype):
        """What a float input goes up as: f16 as it is (half the bytes; the model converts it
        on the GPU where it computes in f32) where the adapter has shader-f16, anything else
        as f32."""
        if dt == np.float16 and _device().has("shader-f16"):
            return np.float16
        return np.float32

    def run(self, inputs) -> list[np.ndarray]:
        """Every output as numpy, for ``inputs`` (a list in input order, or a dict by name)."""
        self._check_open()
        xs = self._arrays((inputs,), {}) if isinstance(inputs, dict) else \
            self._arrays(tuple(inputs), {})
        if self.graph.eager is not None:
            return replay.run_model(self.graph, self._interpreter, xs, _device(), numpy=True)
        arrays = []
        for i, (name, x) in enumerate(zip(self.input_names, xs, strict=True)):
            if isinstance(x, Buffer):
                x = x.to_numpy()
            a = np.asarray(x)
            if self._is_host(i):
                if a.dtype.kind not in "iub":
                    raise DtypeError(f"{self.name}: input {name!r} is {a.dtype}; expected "
                                     f"integers")
                arrays.append(a)
                continue
            if a.dtype.kind != "f":
                raise DtypeError(f"{self.name}: input {name!r} is {a.dtype}; expected floats")
            arrays.append(np.require(a, self._upload_type(a.dtype), "C"))
        plan = self.plan(*[a if self._is_host(i) else a.shape for i, a in enumerate(arrays)],
                         dtypes=[resolve_dtype(a.dtype).name for i, a in enumerate(arrays)
                                 if not self._is_host(i)])
        if all(o[0] == "const" for o in plan.outputs):
            return self._typed([np.asarray(o[1]) for o in plan.outputs])
        exe = self._executable(plan)
        floats = [a for i, a in enumerate(arrays) if not self._is_host(i)]
        with exe.lock:
            # the output comes back in one download staging of at most CHUNK; a larger one
            # (or several outputs, read from temporaries) goes the general way: write, run,
            # then a chunked read
            if len(plan.outputs) == 1 and exe.output.nbytes <= transfers.CHUNK:
                keep = sum(a.nbytes for a in floats) + exe.output.nbytes <= KEEP_STAGING
                return self._typed([run_one_submit(exe, floats, keep, f"model {self.name}")
                                    .reshape(plan.outputs[0][2])])
            for buf, a in zip(exe.inputs, floats, strict=True):
                if a.size:
                    buf.write(a.reshape(buf.shape))
            run_blocking(f"model {self.name}", exe.output.device, [*exe.inputs, exe.output],
                         calls=exe.dispatch.raw_calls())
            return self._typed(collect(plan, exe))

    def _typed(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        """Float outputs in the type the graph declares (f16 models compute in f32; a float64
        output is an exact cast, load_onnx refuses the others)."""
        typed = []
        for a, t in zip(outs, self.graph.output_types, strict=True):
            want = _FLOAT_NUMPY.get(t)
            typed.append(a.astype(want) if want is not None and a.dtype.kind == "f"
                         and a.dtype != want else a)
        return typed

    def _executable(self, plan: Plan) -> _Executable:
        device = _device()
        exes = device.state_for(self, _OnDevice).exes
        key = plan.key
        exe = exes.get(key)
        if exe is not None and exe.generation != device.autotune_generation:
            exe = self._drop_stale(exes, key, exe)  # tuned since it was bound: bind again
        if exe is None:
            with self._lock:
                exe = exes.get(key)
                if exe is None:
                    generation = device.autotune_generation
                    shapes = [s for s in plan.input_shapes if s is not None]
                    ins = [empty(s, dt, label=f"{self.name}:in{i}", device=device)
                           for i, (s, dt) in enumerate(zip(shapes, plan.input_dtypes,
                                                           strict=True))]
                    out_shape = plan.output_shape if plan.outputs[0][0] == "tensor" else (1,)
                    out = empty(out_shape, "f32", label=f"{self.name}:out", device=device)
                    kernel = self._own_kernel(plan if self.host_inputs else None)
                    d = bind(kernel, ins, out, None)
                    exe = exes[key] = _Executable(ins, out, d, threading.Lock())
                    exe.generation = generation
        return exe

    def _drop_stale(self, exes: dict, key, exe: _Executable) -> None:
        """Forget a bound run whose kernels were bound before background tuning changed a
        choice (the next call binds the tuned configurations)."""
        with self._lock:
            if exes.get(key) is exe:
                del exes[key]
        with exe.lock:  # a call running on it finishes first; its buffers go with it
            exe.drop_staging(True)

    def profile(self, *inputs, repeat: int = 5, trace=None) -> list[dict]:
        """Per-layer GPU times (ms, the median of ``repeat`` runs) from timestamp queries:
        each step in its own compute pass. Returns dicts with layer (ONNX node names,
        fused ones joined by +), kernel, and ms; needs the adapter's timestamp-query.
        ``trace`` (a path): also write the steps as a Chrome trace for ui.perfetto.dev or
        chrome://tracing, back to back at their median times (wgc.Timeline's format)."""
        if self.graph.eager is not None:  # its replayed call's operations
            return profile_replayed(self, inputs, repeat, trace)
        return profile_model(self, inputs, repeat, trace)

    def free(self) -> None:
        """Release the uploaded weights and bound runs (the model can no longer run)."""
        with self._lock:
            self._freed = True
            for device in open_devices():  # a closed or lost device let go of it already
                for owner in (self, self._interpreter):
                    state = device.drop_state(owner)
                    if state is not None:
                        state.close()


def _fmt_dims(dims) -> str:
    if dims is None:
        return "(?)"
    return "(" + ", ".join(str(d) if d else "?" for d in dims) + ")"


class ModelKernel(Kernel):
    """A model as a kernel of one input and one output (a multi-step plan: activations are
    temporaries, weights the model's per-device buffers). Registered under a name by
    register_model; ``params={"model": path}`` runs another ONNX file instead."""

    output = "out"
    dtypes = ("f32",)
    checked = False

    def __init__(self, name: str, model: Model | None, path: str | None = None,
                 plan: Plan | None = None):
        self.name = name
        self.model = model
        self.path = path
        self.fixed_plan = plan  # a model with integer inputs runs the plan of their values
        self.inputs = ("x",) if model is None else tuple(
            n for i, n in enumerate(model.input_names) if not model._is_host(i))
        self.params = (Param("model", "str", None,
                             "path of an ONNX file to run instead of the registered one"),)
        self.description = (f"ONNX model {model.name!r}" if model is not None
                            else f"ONNX model {path!r}")

    def _model(self, params) -> Model:
        path = (params or {}).get("model")
        if path is None:
            if self.model is None:
                self.model = load_onnx(self.path)
            return self.model
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentError(f"{self.name}: param 'model' must be a path, got "
                                f"{type(path).__name__}")
        return _cached_file(os.fspath(path))

    def convert_param(self, p, value, dt):
        return value

    def _plan(self, inputs, params, device=None) -> Plan:
        if self.fixed_plan is not None:
            return self.fixed_plan
        m = self._model(params)
        m._refuse_interpreted("a model kernel")
        if m.host_inputs:
            raise ModelError(f"{self.name}: the model has integer inputs "
                             f"({', '.join(m.host_inputs)}); run it with Model.run")
        if len(inputs) != len(m.graph.inputs):
            raise ArgumentError(f"{self.name}: the model takes {len(m.graph.inputs)} input(s)")
        for name, b in zip(m.input_names, inputs, strict=True):
            if b.dtype not in DTYPES:
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype}; expected f32 or "
                                 f"f16")
        if device is None:
            device = getattr(inputs[0], "device", None) if inputs else None
        plan = m.plan(*[b.shape for b in inputs], device=device,
                      dtypes=[b.dtype for b in inputs])
        if plan.outputs[0][0] != "tensor":
            raise ModelError(f"{self.name}: the model's output is a constant; nothing to run")
        return plan

    def check(self, inputs, output, params) -> None:
        plan = self._plan(inputs, params)
        want = plan.output_shape
        if output.dtype != "f32" or output.size != math.prod(want):
            raise ShapeError(f"{self.name}: out is {output.dtype} {output.shape}; expected f32 "
                             f"{want} (or any shape of {math.prod(want)} elements)")

    def output_spec(self, inputs, params):
        return self._plan(inputs, params).output_shape, "f32"

    def passes(self, inputs, output, params):
        m = self.model if self.fixed_plan is not None else self._model(params)
        device = getattr(output, "device", None)
        return m.passes(self._plan(inputs, params, device), device)


_files: dict = {}
_files_lock = threading.Lock()


def _cached_file(path: str) -> Model:
    """The Model of an ONNX file, loaded once per (path, modification time)."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        raise ArgumentError(f"model: {path!r} is not a file") from None
    key = os.path.abspath(path)
    with _files_lock:
        hit = _files.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    m = load_onnx(path)
    with _files_lock:
        _files[key] = (stamp, m)
    return m


def load_onnx(source, *, dtype: str = "f32", precision: str = "f32",
              name: str | None = None, max_folded_bytes: int | None = None) -> Model:
    """Load an ONNX model (a path, bytes or an onnx.ModelProto) to run on the GPU.

    Every node is checked first: one ModelError lists all the operators wgcompute cannot run.
    Constants are folded and batch norms folded into the convolutions before them.
    ``dtype="f16"`` stores weights and activations as f16 (arithmetic in f32; needs the
    adapter's shader-f16). Outputs are f32; inputs may be f32 or f16 arrays (an f16 array
    goes up as it is: half the bytes). ``precision="mixed"`` (f16 only) lets the
    convolutions' tiled GEMMs sum each k slice of 8 or 16 products in f16 and only the
    slices in f32: about 1.2x faster on NVIDIA GPUs, with a larger error (docs: "f16").
    An interpreted model (a transformer) keeps its float32 tensors as f16 on the GPU the
    same way: normalizations, softmax and reductions compute in f32, its products sum in f32
    (``precision="mixed"``: in f16 k slices where the output fills the GPU, in f32 where it is
    too small to), constants past f16's range saturate to ±65504.

    ``max_folded_bytes`` caps what folding constants may create (a small file can describe
    huge constants): by default max(64 MiB, 16 × the model's size), or the environment
    variable WGCOMPUTE_MAX_FOLDED_BYTES; a model over it is refused before anything is
    allocated. A model given as bytes or a ModelProto may not keep data in external files; a
    path's external data is read from inside its folder only."""
    if dtype not in DTYPES:
        raise ArgumentError(f"dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision: expected one of {', '.join(PRECISIONS)}, got "
                            f"{precision!r}")
    if precision == "mixed" and dtype != "f16":
        raise ArgumentError(f"precision: 'mixed' sums in f16 and needs dtype='f16'; a "
                            f"{dtype} model sums in {dtype}")
    if dtype == "f16" and not _device().has("shader-f16"):
        raise ModelError(f"dtype 'f16' needs the adapter feature 'shader-f16', which "
                         f"{_device().name} does not have")
    try:
        graph = read_onnx(source, max_folded_bytes)
    except WgComputeError:
        raise
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    if name is None:
        name = os.path.splitext(os.path.basename(path))[0] if path else graph.name
    if graph.eager is not None:  # the interpreter's float16 policy: ml/eager_half.py
        graph.float_dtype, graph.precision = dtype, precision
    m = Model(graph, name, dtype, path, precision)
    if path is None:  # what it was loaded from, for onnx_bytes() (a model that travels)
        m._onnx = bytes(source) if isinstance(source, (bytes, bytearray, memoryview)) \
            else source.SerializeToString()
    return m


def register_model(name: str, model, *, replace: bool = False) -> ModelKernel:
    """Make ``name`` a kernel that runs ``model`` (a Model, or a path loaded on first use):
    ``{"op": "run_kernel", "kernel": name, "inputs": [x], "output": logits}`` then works in
    run_kernel, pipeline_add and submit; ``params={"model": other_path}`` runs another file."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(f"name: expected an identifier-like string, got {name!r}")
    if isinstance(model, Model):
        k = ModelKernel(name, model)
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ArgumentError(f"model: {path!r} is not a file")
        require("onnx", "wgc.ml.register_model")  # now, not at the kernel's first run
        k = ModelKernel(name, None, path)
    else:
        raise ArgumentError(f"model: expected a wgc.ml.Model or a path, got "
                            f"{type(model).__name__}")
    return registry.add(k, replace=replace)
