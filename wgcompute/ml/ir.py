"""The model's intermediate representation: ONNX nodes and graphs with plain-Python
attributes, and the values a plan computes with (host constants, GPU tensors)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]  # "" for an omitted optional input
    outputs: list[str]
    attrs: dict
    domain: str = ""


@dataclass
class Graph:
    nodes: list[Node]
    constants: dict[str, np.ndarray]  # initializers and folded values
    inputs: list[tuple[str, tuple, int]]  # (name, dims: int, str or None each, elem type)
    outputs: list[str]
    opset: int
    name: str = "model"
    weights: set = field(default_factory=set)  # constants that are model parameters
    output_types: list = field(default_factory=list)  # ONNX elem type per output (0: unknown)
    value_types: dict = field(default_factory=dict)  # name -> ONNX elem type, where known
    value_ranks: dict = field(default_factory=dict)  # name -> rank, where known at load
    max_folded_bytes: int = 64 << 20  # what folding constants may create, in all
    eager: str | None = None  # why the model runs interpreted (None: it runs planned)
    # what the interpreter stores float32 tensors in ("f16": ml/eager_half.py) and how its
    # f16 products sum (the matmul kernel's precision: "f32" or "mixed")
    float_dtype: str = "f32"
    precision: str = "f32"


@dataclass(frozen=True)
class Const:
    """A value known on the host. ``name``: a constant of the loaded model (uploaded once per
    device when a kernel reads it); None: folded for this plan only."""

    array: np.ndarray
    name: str | None = None


@dataclass(frozen=True)
class Tensor:
    """A value computed on the GPU: storage ``sid`` read with ``shape`` (aliases of one
    storage, e.g. a Reshape, share the sid)."""

    sid: int
    shape: tuple


def consumers(graph: Graph) -> dict[str, list[Node]]:
    """The nodes reading each value of ``graph`` (a node reading it twice, twice)."""
    users: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for x in n.inputs:
            if x:
                users.setdefault(x, []).append(n)
    return users


def subgraph(graph: Graph, nodes: list[Node], output: str | list[str], name: str) -> Graph:
    """``nodes`` of ``graph`` (in its order) as a graph of their own computing ``output`` (a
    name, or a list of them), with the constants they read: what a fused node keeps of the
    nodes it replaced, to run them where its kernel does not apply."""
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    nodes = sorted(nodes, key=lambda n: order[id(n)])
    consts = {x: graph.constants[x] for n in nodes for x in n.inputs if x in graph.constants}
    outputs = [output] if isinstance(output, str) else list(output)
    return Graph(nodes, consts, [], outputs, graph.opset, name,
                 max_folded_bytes=graph.max_folded_bytes)
