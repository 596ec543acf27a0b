"""Automatic fusion's state on one device's batch: the held DAG of queued elementwise operators
(its nodes, leaves, values and scalars) and the strided copies held for a product to read in
place (_fusion_auto.py decides what is held and queues it)."""

from __future__ import annotations

import threading

from .buffer import Buffer
from .kernels.elementwise.fused import Node


def _root(b: Buffer) -> Buffer:
    return b._base if b._base is not None else b


class Held:
    """One device's held DAG: its nodes, the buffers its leaves read (held: a free() waits),
    the Buffers its values will be written to (weakly: a value nobody holds is not written),
    its scalars, its output shape."""

    def __init__(self, device):
        self.device = device
        # reentrant: queueing the DAG may fill the batch, whose flush calls on_flush
        self.lock = threading.RLock()
        self.limit = device.limit("max-storage-buffers-per-shader-stage")
        # held transposes: result._id -> (weakref to result, source, (kernel, params) of
        # the copy, checked but bound only once queued, label, call site, view: (shape,
        # strides, offset) of the source that the copy reads); the source is held (a strong
        # reference and a hold on its memory)
        self.transposes: dict[int, tuple] = {}
        self.reset()

    def reset(self) -> None:
        self.nodes: list[Node] = []
        self.memo: dict[tuple, int] = {}  # a node's fields -> its number
        self.leaves: list[Buffer] = []
        self.views: list = []  # per leaf: None, or the (strides, offset) it is read through
        self.leaf_of: dict = {}  # buffer._id (and its view, if any) -> node, for leaves
        self.values: dict[int, tuple] = {}  # Buffer._id -> (weakref, node) of held values
        self.scalars: list = []
        self.shape = None
        self.ops = 0
        self.calls: dict[int, tuple] = {}  # node -> the op that made it (kernel, params, label)
        self.site = "?"

    def live(self) -> int:
        """Held values whose Buffers are alive (the dead ones are forgotten: never written)."""
        self.values = {i: e for i, e in self.values.items() if e[0]() is not None}
        return len(self.values)

    def add(self, node: Node) -> int:
        key = (node.op, node.dtype, node.args, node.params)  # (a tuple hashes in C)
        k = self.memo.get(key)
        if k is None:
            k = self.memo[key] = len(self.nodes)
            self.nodes.append(node)
        return k

    def value(self, b: Buffer) -> int | None:
        entry = self.values.get(b._id)
        return entry[1] if entry is not None and entry[0]() is b else None

    def operand(self, b: Buffer) -> int:
        k = self.value(b)
        if k is not None:
            return k
        k = self.leaf_of.get(b._id)
        if k is not None and self.leaves[self.nodes[k].args[0]] is b:
            return k
        return self._leaf(b, b._id, None)

    def viewed(self, src: Buffer, view) -> int:
        """The leaf reading ``src`` through ``view``: a held copy's source, read in place."""
        key = (src._id, view)
        k = self.leaf_of.get(key)
        if k is not None and self.leaves[self.nodes[k].args[0]] is src:
            return k
        return self._leaf(src, key, (view[1], view[2]))

    def _leaf(self, b: Buffer, key, view) -> int:
        b._pin("fusion", ": buffer")  # (released once the fused kernel is queued)
        self.leaves.append(b)
        self.views.append(view)
        k = self.add(Node("in", b._dt.name, (len(self.leaves) - 1,)))
        self.leaf_of[key] = k
        return k

    def conflicts(self, inputs, output) -> bool:
        """Whether an op on these buffers must wait for the held DAG: it reads a held value
        (or a view of one), or writes a buffer the DAG reads or will write."""
        if not self.nodes:
            return False
        self.live()
        held_roots = {_root(ref())._id for ref, _ in self.values.values()}
        for b in inputs:
            if _root(b)._id in held_roots:
                return True
        if output is not None:
            r = _root(output)
            if r._id in held_roots or any(_root(x) is r for x in self.leaves):
                return True
        return False


_HELD_LOCK = threading.Lock()


def _held(batch) -> Held:
    h = batch.fusion
    if h is None:
        with _HELD_LOCK:
            h = batch.fusion
            if h is None:
                h = batch.fusion = Held(batch.device)
    return h
