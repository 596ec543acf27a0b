"""One node of an interpreted model run through the planned path (the planner's lowering and
kernels: the one definition of Conv, pools, Gemm, the activations...); installed into the
interpreter, which sits below the model layer."""

from __future__ import annotations

import numpy as np

from ..array import astype
from . import eager
from .ir import Graph, Node
from .model import Model


def run_planned(ctx: eager.Context, node: Node, ins: list) -> list | None:
    """``node`` on its float32 / float16 Buffer inputs as a one-node model (made once per
    device and per host values: those are its constants); None where an input is of another
    type."""
    key: list = ["planned", node.name]
    feeds, seen, consts, inputs = [], set(), {}, []
    for x, v in zip(node.inputs, ins, strict=False):
        if not x or v is None or x in seen:
            continue
        seen.add(x)
        if isinstance(v, np.ndarray):
            consts[x] = v
            key.append(("c", x, id(v)) if ctx._is_constant(v) else ("h", x, v.dtype.str,
                                                                     v.shape, v.tobytes()))
            continue
        if v.dtype.name not in eager.PLANNED_DTYPES:
            return None
        feeds.append(v)
        inputs.append((x, v.shape, eager.DTYPE_ONNX[v.dtype.name]))
        key.append(("b", x, v.dtype.name, v.shape))
    if not feeds:
        return None
    k = tuple(key)
    model = ctx.consts.get(k)
    if model is None:
        g = Graph([node], consts, inputs, [y for y in node.outputs if y][:1], ctx.opset,
                  f"{ctx.graph.name}:{node.name}", set(consts), [1],
                  max_folded_bytes=ctx.graph.max_folded_bytes)
        half = ctx.half and feeds[0].dtype.name == "f16"  # stored and summed as the model
        model = ctx.consts[k] = Model(g, g.name, "f16" if half else "f32",
                                      precision=ctx.precision if half else "f32")
    out = model(*feeds)
    if feeds[0].dtype.name != "f32":
        out = astype(out, feeds[0].dtype, casting="unsafe")
    return [out]


eager.install("planned", run_planned)
