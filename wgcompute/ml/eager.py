"""The graph interpreter: a model whose graph the planner cannot lower runs node by node on
Buffers (the array namespace and the kernels); small host values (shapes) fold with numpy.

An operator registers ``fn(ctx, node, ins) -> list`` with ``@eager("Op", ...)``. ``ins`` holds,
per node input, a Buffer (computed on the GPU), an ``np.ndarray`` (a value known on the host:
constants, initializers, shapes) or None (an omitted optional input); ``fn`` returns one value
per node output (Buffer, ``np.ndarray``, or None for an output it does not produce)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._lazy import tracing
from ..buffer import Buffer, buffer
from ..dtypes import DTYPES
from ..errors import ModelError, WgComputeError
from . import eager_half, operators
from .eager_fold import (  # noqa: F401 - the interpreter's names for the layers above
    HOST_FOLD_ELEMENTS,
    NO_HOST_FOLD,
    _folds_on_host,
    fold_at_load,
    grown_size,
    host_fold,
)
from .ir import Graph, Node

# op type -> fn(ctx, node, ins) -> list of outputs
EAGER: dict[str, Callable] = {}
# op type -> check(node, opset) -> why the interpreter cannot run it (at load), or None
EAGER_CHECKS: dict[str, Callable] = {}
# op types the interpreter runs through the planned path only: float32 and float16 inputs
FLOAT_ONLY: set[str] = set()
# ... of which these take 1- and 2-byte integers too (through float32, exactly)
SMALL_INTS_EXACT: set[str] = set()

# ONNX element type -> wgcompute dtype name (None: the type does not exist in wgcompute)
_ONNX_NAMES = {1: "f32", 2: "u8", 3: "s8", 4: "u16", 5: "s16", 6: "s32", 7: "s64", 9: "bool",
               10: "f16", 11: "f64", 12: "u32", 13: "u64", 14: "c64", 15: "c128"}
ONNX_DTYPES = {k: v if v in DTYPES else None for k, v in _ONNX_NAMES.items()}
DTYPE_ONNX = {v: k for k, v in ONNX_DTYPES.items() if v is not None}


# what the modules above this one install (it may not import them): "read_subgraph"
# (graph.read_subgraph) and "planned" (one node through the planned path, model.py's)
HOOKS: dict[str, Callable] = {}


def install(name: str, fn: Callable) -> None:
    HOOKS[name] = fn


def read_subgraph(g, opset: int, limit: int) -> Graph:
    """A sub-graph (an onnx GraphProto: If's branches, Loop's body) as a checked Graph."""
    return HOOKS["read_subgraph"](g, opset, limit)


def eager(*ops: str, check: Callable | None = None):
    """Register the decorated ``fn(ctx, node, ins) -> list`` as the interpreter's operator(s)
    ``ops``; ``check(node, opset)`` (optional) returns why a node cannot run, at load."""

    def register(fn):
        for op in ops:
            EAGER[op] = fn
            if check is not None:
                EAGER_CHECKS[op] = check
        return fn

    return register


def onnx_type_name(elem: int) -> str:
    return operators.type_name(elem)


def dtype_of_onnx(elem: int, device, what: str):
    """The wgcompute dtype of ONNX element type ``elem`` on ``device``, or a ModelError naming
    ``what`` and why it cannot be (no such dtype, or the adapter lacks its feature)."""
    name = ONNX_DTYPES.get(elem)
    if name is None:
        raise ModelError(f"{what} is {onnx_type_name(elem)}: the type does not exist in "
                         f"wgcompute (it has {', '.join(DTYPES)})")
    dt = DTYPES[name]
    if dt.feature is not None and device is not None and not device.has(dt.feature):
        raise ModelError(f"{what} is {onnx_type_name(elem)}: {dt.name} needs the adapter "
                         f"feature {dt.feature!r}, which {device.name} does not have")
    return dt


def _host_dtype(arr: np.ndarray, device, what: str):
    """The wgcompute dtype a host array uploads as (its own), or a ModelError."""
    try:
        from ..dtypes import dtype as resolve_dtype

        dt = resolve_dtype(arr.dtype, what)
    except WgComputeError:
        raise ModelError(f"{what} is {arr.dtype}: the type does not exist in wgcompute (it "
                         f"has {', '.join(DTYPES)})") from None
    if dt.feature is not None and not device.has(dt.feature):
        raise ModelError(f"{what} is {arr.dtype}: {dt.name} needs the adapter feature "
                         f"{dt.feature!r}, which {device.name} does not have")
    return dt


class Owner:
    """What an interpreted model's per-device state is keyed by (``Device.state_for``)."""


class EagerState:
    """What an interpreted model keeps on one device (``Device.state_for``): its constants
    uploaded once, and the host evaluators of its nodes; closed with the device."""

    def __init__(self, device):
        self.consts: dict = {}
        self.replays: dict = {}  # input shapes -> Replay (ml/replay.py), oldest first
        self.traces = 0  # traces that could not be kept
        self.no_replay: str | None = None  # why this model is not replayed

    def close(self) -> None:
        for rep in list(self.replays.values()):
            rep.close()
        self.replays.clear()
        for v in list(self.consts.values()):
            if isinstance(v, tuple) and isinstance(v[1], Buffer):
                v[1].free()
            elif hasattr(v, "free"):  # a one-node model of the planned path
                v.free()
        self.consts.clear()


class Context:
    """What an operator sees of the run: the graph, its opset, the device, attribute reading,
    refusals, host values and the upload of host values to the GPU.

    ``consts``: the per-device uploads of the model's constants (kept across calls);
    ``known``: the host copy of each graph input uploaded this call (``host`` reads it)."""

    def __init__(self, graph: Graph, device, consts: dict | None = None):
        self.graph = graph
        self.opset = graph.opset
        self.device = device
        self.consts = consts if consts is not None else {}
        self.known: dict[int, tuple] = {}  # id(Buffer) -> (Buffer, its host array)
        # id(Buffer) -> (Buffer, node, its inputs, output index): computed from known values
        self.derived: dict[int, tuple] = {}
        self._uploads: dict[int, tuple] = {}  # id(array) -> (array, Buffer): this call's
        self.budget = operators.FoldBudget(graph.max_folded_bytes)
        self.subgraphs: dict = {}  # (node name, attribute) -> Graph, for If/Loop/Scan
        self.scope: dict | None = None  # the values of the graph running now (name -> value)
        self.data_dependent: str | None = None  # why this run depends on input values
        # dtype="f16" (eager_half.py): float32 tensors on the GPU are float16; the float32
        # host values nodes made this call (id -> array), which go up as float16 too
        self.half = graph.float_dtype == "f16"
        self.precision = graph.precision
        self._host_floats: dict[int, np.ndarray] = {}

    # -- reading nodes -----------------------------------------------------------------------
    @staticmethod
    def attr(node: Node, key: str, default=None):
        return node.attrs.get(key, default)

    def fail(self, node: Node, msg: str) -> ModelError:
        """The error a node raises when it cannot run: names the op, the node and why."""
        return ModelError(f"{self.graph.name}: node {node.op} {node.name!r} (opset "
                          f"{self.opset}): {msg}", [(node.op, node.name, self.opset, msg)])

    # -- host values -------------------------------------------------------------------------
    @staticmethod
    def is_host(v) -> bool:
        return isinstance(v, np.ndarray)

    def host(self, node: Node, v, what: str) -> np.ndarray:
        """``v`` as a host array: a host value, a graph input's own data, or a small value the
        GPU computed from those (computed again on the host); a value computed from data is
        refused (it must be known when the model is planned)."""
        if isinstance(v, np.ndarray):
            return v
        if isinstance(v, Buffer):
            hit = self.known.get(id(v))
            if hit is not None and hit[0] is v:
                self.spoil(node, what)
                return hit[1]
            made = self.derived.get(id(v))
            if made is not None and made[0] is v:  # computed from known values: again here
                _, src, ins, k = made
                vals = [self.host(src, x, what) if x is not None else None for x in ins]
                try:
                    arr = host_fold(self, src, vals)[k]
                except WgComputeError:
                    raise
                except Exception as e:  # noqa: BLE001 - numpy's or onnx's reason, named
                    raise self.fail(src, f"folding on the host failed: {e}") from e
                self.known[id(v)] = (v, arr)
                self.spoil(node, what)
                return arr
            raise self.fail(node, f"{what} must be known when the model is planned; it is "
                                  f"computed at run time")
        raise self.fail(node, f"{what} is missing")

    def spoil(self, node: Node, what: str) -> None:
        """A host value was read from an input's data: this run's work depends on the
        values, not only on the shapes (a replay of it would be wrong for other inputs)."""
        if self.data_dependent is None:
            self.data_dependent = f"node {node.op} {node.name!r} reads its {what} from the " \
                                  f"inputs' values"

    def _knowable(self, v) -> bool:
        return v is None or isinstance(v, np.ndarray) or (
            isinstance(v, Buffer) and (id(v) in self.known or id(v) in self.derived))

    def note(self, node: Node, ins: list, outs: list) -> None:
        """Remember how ``node`` made its Buffer outputs from values known on the host (graph
        inputs, shapes), when they are small: ``host`` computes them there if a node needs
        them as parameters (a shape computed from an integer input)."""
        if node.op in NO_HOST_FOLD or not all(self._knowable(v) for v in ins):
            return
        if sum(v.size for v in ins if v is not None) > HOST_FOLD_ELEMENTS:
            return
        for k, out in enumerate(outs):
            if isinstance(out, Buffer):
                self.derived[id(out)] = (out, node, ins, k)

    def buffer(self, v, what: str = "value") -> Buffer:
        """``v`` on the GPU: a Buffer as it is; a host array uploaded once (the model's
        constants once per device, others once per call), in its own dtype where wgcompute
        has it, refused otherwise."""
        if isinstance(v, Buffer):
            return v
        if not isinstance(v, np.ndarray):
            v = np.asarray(v)
        key = id(v)
        for cache in (self.consts, self._uploads):
            hit = cache.get(key)
            if hit is not None and hit[0] is v:
                return hit[1]
        dt = self.dtype(v, what)
        a = np.ascontiguousarray(v).reshape(v.shape)
        if dt.name == "f16" and a.dtype == np.float32:
            a = eager_half.to_half(a)
        b = buffer(a, dtype=dt, device=self.device)
        (self.consts if self._is_constant(v) else self._uploads)[key] = (v, b)
        return b

    def _is_constant(self, v: np.ndarray) -> bool:
        ids = self.consts.get("constant ids")
        if ids is None:
            ids = self.consts["constant ids"] = {id(c) for c in self.graph.constants.values()}
        return id(v) in ids  # the graph holds its constants: their ids are not reused

    def dtype(self, v, what: str = "value"):
        """The wgcompute dtype of a value on the GPU: a Buffer's, or a host array's own
        (float16 for the graph's float32 values of a dtype="f16" model)."""
        if isinstance(v, Buffer):
            return v.dtype
        v = np.asarray(v)
        if self.half and v.dtype == np.float32 and self._graph_value(v):
            return DTYPES["f16"]
        return _host_dtype(v, self.device, what)

    def _graph_value(self, v: np.ndarray) -> bool:
        hit = self._host_floats.get(id(v))
        return (hit is not None and hit is v) or self._is_constant(v)

    def note_host(self, values) -> None:
        """Float32 host values of the graph (a node's results, a sub-graph's constants): a
        dtype="f16" model uploads them as float16 (arrays an operator makes for itself, such
        as index tables and weights of its own kernels, go up in their own types)."""
        for v in values:
            if isinstance(v, np.ndarray) and v.dtype == np.float32:
                self._host_floats[id(v)] = v

    def onnx_dtype(self, elem: int, what: str):
        """dtype_of_onnx, with FLOAT as float16 in a dtype="f16" model."""
        if self.half and elem == eager_half.FLOAT:
            elem = DTYPE_ONNX["f16"]
        return dtype_of_onnx(elem, self.device, what)

    # -- sub-graphs (If, Loop, Scan) ----------------------------------------------------------
    def subgraph(self, node: Node, key: str) -> Graph:
        """The graph attribute ``key`` of ``node`` (read once)."""
        k = (node.name, key)
        g = self.subgraphs.get(k)
        if g is None:
            g = self.subgraphs[k] = read_subgraph(node.attrs[key], self.opset,
                                                  self.graph.max_folded_bytes)
        return g

    def run_graph(self, g: Graph, feeds: list, outer: dict) -> list:
        """Run sub-graph ``g`` on ``feeds`` (its inputs, in order), seeing the values of the
        enclosing scope ``outer`` (name -> value); returns its outputs as values."""
        env = dict(outer)
        env.update(g.constants)
        if self.half:
            self.note_host(g.constants.values())
        for (name, _, _), v in zip(g.inputs, feeds, strict=False):
            env[name] = v
        _run_nodes(self, g, env)
        return [env[y] for y in g.outputs]


# -- one node through the planner ------------------------------------------------------------
PLANNED_DTYPES = ("f32", "f16")


def planned(ctx: Context, node: Node, ins: list) -> list | None:
    """``node`` run as the planned path runs it (the planner's lowering and kernels: one
    definition of Conv, pools, Gemm...), on its float32 / float16 inputs, its host inputs the
    constants of a one-node model made once per device; None where an input is of another
    type (the caller computes it otherwise or refuses). The model layer installs it."""
    return HOOKS["planned"](ctx, node, ins)


# -- running a graph -------------------------------------------------------------------------
def _step(ctx: Context, node: Node, ins: list) -> list:
    if _folds_on_host(node, ins):
        try:
            return host_fold(ctx, node, ins)
        except WgComputeError:
            raise
        except Exception as e:  # noqa: BLE001 - numpy's or onnx's message, named by node
            raise ctx.fail(node, f"folding on the host failed: {e}") from e
    fn = EAGER.get(node.op)
    if fn is None:
        raise ctx.fail(node, "operator not supported")
    return fn(ctx, node, ins)


# operators whose sub-graphs read their scope's values by name (not through node.inputs)
_SCOPED = {"If", "Loop", "Scan"}


def _last_uses(ctx: Context, g: Graph) -> dict:
    """node index -> the values no later node reads (nor the graph returns): let go after
    that node, so a result dies with its last reader (a queued copy nobody reads is never
    run; memory is freed as the graph goes). Empty for a graph with sub-graphs."""
    key = ("last uses", id(g))
    hit = ctx.consts.get(key)
    if hit is not None and hit[0] is g:
        return hit[1]
    drops: dict = {}
    if not any(n.op in _SCOPED for n in g.nodes):
        last = {x: i for i, n in enumerate(g.nodes) for x in n.inputs if x}
        keep = set(g.outputs) | set(g.constants)
        for name, i in last.items():
            if name not in keep:
                drops.setdefault(i, []).append(name)
    ctx.consts[key] = (g, drops)
    return drops


def _run_nodes(ctx: Context, g: Graph, env: dict) -> None:
    outer, ctx.scope = ctx.scope, env  # what an If / Loop body sees
    cap = tracing(ctx.device)
    drops = _last_uses(ctx, g)
    try:
        for i, node in enumerate(g.nodes):
            if cap is not None:  # a trace: its ops are named after their node in profiles
                cap.tag = f"{node.op} {node.name}"
            ins = [env[x] if x else None for x in node.inputs]
            outs = _step(ctx, node, ins)
            if ctx.half:
                ctx.note_host(outs)
            if any(isinstance(v, Buffer) for v in ins):
                ctx.note(node, ins, outs)
            if len(outs) < len([y for y in node.outputs if y]):
                outs = list(outs) + [None] * (len(node.outputs) - len(outs))
            for y, v in zip(node.outputs, outs, strict=False):
                if y:
                    env[y] = v
            for name in drops.get(i, ()):
                env.pop(name, None)
    finally:
        ctx.scope = outer


def host_input(graph: Graph, i: int, x, device) -> np.ndarray:
    """Graph input ``i`` given as numpy (or anything numpy reads) in the type the model
    declares: a float input rounded to it, an integer or bool one converted exactly (a
    dtype="f16" model takes float16 for float32 as it is)."""
    from ..dtypes import convert_exact

    name, _, elem = graph.inputs[i]
    a = np.asarray(x)
    if a.dtype == np.float16 and elem == eager_half.FLOAT and graph.float_dtype == "f16":
        return a
    dt = dtype_of_onnx(elem, device, f"input {name!r}") if elem else \
        _host_dtype(a, device, f"input {name!r}")
    if a.dtype == dt.numpy:
        return a
    if dt.kind == "f" and a.dtype.kind in "fiu":
        return a.astype(dt.numpy)
    if dt.kind in "iub" and a.dtype.kind in "iub":
        return convert_exact(a, dt, f"input {name!r}")
    raise ModelError(f"{graph.name}: input {name!r} is {a.dtype}; the model declares "
                     f"{onnx_type_name(elem)}")


def _upload_input(ctx: Context, name: str, elem: int, v) -> Buffer:
    """A graph input on the GPU (a host array's copy kept for ``ctx.host``)."""
    if isinstance(v, Buffer):
        half = ctx.half and elem == eager_half.FLOAT and v.dtype == "f16"
        if elem and ONNX_DTYPES.get(elem) != v.dtype.name and not half:
            raise ModelError(f"{ctx.graph.name}: input {name!r} is a {v.dtype} Buffer; the "
                             f"model declares {onnx_type_name(elem)}")
        return v
    b = buffer(np.ascontiguousarray(v).reshape(v.shape),  # (0-d stays 0-d)
               dtype=_host_dtype(v, ctx.device, f"input {name!r}"), device=ctx.device)
    ctx.known[id(b)] = (b, v)
    return b


def to_host(v, elem: int) -> np.ndarray:
    """An output value read back as numpy, in the ONNX type the graph declares."""
    return host_typed(v.to_numpy() if isinstance(v, Buffer) else np.asarray(v), elem)


def host_typed(a: np.ndarray, elem: int) -> np.ndarray:
    """A host array of an output in the ONNX type the graph declares."""
    name = ONNX_DTYPES.get(elem)
    if name is not None and a.dtype != DTYPES[name].numpy:
        a = a.astype(DTYPES[name].numpy)
    return a


def upload_inputs(ctx: Context, inputs: list) -> dict:
    """The values a run starts from: the graph's constants, and its inputs (host arrays in
    the declared types, or Buffers) on the GPU."""
    env: dict = dict(ctx.graph.constants)
    for (name, _, elem), v in zip(ctx.graph.inputs, inputs, strict=True):
        env[name] = _upload_input(ctx, name, elem, v)
    return env


def evaluate(ctx: Context, env: dict) -> list:
    """Run the graph's nodes from ``env`` (upload_inputs'): its outputs' values (Buffers,
    whose work is queued, or host arrays)."""
    if ctx.half:
        eager_half.inputs(ctx, env)
    _run_nodes(ctx, ctx.graph, env)
    outs = []
    for y in ctx.graph.outputs:
        v = env[y]
        if v is None:
            raise ModelError(f"{ctx.graph.name}: output {y!r} was not produced")
        outs.append(v)
    return outs


def output_types(graph: Graph) -> list[int]:
    return graph.output_types or [0] * len(graph.outputs)


def interpret(graph: Graph, inputs: list, device, consts: dict, as_buffers: bool = False
              ) -> list:
    """Run ``graph`` on its inputs (host arrays in the declared types, or Buffers): inputs
    uploaded, nodes run on the GPU (small host values folded), outputs read back as numpy
    in their declared types (``as_buffers``: outputs as Buffers)."""
    ctx = Context(graph, device, consts)
    vals = evaluate(ctx, upload_inputs(ctx, inputs))
    if as_buffers:
        return [eager_half.output(ctx.buffer(v), elem)
                for v, elem in zip(vals, output_types(graph), strict=True)]
    return [to_host(v, elem) for v, elem in zip(declared(vals, graph), output_types(graph),
                                                strict=True)]


def declared(vals: list, graph: Graph) -> list:
    """The graph's output values with each float16 Buffer converted to the float32 the graph
    declares on the GPU, before it is read back (numpy's conversion of BERT-base's 3M-value
    output took 4.7 ms on an H200's host; the GPU's a few us)."""
    return [eager_half.output(v, elem) if isinstance(v, Buffer) else v
            for v, elem in zip(vals, output_types(graph), strict=True)]


def run_model(graph: Graph, owner: Owner, xs: list, default_device, numpy: bool = False
              ) -> list:
    """A model's call on the interpreted path: numpy in, numpy out; Buffers in (every
    input), Buffers out (numpy out if ``numpy``). Inputs keep their own types (a float input
    rounded to the type the model declares, an integer one converted exactly); ``owner``
    keys the model's state on the device (its Buffers' device, else ``default_device``)."""
    device = next((x.device for x in xs if isinstance(x, Buffer)), None) or default_device
    state = device.state_for(owner, EagerState)
    vals = [x if isinstance(x, Buffer) else host_input(graph, i, x, device)
            for i, x in enumerate(xs)]
    return interpret(graph, vals, device, state.consts,
                     not numpy and all(isinstance(x, Buffer) for x in xs))


# -- what the interpreter refuses at load ------------------------------------------------------
def check_node(node: Node, opset: int) -> str | None:
    """Why the interpreter cannot run ``node`` (None: it can, as far as load can tell)."""
    if node.op not in EAGER and node.op not in operators.OPS:
        return "operator not supported"
    check = EAGER_CHECKS.get(node.op)
    if check is not None:
        return check(node, opset)
    if node.op not in EAGER:
        spec = operators.OPS[node.op]
        return spec.check(node, opset) if spec.check else None
    return None


def check_graph(graph: Graph, bad: list, device=None) -> None:
    """What the interpreter refuses when the model loads, in one ModelError: ``bad`` (what
    the graph layer found), an operator it has no GPU form of, and inputs of a type the
    device cannot hold."""
    from ..runtime import default_device

    device = device or default_device()
    bad = list(bad)
    for name, _, elem in graph.inputs:
        try:
            dtype_of_onnx(elem, device, f"input {name!r}")
        except ModelError as e:
            bad.append(("(input)", name, graph.opset, str(e)))
    for n in graph.nodes:
        if n.op not in EAGER:
            bad.append((n.op, n.name, graph.opset, "runs on constants only; an input is "
                                                   "computed at run time"))
    if bad:
        lines = "\n".join(f"  {op} {name!r} (opset {opset}): {why}"
                          for op, name, opset, why in bad)
        raise ModelError(f"load_onnx: {len(bad)} node(s) wgcompute cannot run:\n{lines}",
                         bad)
