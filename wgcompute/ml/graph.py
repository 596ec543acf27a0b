"""An ONNX model read into wgcompute's graph: nodes with plain-Python attributes, constants as
numpy arrays, the unsupported-operator check, and the load-time rewrites (constant folding,
batch norm folded into the convolution before it, Gemm's b pre-transposed)."""

from __future__ import annotations

import os

import numpy as np

from ..errors import ArgumentError, ModelError
from . import ops_onnx
from .ir import Graph, Node

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


def _read_model(source):
    """An onnx ModelProto from a path, bytes or a ModelProto."""
    try:
        import onnx
    except ImportError:
        raise ModelError("load_onnx: the onnx package is not installed (pip install "
                         "'wgcompute[ml]')") from None
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_from_string(bytes(source))
        except Exception as e:
            raise ModelError(f"load_onnx: the bytes are not an ONNX model: {e}") from e
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ArgumentError(f"load_onnx: {path!r} is not a file")
        try:
            return onnx.load(path)
        except Exception as e:
            raise ModelError(f"load_onnx: {path!r} is not an ONNX model: {e}") from e
    raise ArgumentError(f"load_onnx: expected a path, bytes or an onnx.ModelProto, got "
                        f"{type(source).__name__}")


def read_onnx(source) -> Graph:
    """The model's graph, checked for unsupported operators and rewritten (see module doc)."""
    import onnx
    from onnx import numpy_helper

    proto = _read_model(source)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise ModelError("load_onnx: the model imports no opset of the default ONNX domain")
    try:  # fills value_info; a model it cannot infer still loads (our shapes come later)
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - shape inference is advisory here
        pass
    g = proto.graph
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
                   for o in g.output])
    check_supported(graph)
    fold_constants(graph)
    fold_batch_norms(graph)
    transpose_gemm_weights(graph)
    return graph


def check_supported(graph: Graph) -> None:
    """One ModelError listing every node wgcompute cannot run (op type, name, opset, why)."""
    bad = []
    for name, _, elem in graph.inputs:
        if elem not in _FLOAT_TYPES + _HOST_TYPES:
            bad.append(("(input)", name, graph.opset, "inputs must be float or integer "
                                                      "tensors"))
    for n in graph.nodes:
        if n.domain not in ("", "ai.onnx"):
            bad.append((n.op, n.name, graph.opset, f"domain {n.domain!r} is not supported"))
            continue
        spec = ops_onnx.OPS.get(n.op)
        if spec is None:
            bad.append((n.op, n.name, graph.opset, "operator not supported"))
            continue
        why = spec.check(n, graph.opset) if spec.check else None
        if why:
            bad.append((n.op, n.name, graph.opset, why))
    if bad:
        lines = "\n".join(f"  {op} {name!r} (opset {opset}): {why}"
                          for op, name, opset, why in bad)
        raise ModelError(f"load_onnx: {len(bad)} node(s) wgcompute cannot run:\n{lines}",
                         bad)


def fold_constants(graph: Graph) -> None:
    """Evaluate, once, every node whose inputs are all constants (numpy)."""
    kept = []
    for n in graph.nodes:
        spec = ops_onnx.OPS[n.op]
        ins = [x for x in n.inputs if x]
        if spec.fold is not None and all(x in graph.constants for x in ins):
            values = [graph.constants[x] if x else None for x in n.inputs]
            try:
                outs = spec.fold(n, values, graph.opset)
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


def _users(graph: Graph) -> dict[str, list[Node]]:
    users: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for x in n.inputs:
            if x:
                users.setdefault(x, []).append(n)
    return users


def fold_batch_norms(graph: Graph) -> None:
    """Conv → BatchNormalization (inference, constant parameters) becomes one Conv whose
    weights and bias absorb the normalization: w·s per filter, (b - mean)·s + bias, with
    s = scale / sqrt(var + epsilon), computed in f64."""
    users = _users(graph)
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
