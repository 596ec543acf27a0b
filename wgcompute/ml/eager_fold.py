"""The interpreter's folding on the host: nodes of small host values (shape arithmetic) and
the model's constants at load, by operators.fold, numpy or onnx's reference implementation."""

from __future__ import annotations

import math

import numpy as np

from . import operators
from .ir import Graph, Node

# op types that never fold on the host (their results outgrow their inputs, or random)
NO_HOST_FOLD: set[str] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                          "RandomUniformLike", "Multinomial", "Bernoulli",
                          "If", "Loop", "Scan"}  # sub-graphs read their scope's values

# a node whose inputs are all host values, of at most this many elements in all, folds on the
# host (shape arithmetic); a larger one computes on the GPU
HOST_FOLD_ELEMENTS = 1 << 12


def _to_proto(node: Node):
    from onnx import helper, numpy_helper

    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
             for k, v in node.attrs.items()}
    return helper.make_node(node.op, node.inputs, node.outputs, name=node.name,
                            domain=node.domain or None, **attrs)


def _reference(ctx, node: Node):
    """onnx's reference implementation of one node (built once per model and node)."""
    key = ("reference", node.name, node.op)
    ref = ctx.consts.get(key)
    if ref is None:
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(_to_proto(node), opsets={"": ctx.opset})
        ctx.consts[key] = ref
    return ref


def _fold_gather_elements(node: Node, ins: list) -> list:
    """GatherElements on the host with numpy (onnx's reference implementation reads only one
    element when the data is wider than the indices along the axis: BERT's token types)."""
    data, idx = np.asarray(ins[0]), np.asarray(ins[1]).astype(np.int64)
    axis = int(node.attrs.get("axis", 0)) % max(data.ndim, 1)
    size = data.shape[axis]
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise IndexError(f"an index of {idx.min()}..{idx.max()} is out of range for axis "
                         f"{axis} of {size}")
    return [np.take_along_axis(data, np.where(idx < 0, idx + size, idx), axis)]


_NUMPY_FOLDS = {"GatherElements": _fold_gather_elements}


def host_fold(ctx, node: Node, ins: list) -> list:
    """``node`` evaluated on host values (numpy): operators.fold where the op has a fold,
    else onnx's reference implementation; the result charged to the fold budget."""
    spec = operators.OPS.get(node.op)
    if spec is not None and spec.fold is not None:
        outs = operators.fold(node, ins, ctx.opset, ctx.budget)
        return [None if o is None else np.asarray(o) for o in outs]
    numpy_fold = _NUMPY_FOLDS.get(node.op)
    if numpy_fold is not None:
        outs = numpy_fold(node, ins)
        ctx.budget.charge(node, sum(o.nbytes for o in outs))
        return outs
    ref = _reference(ctx, node)
    feeds = {name: v for name, v in zip(node.inputs, ins, strict=False) if name}
    outs = ref.run(None, feeds)
    ctx.budget.charge(node, sum(np.asarray(o).nbytes for o in outs if o is not None))
    return [None if o is None else np.asarray(o) for o in outs]


def _ints(v) -> list[int]:
    return [int(d) for d in np.asarray(v).reshape(-1)]


def grown_size(node: Node, ins: list) -> int:
    """An upper bound of the elements of the result of an operator whose result may outgrow
    its inputs (Range, Expand, Tile, OneHot, ConstantOfShape, Pad), from its host inputs;
    the inputs' size for the others."""
    op, present = node.op, [v for v in ins if v is not None]
    try:
        if op == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in ins[:3])
            return max(math.ceil((limit - start) / delta), 0) if delta else 0
        if op == "Expand":
            return math.prod(np.broadcast_shapes(ins[0].shape, tuple(_ints(ins[1]))))
        if op == "Tile":
            return ins[0].size * math.prod(_ints(ins[1]))
        if op == "OneHot":
            return ins[0].size * abs(_ints(ins[1])[0])
        if op == "ConstantOfShape":
            return math.prod(_ints(ins[0]))
        if op == "Pad":
            pads = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else \
                list(node.attrs.get("pads", []))
            r = ins[0].ndim
            return math.prod(ins[0].shape[i] + pads[i] + pads[i + r] for i in range(r)) \
                if len(pads) == 2 * r else HOST_FOLD_ELEMENTS + 1
    except (TypeError, ValueError, IndexError, OverflowError):
        return HOST_FOLD_ELEMENTS + 1  # malformed: the operator's own code says why
    return sum(v.size for v in present)


def _folds_on_host(node: Node, ins: list) -> bool:
    """Every input is a host value (or omitted), and they and the result are small: shape
    arithmetic."""
    if node.op in NO_HOST_FOLD:
        return False
    total = 0
    for v in ins:
        if v is None:
            continue
        if not isinstance(v, np.ndarray):
            return False
        total += v.size
    return total <= HOST_FOLD_ELEMENTS and grown_size(node, ins) <= HOST_FOLD_ELEMENTS


def fold_at_load(graph: Graph, node: Node, values: list, budget) -> list:
    """A node of constants folded when the model loads: operators.fold where the operator
    has a fold, else onnx's reference implementation (within ``budget``)."""
    spec = operators.OPS.get(node.op)
    if spec is not None:
        return operators.fold(node, values, graph.opset, budget)
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(_to_proto(node), opsets={"": graph.opset})
    outs = ref.run(None, {x: v for x, v in zip(node.inputs, values, strict=False) if x})
    budget.charge(node, sum(np.asarray(o).nbytes for o in outs if o is not None))
    return [None if o is None else np.asarray(o) for o in outs]
