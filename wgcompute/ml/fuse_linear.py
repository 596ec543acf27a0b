"""Linear layers found in an interpreted model's graph and replaced by one node that the matmul
kernel with an epilogue runs (kernels/matmul/epilogue.py): the bias add and the activation
happen in the product's write-back instead of in kernels that read and write the whole output
again.

The pattern (torch's and transformers' exports, and hand-built encoders)::

    Y = MatMul(X, W)            W a 2-D float32 constant (K, N)
    Z = Add(Y, B) or Add(B, Y)  B a float32 constant of N values broadcast along the rows:
                                shape (N,), (1, N), (1, 1, N)... (or one value)
    then optionally one of
        Relu(Z)
        Gelu(Z)                 (opset 20, approximate "none")
        0.5 · Z · (1 + Erf(Z / √2)), as torch writes it: Div(Z, √2) or Mul(Z, 1/√2), Erf,
        Add(·, 1), then the two Muls in any order of Z, (1 + erf) and 0.5 (each constant a
        scalar within a relative 1e-6 of its value, either operand order)

with every value between Y and the last node read by the pattern alone (Z by the GELU's two
nodes) and not a graph output. It becomes ``FusedMatMul(X, W, B')`` (domain "wgcompute",
B' the bias as (N,), a new constant unless B is one already) with attributes ``activation``
("none", "relu" or "gelu"), ``min_rank`` (B's rank: X needs at least as many dimensions for
the add not to grow the result) and ``originals`` (a Graph of the nodes it replaced, with the
constants they read: run by the interpreter where the kernel does not take the operands, and
folded on the host where the interpreter folds), named after the nodes it replaces
("MatMul_3+Add_4+..."). ml/eager_shape.py runs it.

Then linear layers that read the same X with weights of the same K and the same activation
(an attention block's query, key and value projections as transformers' BERT exports them)
become one FusedMatMul of the weights and biases side by side, (K, N1 + N2 + ...), with an
attribute ``parts`` (N1, N2, ...) and one output per layer: each a view of its columns of the
one product (``merge_siblings``). Three 128 × 768 × 768 products at batch 1 leave most of a
large GPU idle; one 128 × 2304 × 768 product does not.

Only interpreted models are rewritten: the planned path lowers ONNX's own operators."""

from __future__ import annotations

import math

import numpy as np

from .ir import Graph, Node, consumers, subgraph

DOMAIN = "wgcompute"
OP = "FusedMatMul"
RTOL = 1e-6  # the GELU's constants: within this relative distance of 1/√2, √2, 1 and 0.5
_ONNX = ("", "ai.onnx")


def _scalar(graph: Graph, name: str) -> float | None:
    """The value of a constant float scalar (shape () or (1,): it broadcasts without
    growing any rank), else None."""
    v = graph.constants.get(name)
    if v is None or v.size != 1 or v.ndim > 1 or v.dtype.kind != "f":
        return None
    return float(v.reshape(()))


def _near(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= RTOL * abs(want)


class _Walk:
    """The graph's consumers, its outputs and the chain of nodes one match covers."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.users = consumers(graph)
        self.outputs = set(graph.outputs)

    def only(self, value: str, *ops: str) -> Node | None:
        """The one node reading ``value`` (once), if it is one of ``ops`` with two inputs or
        one (Erf, Relu, Gelu) and ``value`` is not a graph output; else None."""
        us = self.users.get(value, ())
        if value in self.outputs or len(us) != 1:
            return None
        n = us[0]
        if n.op not in ops or n.domain not in _ONNX or n.inputs.count(value) != 1:
            return None
        return n

    def other(self, n: Node, value: str) -> str:
        """The input of two-input ``n`` that is not ``value``."""
        return n.inputs[1] if n.inputs[0] == value else n.inputs[0]

    def scaled(self, n: Node, y: str) -> bool:
        """``n`` is Div(y, √2), Mul(y, 1/√2) or Mul(1/√2, y)."""
        if len(n.inputs) != 2 or n.inputs.count(y) != 1 or n.domain not in _ONNX:
            return False
        if n.op == "Div":
            return n.inputs[0] == y and _near(_scalar(self.graph, n.inputs[1]), math.sqrt(2))
        return n.op == "Mul" and _near(_scalar(self.graph, self.other(n, y)),
                                       1 / math.sqrt(2))

    def half_of(self, n: Node, value: str) -> bool:
        """``n`` is Mul(value, 0.5) or Mul(0.5, value)."""
        return len(n.inputs) == 2 and _near(_scalar(self.graph, self.other(n, value)), 0.5)

    def gelu(self, y: str) -> list[Node] | None:
        """The nodes of 0.5 · y · (1 + erf(y / √2)) reading ``y`` (the last one last)."""
        us = self.users.get(y, ())
        if y in self.outputs or len(us) != 2:
            return None
        scale = next((n for n in us if self.scaled(n, y)), None)
        if scale is None:
            return None
        mul_y = us[1] if us[0] is scale else us[0]
        if mul_y.op != "Mul" or len(mul_y.inputs) != 2 or mul_y.inputs.count(y) != 1 \
                or mul_y.domain not in _ONNX:
            return None
        erf = self.only(scale.outputs[0], "Erf")
        one = erf and self.only(erf.outputs[0], "Add")
        if one is None or len(one.inputs) != 2 or not _near(
                _scalar(self.graph, self.other(one, erf.outputs[0])), 1.0):
            return None
        h = one.outputs[0]  # 1 + erf
        m1 = self.only(h, "Mul")
        if m1 is None or len(m1.inputs) != 2:
            return None
        rest = self._muls(y, h, m1, mul_y)
        return None if rest is None else [scale, erf, one, *rest]

    def _muls(self, y: str, h: str, m1: Node, mul_y: Node) -> list[Node] | None:
        """The two Muls making 0.5 · y · h from m1 (which reads h) and mul_y (which reads
        y), in the three orders: (y · h) · 0.5, y · (h · 0.5), (y · 0.5) · h."""
        x = self.other(m1, h)
        if x == y:  # (y · h) · 0.5
            m2 = self.only(m1.outputs[0], "Mul")
            ok = m1 is mul_y and m2 is not None and self.half_of(m2, m1.outputs[0])
            return [m1, m2] if ok else None
        if self.half_of(m1, h):  # y · (h · 0.5)
            m2 = self.only(m1.outputs[0], "Mul")
            ok = m2 is mul_y and self.other(m2, m1.outputs[0]) == y
            return [m1, m2] if ok else None
        # (y · 0.5) · h: mul_y makes x, which m1 alone reads
        ok = (mul_y.outputs[0] == x and self.half_of(mul_y, y)
              and self.only(x, "Mul") is m1)
        return [mul_y, m1] if ok else None

    def activation(self, y: str) -> tuple[str, list[Node]]:
        """(activation, its nodes) applied to ``y`` alone: relu, gelu, or none."""
        n = self.only(y, "Relu", "Gelu")
        if n is not None and len(n.inputs) == 1 and (
                n.op == "Relu" or n.attrs.get("approximate", "none") == "none"):
            return ("relu" if n.op == "Relu" else "gelu"), [n]
        nodes = self.gelu(y)
        return ("gelu", nodes) if nodes is not None else ("none", [])

    def bias(self, add: Node, y: str, n: int) -> str | None:
        """The constant bias that ``add`` adds to ``y``: float32, n values along the last
        axis (or one value), every other axis 1; else None."""
        if len(add.inputs) != 2 or add.inputs.count(y) != 1:
            return None
        b = self.other(add, y)
        v = self.graph.constants.get(b)
        if v is None or v.dtype != np.float32 or v.ndim == 0 or v.size not in (1, n) \
                or v.shape[-1] != v.size:
            return None
        return b


def _weight(graph: Graph, mm: Node) -> np.ndarray | None:
    if mm.op != "MatMul" or mm.domain not in _ONNX or len(mm.inputs) != 2 \
            or len([o for o in mm.outputs if o]) != 1:
        return None
    w = graph.constants.get(mm.inputs[1])
    if w is None or w.dtype != np.float32 or w.ndim != 2 or mm.inputs[0] in graph.constants:
        return None
    return w


def _bias_constant(graph: Graph, name: str, n: int, base: str) -> str:
    """The name of the bias as a (n,) constant: ``name`` itself, or a new one."""
    v = graph.constants[name]
    if v.shape == (n,):
        return name
    new = f"{base}/bias"
    while new in graph.constants:
        new += "_"
    graph.constants[new] = np.ascontiguousarray(np.broadcast_to(v.reshape(-1), (n,)))
    if name in graph.weights:
        graph.weights.add(new)
    return new


def _match(graph: Graph, walk: _Walk, mm: Node) -> tuple[list[Node], Node] | None:
    """(the nodes replaced, the fused node) for the pattern starting at MatMul ``mm``."""
    w = _weight(graph, mm)
    if w is None:
        return None
    y = mm.outputs[0]
    add = walk.only(y, "Add")
    bias = add and walk.bias(add, y, w.shape[1])
    if bias is None:
        return None
    act, tail = walk.activation(add.outputs[0])
    nodes = [mm, add, *tail]
    name = "+".join(n.name for n in nodes)
    originals = subgraph(graph, nodes, nodes[-1].outputs[0], name)
    fused = Node(OP, name, [mm.inputs[0], mm.inputs[1],
                            _bias_constant(graph, bias, w.shape[1], name)],
                 [nodes[-1].outputs[0]],
                 {"activation": act, "min_rank": int(graph.constants[bias].ndim),
                  "originals": originals}, DOMAIN)
    return nodes, fused


def fuse_linear(graph: Graph) -> int:
    """Replace each linear layer (MatMul by a constant, Add of a constant bias, then
    optionally Relu or GELU: see the module's doc) of an interpreted ``graph`` by one
    FusedMatMul node, placed where its last node was; returns how many were replaced. A
    planned model's graph (``graph.eager`` None) is left as it is. Call it after
    graph.route (which decides the path), before the model runs."""
    if graph.eager is None:
        return 0
    walk = _Walk(graph)
    replace: dict[int, Node] = {}
    drop: set[int] = set()
    for n in graph.nodes:
        got = _match(graph, walk, n)
        if got is None or any(id(x) in drop for x in got[0]):
            continue
        drop.update(id(x) for x in got[0])
        replace[id(got[0][-1])] = got[1]
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes
                   if id(n) in replace or id(n) not in drop]
    return len(replace) + merge_siblings(graph)


def _mergeable(graph: Graph, n: Node) -> tuple | None:
    """(X, K, activation) of a one-output FusedMatMul with constant W (K, N) and bias (N,),
    else None."""
    if n.op != OP or n.domain != DOMAIN or "parts" in n.attrs or len(n.inputs) != 3:
        return None
    w, b = graph.constants.get(n.inputs[1]), graph.constants.get(n.inputs[2])
    if w is None or b is None or w.ndim != 2 or b.shape != (w.shape[1],):
        return None
    return n.inputs[0], w.shape[0], n.attrs.get("activation", "none")


def merge_siblings(graph: Graph) -> int:
    """Replace each group of FusedMatMul nodes reading the same X with weights of the same K
    and the same activation by one node computing them side by side (see the module's doc),
    placed where the group's first node was; returns how many groups were merged."""
    if graph.eager is None:
        return 0
    groups: dict[tuple, list[Node]] = {}
    for n in graph.nodes:
        key = _mergeable(graph, n)
        if key is not None:
            groups.setdefault(key, []).append(n)
    replace: dict[int, Node] = {}
    drop: set[int] = set()
    for (_, _, act), nodes in groups.items():
        if len(nodes) < 2:
            continue
        name = "+".join(n.name for n in nodes)
        w_name, b_name = f"{name}/W", f"{name}/bias"
        graph.constants[w_name] = np.concatenate(
            [graph.constants[n.inputs[1]] for n in nodes], axis=1)
        graph.constants[b_name] = np.concatenate([graph.constants[n.inputs[2]] for n in nodes])
        graph.weights.update((w_name, b_name))
        outputs = [n.outputs[0] for n in nodes]
        replace[id(nodes[0])] = Node(
            OP, name, [nodes[0].inputs[0], w_name, b_name], outputs,
            {"activation": act, "min_rank": max(int(n.attrs.get("min_rank", 1)) for n in nodes),
             "parts": [int(graph.constants[n.inputs[1]].shape[1]) for n in nodes],
             "originals": subgraph(graph, nodes, outputs, name)}, DOMAIN)
        drop.update(id(n) for n in nodes[1:])
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in drop]
    return len(replace)
