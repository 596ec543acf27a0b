"""An ONNX model read into wgcompute's graph: nodes with plain-Python attributes, constants as
numpy arrays, the unsupported-operator check, and the load-time rewrites (constant folding,
batch norm folded into the convolution before it, Gemm's b pre-transposed; the decomposed
attention as one node, which makes the model interpreted: ml/fuse_attention.py; in interpreted
models, a linear layer's bias and activation as its product's epilogue: ml/fuse_linear.py)."""

from __future__ import annotations

import os

import numpy as np

from .._extras import require
from ..errors import ArgumentError, ModelError
from . import (  # noqa: F401 - the interpreter's operators register themselves
    eager,
    eager_attention,
    eager_control,
    eager_einsum,
    eager_index,
    eager_loss,
    eager_math,
    eager_nn,
    eager_quant,
    eager_resize,
    eager_rnn,
    eager_shape,
    operators,
)
from .fuse_attention import fuse_attention
from .ir import Graph, Node, consumers

_FLOAT_TYPES = (1, 10, 11)  # TensorProto FLOAT, FLOAT16, DOUBLE
# integer (and bool) inputs: shape parameters, folded on the host
_HOST_TYPES = (2, 3, 4, 5, 6, 7, 9, 12, 13)


def _attr_value(a):
    from onnx import helper, numpy_helper

    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8") for x in v]
    if hasattr(v, "data_type") and hasattr(v, "dims"):  # a TensorProto
        return numpy_helper.to_array(v)
    return v


MAX_FOLDED_ENV = "WGCOMPUTE_MAX_FOLDED_BYTES"
MIN_FOLDED_BYTES = 64 << 20  # the default cap is max(this, FOLDED_PER_FILE_BYTE × file size)
FOLDED_PER_FILE_BYTE = 16


def folded_limit(max_folded_bytes, file_bytes: int) -> int:
    """What constant folding may create for a model of ``file_bytes``: the argument, else the
    environment variable, else max(64 MiB, 16 × the file's size)."""
    what = "max_folded_bytes"
    if max_folded_bytes is None:
        raw = os.environ.get(MAX_FOLDED_ENV, "").strip()
        if not raw:
            return max(MIN_FOLDED_BYTES, FOLDED_PER_FILE_BYTE * file_bytes)
        what = MAX_FOLDED_ENV
        try:
            max_folded_bytes = int(raw)
        except ValueError:
            raise ArgumentError(f"{MAX_FOLDED_ENV}: expected a number of bytes, got "
                                f"{raw!r}") from None
    if isinstance(max_folded_bytes, bool) or not isinstance(max_folded_bytes, int) \
            or max_folded_bytes < 0:
        raise ArgumentError(f"{what}: expected an int >= 0 (bytes), got {max_folded_bytes!r}")
    return max_folded_bytes


def _refuse_external_data(proto) -> None:
    """A model given as bytes or a ModelProto has no folder its external data could be in: a
    tensor stored outside it is refused (it would be read from the working directory)."""
    from onnx import external_data_helper as edh

    for t in edh._get_all_tensors(proto):
        if edh.uses_external_data(t):
            where = next((e.value for e in t.external_data if e.key == "location"), "?")
            raise ModelError(f"load_onnx: tensor {t.name!r} keeps its data in the file "
                             f"{where!r}; a model given as bytes or an onnx.ModelProto has no "
                             f"folder to read it from: load it from its path instead")


def _read_model(source):
    """(an onnx ModelProto, its size in bytes) from a path, bytes or a ModelProto. A path's
    external data is read by onnx.load, which keeps it inside the model's folder (no absolute
    location, no '..', no symbolic link); bytes and protos may have none."""
    onnx = require("onnx", "wgc.ml.load_onnx")
    if isinstance(source, onnx.ModelProto):
        _refuse_external_data(source)
        return source, source.ByteSize()
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_from_string(bytes(source))
        except Exception as e:
            raise ModelError(f"load_onnx: the bytes are not an ONNX model: {e}") from e
        _refuse_external_data(proto)
        return proto, len(source)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ArgumentError(f"load_onnx: {path!r} is not a file")
        try:
            proto = onnx.load(path)
        except Exception as e:
            raise ModelError(f"load_onnx: {path!r} is not an ONNX model (or its external "
                             f"data cannot be read from its folder): {e}") from e
        return proto, proto.ByteSize()
    raise ArgumentError(f"load_onnx: expected a path, bytes or an onnx.ModelProto, got "
                        f"{type(source).__name__}")


def _graph_of(g, opset: int, limit: int) -> Graph:
    """A Graph of an onnx GraphProto (the model's, or an If/Loop body's)."""
    from onnx import numpy_helper

    constants = {}
    for t in g.initializer:
        try:
            constants[t.name] = numpy_helper.to_array(t)
        except Exception as e:
            raise ModelError(f"load_onnx: initializer {t.name!r} cannot be read: {e}") from e
    for t in g.sparse_initializer:
        raise ModelError(f"load_onnx: sparse initializer {t.values.name!r} is not supported")
    inputs = []
    for vi in g.input:
        if vi.name in constants:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise ModelError(f"load_onnx: input {vi.name!r} is not a tensor")
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in tt.shape.dim) if tt.HasField("shape") else None
        inputs.append((vi.name, dims, tt.elem_type))
    nodes = []
    for i, n in enumerate(g.node):
        nodes.append(Node(n.op_type, n.name or f"{n.op_type}_{i}", list(n.input),
                          list(n.output), {a.name: _attr_value(a) for a in n.attribute},
                          n.domain))
    graph = Graph(nodes, constants, inputs, [o.name for o in g.output], opset,
                  g.name or "model", set(constants),
                  [o.type.tensor_type.elem_type if o.type.HasField("tensor_type") else 0
                   for o in g.output], max_folded_bytes=limit)
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            if tt.elem_type:
                graph.value_types[vi.name] = tt.elem_type
            if tt.HasField("shape"):
                graph.value_ranks[vi.name] = len(tt.shape.dim)
    return graph


def read_subgraph(g, opset: int, limit: int) -> Graph:
    """A sub-graph (an If branch, a Loop body) read and checked as the model's graph is."""
    graph = _graph_of(g, opset, limit)
    check_supported(graph)
    return graph


def read_onnx(source, max_folded_bytes: int | None = None) -> Graph:
    """The model's graph, checked for unsupported operators and rewritten (see module doc);
    ``max_folded_bytes``: what constant folding may create (see folded_limit)."""
    proto, file_bytes = _read_model(source)  # first: it says when onnx is not installed
    import onnx

    limit = folded_limit(max_folded_bytes, file_bytes)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        others = ", ".join(f"{o.domain!r} {o.version}" for o in proto.opset_import) or "none"
        raise ModelError(f"load_onnx: the model imports no opset of the default ONNX domain "
                         f"(it imports {others}): its operators are not ONNX's own")
    try:  # fills value_info; a model it cannot infer still loads (our shapes come later)
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - shape inference is advisory here
        pass
    graph = _graph_of(proto.graph, opset, limit)
    check_graph(graph)
    check_supported(graph)
    fold_constants(graph)
    # a model with attention runs interpreted (the planner lowers ONNX's own operators only)
    fuse_attention(graph)
    route(graph)
    fold_batch_norms(graph)
    transpose_gemm_weights(graph)
    eager_shape.fuse_linear(graph)  # interpreted: linear layers -> FusedMatMul (fuse_linear.py)
    return graph


def check_supported(graph: Graph) -> None:
    """One ModelError listing every node wgcompute cannot run (op type, name, opset, why)."""
    bad = []
    for name, _, elem in graph.inputs:
        if elem not in _FLOAT_TYPES + _HOST_TYPES and not eager.ONNX_DTYPES.get(elem):
            bad.append(("(input)", name, graph.opset, f"inputs must be tensors of a type "
                                                      f"wgcompute has, not "
                                                      f"{operators.type_name(elem)}"))
    ok_types = (np.float16, np.float32, np.float64, np.bool_, np.int8, np.int16, np.int32,
                np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
    for name, arr in graph.constants.items():
        if arr.dtype.type not in ok_types:
            bad.append(("(initializer)", name, graph.opset, f"{arr.dtype} tensors do not exist "
                                                            f"in wgcompute"))
    for n in graph.nodes:
        if n.op == "Constant" and isinstance(n.attrs.get("value"), np.ndarray) \
                and n.attrs["value"].dtype.type not in ok_types:
            bad.append((n.op, n.name, graph.opset, f"a {n.attrs['value'].dtype} value: the "
                                                   f"type does not exist in wgcompute"))
            continue
        if n.domain not in ("", "ai.onnx"):
            bad.append((n.op, n.name, graph.opset, f"domain {n.domain!r} is not supported"))
            continue
        why = eager.check_node(n, graph.opset)
        if why:
            bad.append((n.op, n.name, graph.opset, why))
    if bad:
        lines = "\n".join(f"  {op} {name!r} (opset {opset}): {why}"
                          for op, name, opset, why in bad)
        raise ModelError(f"load_onnx: {len(bad)} node(s) wgcompute cannot run:\n{lines}",
                         bad)


def check_graph(graph: Graph) -> None:
    """The graph is in single static assignment and in order, as ONNX requires: every value
    written once (never over a graph input or initializer), and read only after it is
    written. One ModelError naming the nodes."""
    writer: dict[str, str] = {name: "the graph's input" for name, _, _ in graph.inputs}
    writer.update((name, "an initializer") for name in graph.constants)
    bad = []
    for n in graph.nodes:
        for x in n.inputs:
            if x and x not in writer:
                why = "its own output" if x in n.outputs else "a value no node before it writes"
                bad.append(f"  {n.op} {n.name!r} reads {x!r}, {why}")
        for y in n.outputs:
            if not y:
                continue
            if y in writer:
                bad.append(f"  {n.op} {n.name!r} writes {y!r}, already written by "
                           f"{writer[y]}")
            else:
                writer[y] = f"{n.op} {n.name!r}"
    for y in graph.outputs:
        if y not in writer:
            bad.append(f"  graph output {y!r} is written by no node")
    if bad:
        raise ModelError("load_onnx: the graph is not valid ONNX (each value is written once, "
                         "before it is read):\n" + "\n".join(bad))


def fold_constants(graph: Graph) -> None:
    """Evaluate, once, every node whose inputs are all constants (numpy), within the graph's
    max_folded_bytes (checked from shapes before anything is allocated)."""
    kept = []
    budget = operators.FoldBudget(graph.max_folded_bytes)
    for n in graph.nodes:
        ins = [x for x in n.inputs if x]
        if all(x in graph.constants for x in ins) and _folds(graph, n):
            values = [graph.constants[x] if x else None for x in n.inputs]
            try:
                outs = eager.fold_at_load(graph, n, values, budget)
            except ModelError:
                raise
            except Exception as e:
                raise ModelError(f"load_onnx: node {n.op} {n.name!r}: {e}") from e
            for name, v in zip(n.outputs, outs):
                if name and v is not None:
                    graph.constants[name] = np.asarray(v)
            continue
        kept.append(n)
    graph.nodes = kept


def _folds(graph: Graph, n: Node) -> bool:
    """Whether ``n`` folds at load when its inputs are constants: an operator with a fold, or
    one only the interpreter runs on small constants (onnx's reference implementation)."""
    spec = operators.OPS.get(n.op)
    if spec is not None:
        return spec.fold is not None
    if n.op in eager.NO_HOST_FOLD:
        return False
    ins = [graph.constants[x] if x else None for x in n.inputs]
    return sum(v.size for v in ins if v is not None) <= eager.HOST_FOLD_ELEMENTS \
        and eager.grown_size(n, ins) <= eager.HOST_FOLD_ELEMENTS


def route(graph: Graph) -> None:
    """Which path runs the model: planned (every node an operator the planner lowers, and
    check_runnable passes) or interpreted (``graph.eager`` says why; eager.check_graph
    refuses there what the interpreter cannot do)."""
    why = next((f"{n.op} runs in the interpreter only" for n in graph.nodes
                if n.op not in operators.OPS or (operators.OPS[n.op].check is not None
                                                  and operators.OPS[n.op].check(n, graph.opset))),
               None)
    if why is None:
        why = _integer_data(graph)
    if why is None:
        try:
            check_runnable(graph)
        except ModelError as e:
            why = e.unsupported[0][3] if e.unsupported else str(e)
    if why is not None:
        graph.eager = why
        eager.check_graph(graph, _refused_in_interpreter(graph))


def _integer_data(graph: Graph) -> str | None:
    """Why an integer or bool input makes the model interpreted: a node reads it as data
    (the planned path would compute that with numpy on the host, per value); where it is a
    parameter (a target shape, axes, indices), the planned path folds it."""
    params = {**_HOST_PARAMS, "Slice": (1, 2, 3, 4), "ConstantOfShape": (0,), "Shape": (0,),
              "Clip": (1, 2)}
    ints = {name for name, _, elem in graph.inputs if elem not in _FLOAT_TYPES}
    for n in graph.nodes:
        for i, x in enumerate(n.inputs):
            if x in ints and i not in params.get(n.op, ()):
                return f"{n.op} computes with the integer input {x!r}"
    return None


def _refused_in_interpreter(graph: Graph) -> list:
    """What the interpreter would refuse at the first call, where the model's declared types
    and ranks tell already: spatial operators on other than 1-D and 2-D data, and the planned
    path's float-only operators on other types."""
    check = _RunCheck(graph)
    for n in graph.nodes:
        if n.op in _SPATIAL_OPS:
            check.spatial(n)
        t = check.types.get(n.inputs[0], 0) if n.inputs else 0
        small = n.op in eager.SMALL_INTS_EXACT and t in (2, 3, 4, 5)  # (U)INT8, (U)INT16
        if n.op in eager.FLOAT_ONLY and t not in (0, _F32, _F16) and not small:
            check.refuse(n, f"input {n.inputs[0]!r} is {operators.type_name(t)}: wgcompute "
                            f"computes {n.op} in float32 and float16")
    return check.bad


# inputs that are parameters, read on the host: they must be known when the model is planned
_HOST_PARAMS = {"Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Gather": (1,),
                "Dropout": (2,)}  # Dropout's ratio is unused in inference
_SPATIAL_OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")
_F32, _F16, _F64 = 1, 10, 11


class _RunCheck:
    """The state check_runnable walks the graph with: which values are known on the host,
    each value's ONNX element type, and the refusals so far."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.host = set(graph.constants)  # values known on the host when the model is planned
        self.types: dict[str, int] = dict(graph.value_types)
        for name, arr in graph.constants.items():
            if arr.dtype == np.float64:
                self.types[name] = _F64
        for name, _, elem in graph.inputs:
            self.types[name] = elem
            if elem in _HOST_TYPES:
                self.host.add(name)
        self.exact64: set[str] = set()  # float64 values whose f32 computation is exact
        self.f16_cast: dict[str, Node] = {}  # values of a cast to float16 of a computed tensor
        self.bad: list = []

    def refuse(self, n, why):
        self.bad.append((n.op, n.name, self.graph.opset, why))

    def node(self, n) -> None:
        spec = operators.OPS[n.op]
        ins = [x for x in n.inputs if x]
        if (spec.fold is not None and all(x in self.host for x in ins)) or n.op == "Shape":
            self.host.update(y for y in n.outputs if y)
            return
        if spec.lower is None:
            computed = next(x for x in ins if x not in self.host)
            self.refuse(n, f"runs on constants only; its input {computed!r} is computed at "
                           f"run time")
            return
        params = self.params(n)
        for i, x in enumerate(n.inputs):
            if x and i not in params:
                self.input(n, x)
        if n.op == "Cast":
            self.cast(n)
        if n.op in _SPATIAL_OPS:
            self.spatial(n)
        first = next((self.types[x] for x in ins if x in self.types), 0)
        for y in n.outputs:
            if y and y not in self.types:
                self.types[y] = first

    def params(self, n) -> tuple:
        graph = self.graph
        params = _HOST_PARAMS.get(n.op, ())
        for i in params:
            if i < len(n.inputs) and n.inputs[i] and n.inputs[i] not in self.host:
                self.refuse(n, f"input {i} ({n.inputs[i]!r}) must be a constant; it is "
                               f"computed at run time")
        mode = n.inputs[2] if n.op == "Dropout" and len(n.inputs) > 2 else ""
        if mode and (mode not in graph.constants
                     or bool(np.asarray(graph.constants[mode]).reshape(-1)[0])):
            self.refuse(n, "training mode is not supported (inference only): training_mode "
                           "must be a constant False")
        return params

    def input(self, n, x: str) -> None:
        t = self.types.get(x, 0)
        to = int(n.attrs.get("to", 0)) if n.op == "Cast" else None
        if x in self.host and t not in (0, *_FLOAT_TYPES):
            self.refuse(n, f"input {x!r} is {operators.type_name(t)}: the kernels compute "
                           f"float tensors (integer tensors only fold on the host)")
        elif t == _F64 and x not in self.exact64 and to != _F32:
            self.refuse(n, f"input {x!r} is DOUBLE: wgcompute computes float32, not float64")
        elif x in self.exact64 and to not in (_F32, _F16):
            self.refuse(n, f"input {x!r} is DOUBLE: wgcompute computes float32, not float64")
        if x in self.f16_cast:
            c = self.f16_cast[x]
            self.refuse(c, f"casts to FLOAT16 a tensor computed in float32 that {n.op} "
                           f"{n.name!r} then computes with: the rounding to float16 would be "
                           f"skipped")

    def cast(self, n) -> None:
        to = int(n.attrs.get("to", 0))
        src = self.types.get(n.inputs[0], 0)
        if to not in _FLOAT_TYPES:
            self.refuse(n, f"a cast of a computed tensor to {operators.type_name(to)} (the "
                           f"kernels compute float tensors)")
        elif to == _F64 and src in (_F32, _F16):
            self.exact64.add(n.outputs[0])
        elif to == _F16 and src != _F16:
            self.f16_cast[n.outputs[0]] = n
        self.types[n.outputs[0]] = to

    def spatial(self, n) -> None:
        graph = self.graph
        rank = graph.value_ranks.get(n.inputs[0])
        w = n.inputs[1] if n.op.startswith("Conv") and len(n.inputs) > 1 else None
        if rank is None and w in graph.constants:
            rank = graph.constants[w].ndim
        if rank is not None and rank not in (3, 4):
            self.refuse(n, f"a {rank - 2}-D input: wgcompute runs 1-D and 2-D (N, C, L) / "
                           f"(N, C, H, W) only")


def check_runnable(graph: Graph) -> None:
    """After folding: every node left either folds on the host when the model is planned
    (its inputs all constants or integer inputs) or lowers to kernels, and what it computes
    on the GPU is what ONNX says. Refused here, one ModelError naming every node: an operator
    that only folds reading a computed tensor, a parameter that is computed, a computed integer
    tensor, float64 arithmetic (the kernels compute float32: only casts whose result is exact
    pass), a cast to float16 feeding further arithmetic (its rounding would be skipped),
    training mode, and spatial operators on other than 1-D and 2-D data."""
    check = _RunCheck(graph)
    for n in graph.nodes:
        check.node(n)
    bad = check.bad
    for y in graph.outputs:
        if check.types.get(y) == _F64 and y not in check.host and y not in check.exact64:
            bad.append(("(output)", y, graph.opset, "a DOUBLE output computed in float32"))
    if bad:
        lines = "\n".join(f"  {op} {name!r} (opset {opset}): {why}"
                          for op, name, opset, why in bad)
        raise ModelError(f"load_onnx: {len(bad)} node(s) wgcompute cannot run:\n{lines}",
                         bad)


def fold_batch_norms(graph: Graph) -> None:
    """Conv → BatchNormalization (inference, constant parameters) becomes one Conv whose
    weights and bias absorb the normalization: w·s per filter, (b - mean)·s + bias, with
    s = scale / sqrt(var + epsilon), computed in f64."""
    users = consumers(graph)
    outputs = set(graph.outputs)
    drop = set()
    c = graph.constants
    for n in graph.nodes:
        if n.op != "Conv" or len(n.inputs) < 2 or n.inputs[1] not in c:
            continue
        bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
        if bias is not None and bias not in c:
            continue
        y = n.outputs[0]
        us = users.get(y, [])
        if y in outputs or len(us) != 1 or us[0].op != "BatchNormalization":
            continue
        bn = us[0]
        params = bn.inputs[1:5]
        if len(params) != 4 or not all(p in c for p in params) or bn.inputs[0] != y \
                or len([o for o in bn.outputs if o]) != 1:
            continue
        w = c[n.inputs[1]].astype(np.float64)
        scale, beta, mean, var = (c[p].astype(np.float64).reshape(-1) for p in params)
        if scale.size != w.shape[0]:
            continue
        s = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        b0 = c[bias].astype(np.float64) if bias is not None else np.zeros(w.shape[0])
        wname, bname = f"{n.name}/w_bn", f"{n.name}/b_bn"
        dt = c[n.inputs[1]].dtype
        c[wname] = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(dt)
        c[bname] = ((b0 - mean) * s + beta).astype(dt)
        graph.weights.update((wname, bname))
        n.inputs = [n.inputs[0], wname, bname]
        n.outputs = [bn.outputs[0]]
        n.name = f"{n.name}+{bn.name}"
        drop.add(id(bn))
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]


def transpose_gemm_weights(graph: Graph) -> None:
    """Gemm's constant b is stored transposed (trans_b): output columns are then rows of b,
    so a b wider than one binding splits into column bands."""
    c = graph.constants
    for n in graph.nodes:
        if n.op == "Gemm" and len(n.inputs) > 1 and n.inputs[1] in c \
                and not n.attrs.get("transB", 0) and c[n.inputs[1]].ndim == 2:
            name = f"{n.name}/b_t"
            c[name] = np.ascontiguousarray(c[n.inputs[1]].T)
            graph.weights.add(name)
            n.inputs = [n.inputs[0], name, *n.inputs[2:]]
            n.attrs = dict(n.attrs, transB=1)


eager.install("read_subgraph", read_subgraph)
