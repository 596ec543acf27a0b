"""The decomposed scaled-dot-product attention that exporters write, found in an interpreted
model's graph and replaced by one node that the attention kernel runs
(kernels/nn/attention.py): no score matrix in memory, no separate scale, mask, softmax and
second product.

The pattern (torch's and transformers' exports, and hand-built encoders)::

    S  = MatMul(Q', K')          Q' = Q, Mul(Q, c) or Div(Q, c);  K' likewise from Kᵀ
    S' = S, Mul(S, c) or Div(S, c), then optionally Add(S', mask) (either order)
    P  = Softmax(S', axis=-1)
    P' = P, or Where(IsNaN(P), 0, P)   (a row with no key to attend gives 0, not NaN)
    Y  = MatMul(P', V)

with every c a constant scalar; each value between Q', K' and Y is read by the pattern alone
and is not a graph output; then optionally a Transpose of Y alone keeping its last axis (the
heads' merge: the kernel writes Y in that layout, ``out_perm``, so no copy permutes it). It
becomes ``FusedAttention(Q, Kᵀ, V, mask or "", c...)`` (domain
"wgcompute", attributes ``scale``, the product of the constants c, ``empty``: "zero" with the
Where, else "nan", ``factors``: what each c given as an input does, e.g. "q*" or "s/":
torch computes SDPA's scale from Q's shape at run time, and ``originals``: the nodes it
replaces), named after those nodes. The interpreter's handler runs the kernel where it can
and the original nodes where it cannot (ml/eager_attention.py)."""

from __future__ import annotations

import math

from .ir import Graph, Node, consumers, subgraph

DOMAIN = "wgcompute"
OP = "FusedAttention"


def _scalar(graph: Graph, name: str) -> float | None:
    v = graph.constants.get(name)
    if v is None or v.size != 1 or v.dtype.kind != "f":
        return None
    f = float(v.reshape(()))
    return f if math.isfinite(f) and f != 0.0 else None


class _Match:
    """One pattern's walk back from its last MatMul: the nodes it covers and its operands."""

    def __init__(self, graph: Graph, users: dict, by_output: dict):
        self.graph, self.users, self.by_output = graph, users, by_output
        self.nodes: list[Node] = []
        self.scale = 1.0
        self.factors: list[tuple[str, str]] = []  # ("q*", value name), ...: known at run time

    def producer(self, value: str, *ops: str) -> Node | None:
        """The node making ``value`` if it is one of ``ops``, read by one node alone and not
        a graph output."""
        n = self.by_output.get(value)
        if n is None or n.op not in ops or n.domain not in ("", "ai.onnx"):
            return None
        if value in self.graph.outputs or len(self.users.get(value, ())) != 1:
            return None
        return n

    def scaled(self, value: str, target: str) -> str:
        """``value`` with a Mul or Div taken off: by a constant scalar into ``scale``, by
        anything else (a scale computed from a shape at run time) into ``factors`` for
        ``target`` ("q", "k" or "s"), applied at run time (folded where it is a scalar)."""
        n = self.producer(value, "Mul", "Div")
        if n is None or len(n.inputs) != 2 or not all(n.inputs):
            return value
        a, b = n.inputs
        c = _scalar(self.graph, b)
        if c is None and n.op == "Mul":
            c = _scalar(self.graph, a)
            if c is not None:
                a = b
        if c is not None:
            self.scale *= c if n.op == "Mul" else 1.0 / c
        elif a in self.graph.constants:  # (a constant numerator: not a scale of a tensor)
            return value
        else:
            self.factors.append((target + ("*" if n.op == "Mul" else "/"), b))
        self.nodes.append(n)
        return a

    def softmax_input(self, probs: str) -> tuple[str, str] | None:
        """(the Softmax's input, empty mode) for the probabilities ``probs`` a MatMul reads."""
        empty = "nan"
        where = self.by_output.get(probs)
        if where is not None and where.op == "Where" and len(where.inputs) == 3 \
                and probs not in self.graph.outputs and len(self.users.get(probs, ())) == 1:
            cond, zero, p = where.inputs
            isnan = self.by_output.get(cond)
            if (isnan is None or isnan.op != "IsNaN" or isnan.inputs[0] != p
                    or len(self.users.get(cond, ())) != 1 or cond in self.graph.outputs
                    or self.graph.constants.get(zero) is None
                    or self.graph.constants[zero].size != 1
                    or float(self.graph.constants[zero].reshape(())) != 0.0
                    or sorted(id(u) for u in self.users.get(p, ())) != sorted(
                        (id(isnan), id(where))) or p in self.graph.outputs):
                return None
            self.nodes += [where, isnan]
            probs, empty = p, "zero"
            soft = self.by_output.get(probs)
        else:
            soft = self.producer(probs, "Softmax")
        if soft is None or soft.op != "Softmax" or int(soft.attrs.get("axis", -1)) != -1 \
                or self.graph.opset < 13:
            return None
        self.nodes.append(soft)
        return soft.inputs[0], empty

    def scores(self, value: str) -> tuple[str, str, str] | None:
        """(Q, Kᵀ, mask or "") of the scores ``value`` (Softmax's input)."""
        mask = ""
        add = self.producer(value, "Add")
        if add is not None and len(add.inputs) == 2:
            for s, m in (add.inputs, add.inputs[::-1]):
                if self.producer(self.scaled_peek(s), "MatMul") is not None:
                    self.nodes.append(add)
                    value, mask = s, m
                    break
        value = self.scaled(value, "s")
        mm = self.producer(value, "MatMul")
        if mm is None or len(mm.inputs) != 2:
            return None
        self.nodes.append(mm)
        return self.scaled(mm.inputs[0], "q"), self.scaled(mm.inputs[1], "k"), mask

    def merge_of_heads(self, value: str) -> Node | None:
        """The Transpose that alone reads ``value`` (Y), keeping its last axis last (the
        merge of the heads before the output projection), where Y is not a graph output."""
        us = self.users.get(value, ())
        if value in self.graph.outputs or len(us) != 1:
            return None
        n = us[0]
        perm = n.attrs.get("perm")
        if n.op != "Transpose" or n.domain not in ("", "ai.onnx") or perm is None \
                or len(perm) < 3 or int(perm[-1]) != len(perm) - 1 \
                or sorted(int(p) for p in perm) != list(range(len(perm))):
            return None
        return n

    def scaled_peek(self, value: str) -> str:
        """What ``scaled`` would give, without taking it."""
        n = self.producer(value, "Mul", "Div")
        if n is None or len(n.inputs) != 2:
            return value
        if n.op == "Mul" and _scalar(self.graph, n.inputs[0]) is not None:
            return n.inputs[1]
        return n.inputs[0]


def _match(graph: Graph, users: dict, by_output: dict, last: Node) -> tuple | None:
    """(the nodes replaced, the fused node) for the pattern ending at MatMul ``last``."""
    if last.op != "MatMul" or len(last.inputs) != 2 or last.domain not in ("", "ai.onnx"):
        return None
    m = _Match(graph, users, by_output)
    got = m.softmax_input(last.inputs[0])
    if got is None:
        return None
    s, empty = got
    qkm = m.scores(s)
    if qkm is None:
        return None
    q, kt, mask = qkm
    nodes = [last, *m.nodes]
    name = "+".join(n.name for n in reversed(nodes))
    attrs = {"scale": float(m.scale), "empty": empty,
             "factors": [kind for kind, _ in m.factors]}
    out = last.outputs[0]
    tr = m.merge_of_heads(out)
    if tr is not None:  # the heads' merge: the kernel writes Y in its permuted layout
        nodes.insert(0, tr)
        out, attrs["out_perm"] = tr.outputs[0], [int(p) for p in tr.attrs["perm"]]
    attrs["originals"] = subgraph(graph, nodes, out, name)
    fused = Node(OP, name, [q, kt, last.inputs[1], mask, *(v for _, v in m.factors)], [out],
                 attrs, DOMAIN)
    return nodes, fused


def fuse_attention(graph: Graph) -> int:
    """Replace each decomposed attention of ``graph`` by one FusedAttention node (placed where
    its last MatMul was); returns how many were replaced."""
    users = consumers(graph)
    by_output = {o: n for n in graph.nodes for o in n.outputs if o}
    replace, drop = {}, set()
    for n in graph.nodes:
        got = _match(graph, users, by_output, n)
        if got is None or any(id(x) in drop for x in got[0]):
            continue
        drop.update(id(x) for x in got[0])
        replace[id(n)] = got[1]
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes
                   if id(n) in replace or id(n) not in drop]
    return len(replace)
