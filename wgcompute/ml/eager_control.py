"""The interpreter's control flow: If on a condition known on the host, Loop on a host trip
count and conditions, Scan over its inputs' sequence axis; the bodies run through the
interpreter, seeing the enclosing scope."""

from __future__ import annotations

import numpy as np

from .. import array_api as xp
from .eager import eager
from .eager_args import ints, scalar, stack
from .eager_index import axis_of


def _condition(ctx, node, v, what: str) -> bool:
    c = np.asarray(ctx.host(node, v, what))
    if c.size != 1:
        raise ctx.fail(node, f"{what} has shape {c.shape}; expected one value")
    return bool(c.reshape(-1)[0])


def _check_branches(node, opset):
    """Why a sub-graph of If / Loop cannot run: a sequence or optional value, or a node."""
    from ..errors import ModelError
    from .eager import read_subgraph

    for key in ("then_branch", "else_branch", "body"):
        g = node.attrs.get(key)
        if g is None:
            continue
        for v in [*g.input, *g.output]:
            if not v.type.HasField("tensor_type"):
                return f"{key} has the value {v.name!r} of a sequence or optional type"
        try:
            read_subgraph(g, opset, 1 << 30)
        except ModelError as e:
            return f"{key}: {e}"
    return None


@eager("If", check=_check_branches)
def _if(ctx, node, ins):
    key = "then_branch" if _condition(ctx, node, ins[0], "cond") else "else_branch"
    outs = ctx.run_graph(ctx.subgraph(node, key), [], getattr(ctx, "scope", None) or {})
    if len(outs) != len(node.outputs):
        raise ctx.fail(node, f"{key} gives {len(outs)} outputs; the node has "
                             f"{len(node.outputs)}")
    return outs


@eager("Loop", check=_check_branches)
def _loop(ctx, node, ins):
    trips = int(scalar(ctx, node, ins[0], "M")) if ins and ins[0] is not None else None
    go = _condition(ctx, node, ins[1], "cond") if len(ins) > 1 and ins[1] is not None \
        else True
    if trips is None and not (len(ins) > 1 and ins[1] is not None):
        raise ctx.fail(node, "a Loop with neither a trip count nor a condition never ends")
    body = ctx.subgraph(node, "body")
    carried = list(ins[2:])
    n_scan = len(body.outputs) - 1 - len(carried)
    scans: list[list] = [[] for _ in range(n_scan)]
    outer = getattr(ctx, "scope", None) or {}
    i = 0
    while go and (trips is None or i < trips):
        outs = ctx.run_graph(body, [np.array(i, dtype=np.int64), np.array(go), *carried],
                             outer)
        go = _condition(ctx, node, outs[0], "the body's condition")
        carried = outs[1:1 + len(carried)]
        for acc, v in zip(scans, outs[1 + len(carried):], strict=True):
            acc.append(v)
        i += 1
    if n_scan and i == 0:
        raise ctx.fail(node, "a Loop that runs no iteration has scan outputs of unknown "
                             "shape")
    return carried + [_stack(ctx, acc) for acc in scans]


def _stack(ctx, values: list):
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values)
    return stack([ctx.buffer(v) for v in values])


def _element(v, axis: int, t: int):
    """Element ``t`` of ``v`` along ``axis`` (the axis dropped)."""
    key = (slice(None),) * axis + (t,)
    if isinstance(v, np.ndarray):
        return np.ascontiguousarray(v[key])
    return xp.asarray(v[key], copy=True)


def _scan(ctx, node, states: list, seqs: list, outer: dict) -> tuple[list, list]:
    """One Scan (opset 9's form) of ``seqs`` along their scan axes: (final states, scan
    outputs)."""
    body = ctx.subgraph(node, "body")
    m = len(seqs)
    axes = [axis_of(ctx, node, int(a), np.ndim(v) if isinstance(v, np.ndarray) else v.ndim,
                    "scan_input_axes")
            for a, v in zip(ctx.attr(node, "scan_input_axes", [0] * m), seqs, strict=True)]
    dirs = list(ctx.attr(node, "scan_input_directions", ctx.attr(node, "directions",
                                                                 [0] * m)))
    lengths = {v.shape[a] for v, a in zip(seqs, axes, strict=True)}
    if len(lengths) != 1:
        raise ctx.fail(node, f"the scan inputs' sequence lengths differ: {sorted(lengths)}")
    steps = lengths.pop()
    k = len(body.outputs) - len(states)
    collected: list[list] = [[] for _ in range(k)]
    for t in range(steps):
        elems = [_element(v, a, steps - 1 - t if d else t)
                 for v, a, d in zip(seqs, axes, dirs, strict=True)]
        outs = ctx.run_graph(body, [*states, *elems], outer)
        states = outs[:len(states)]
        for acc, v in zip(collected, outs[len(states):], strict=True):
            acc.append(v)
    if k and steps == 0:
        raise ctx.fail(node, "a Scan of empty sequences has scan outputs of unknown shape")
    out_axes = list(ctx.attr(node, "scan_output_axes", [0] * k))
    out_dirs = list(ctx.attr(node, "scan_output_directions", [0] * k))
    scans = []
    for acc, a, d in zip(collected, out_axes, out_dirs, strict=True):
        vals = acc[::-1] if d else acc
        rank = np.ndim(vals[0]) if isinstance(vals[0], np.ndarray) else vals[0].ndim
        a = axis_of(ctx, node, int(a), rank + 1, "scan_output_axes")
        scans.append(np.stack(vals, axis=a) if all(isinstance(v, np.ndarray) for v in vals)
                     else stack([ctx.buffer(v) for v in vals], axis=a))
    return states, scans


@eager("Scan", check=_check_branches)
def _scan_op(ctx, node, ins):
    outer = getattr(ctx, "scope", None) or {}
    m = int(ctx.attr(node, "num_scan_inputs"))
    if ctx.opset >= 9:
        states, seqs = list(ins[:len(ins) - m]), list(ins[len(ins) - m:])
        finals, scans = _scan(ctx, node, states, seqs, outer)
        return finals + scans
    # opset 8: a batch axis first, sequence lengths (all of them: the whole sequence)
    lens, rest = ins[0], list(ins[1:])
    states, seqs = rest[:len(rest) - m], rest[len(rest) - m:]
    batch = seqs[0].shape[0] if seqs else 0
    if batch == 0:
        raise ctx.fail(node, "a Scan of opset 8 needs a scan input with a batch")
    if lens is not None and set(ints(ctx, node, lens, "sequence_lens")) != {seqs[0].shape[1]}:
        raise ctx.fail(node, "sequence_lens shorter than the sequences (Scan of opset 8 runs "
                             "whole sequences)")
    per = [_scan(ctx, node, [_element(v, 0, b) for v in states],
                 [_element(v, 0, b) for v in seqs], outer) for b in range(batch)]
    return [_stack(ctx, [p[0][i] for p in per]) for i in range(len(states))] + \
        [_stack(ctx, [p[1][i] for p in per]) for i in range(len(per[0][1]))]
