"""The short path of a common elementwise operator: what the generic path resolved for one
signature (op, dtypes, shapes, scalar type) is kept as a Plan, and later calls of it skip
the argument layers: allocate the result, then hold the op in the fused DAG (or queue it)."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from . import _fusion_auto as auto
from . import _lazy
from ._pools import result_class
from .buffer import Buffer, result_buffer
from .kernels.elementwise.arrayops import row_of
from .kernels.elementwise.fused import Node
from .kernels.elementwise.optable import OPS

# signature -> Plan. A signature is (op, flag, dtype and shape of a, dtype and shape of b or
# the type of b): flag tells the callers apart (the operators' reflected, the namespace's "xp")
_PLANS: dict = {}
_learning: list = []  # set while a signature's plan is learned (one thread at a time)


class Plan:
    """What the generic path did for a signature once its checks passed: the kernel, the
    result's shape, dtype and label (and its memory's size class), the scalar bounds the
    short path converts as the generic path does, whether the operands were swapped, and
    the fused DAG's node (row name, its dtype, its operands' dtype)."""

    __slots__ = ("kernel", "shape", "dtype", "label", "nbytes", "size", "bounds", "swap",
                 "reflected", "row", "out_dtype", "in_dtype", "bindings", "row_params",
                 "params")

    def __init__(self, k, inputs, out, row, bounds, swap: bool, params=None):
        self.kernel = k
        self.shape, self.dtype, self.label = out._shape, out._dt, out._label
        self.nbytes = out.nbytes
        self.size = result_class(out.nbytes)
        self.bounds, self.swap = bounds, swap
        self.row, self.reflected = row[0], row[2]
        self.in_dtype = inputs[0]._dt.name
        self.out_dtype = OPS[row[0]].out_dtype(self.in_dtype)
        self.bindings = len(inputs) + 1
        # the node's row parameters (relu's slope 0: ZERO), and the kernel's params
        self.row_params = row[3] if len(row) > 3 else ()
        self.params = params if self.row_params else None


def _key(op: str, flag, a: Buffer, b):
    if type(b) is Buffer:
        return op, flag, a._dt.name, a._shape, b._dt.name, b._shape
    return op, flag, a._dt.name, a._shape, type(b)


def quick(op: str, flag, a: Buffer, b):
    """The planned op of ``a`` and ``b`` (a Buffer, a Python scalar, or None for a unary op):
    its result, or None (no plan yet, or a case the plan does not cover: a view, a freed or
    lost buffer, two devices, a scalar out of its bounds): the caller takes its own path."""
    plan = _PLANS.get((op, flag, a._dt.name, a._shape, b._dt.name, b._shape)
                      if type(b) is Buffer else (op, flag, a._dt.name, a._shape, type(b)))
    if plan is None:
        return None
    dev = a._dev
    if a._freed or a._base is not None or not dev.alive:
        return None
    params = None
    if plan.bounds is not None:  # a scalar: converted as the generic path does
        lo, hi, cast = plan.bounds
        if not lo <= b <= hi:
            return None
        params = {"scalar": b if cast is None else float(cast(b))}
        inputs = [a]
    elif b is None:
        inputs = [a]
        params = plan.params
    else:
        if b._freed or b._base is not None or b._dev is not dev:
            return None
        inputs = [b, a] if plan.swap else [a, b]
    out = result_buffer(plan.shape, plan.dtype, dev, plan.label, plan.nbytes, plan.size)
    k, hook = plan.kernel, _lazy.hooks["enqueue"]
    if hook is None:  # automatic fusion off
        return _lazy.bind_and_queue(k, inputs, out, params, None)
    batch = dev.lazy
    held = batch.fusion if batch is not None else None
    if held is None or hook is not auto.on_enqueue or _lazy._eager[0] or \
            _lazy._route.get() is not None:
        return _lazy.enqueue(k, inputs, out, params)
    with held.lock:
        nodes = held.nodes
        n = len(nodes)
        room = len(held.leaves) + plan.bindings
        if held.transposes or n + 4 > auto.MAX_NODES or n and held.shape != plan.shape or (
                room + len(held.values) > held.limit and room + held.live() > held.limit):
            return _lazy.enqueue(k, inputs, out, params)  # (auto's on_enqueue decides)
        _take(held, plan, inputs, out, params)
        if not batch.held:
            batch.held.append(held)  # a submit on this device now flushes (queues it) first
        if n + 8 > auto.MAX_NODES and len(nodes) + 4 > auto.MAX_NODES:  # (<= 4 nodes an op)
            auto._queue(batch, held)
    return out


def _take(held, plan: Plan, inputs, out, params) -> None:
    """auto._take for a planned op (its row and dtypes known): the same nodes, fewer calls."""
    if not held.nodes:
        held.shape = out._shape
        held.site = _lazy.call_site()
    values, memo, nodes = held.values, held.memo, held.nodes
    args = []
    for b in inputs:  # (a buffer is a leaf or a held value, never both: leaves are read)
        i = b._id
        e = held.leaf_of.get(i)
        if e is not None and held.leaves[nodes[e].args[0]] is b:  # a leaf read before
            args.append(e)
            continue
        e = values.get(i)
        args.append(e[1] if e is not None and e[0]() is b else held.operand(b))
    if plan.bounds is not None:  # a scalar operand
        held.scalars.append(params["scalar"])
        s = held.add(Node("scalar", plan.in_dtype, (len(held.scalars) - 1,)))
        args = [s] + args if plan.reflected else args + [s]
    slots = plan.row_params
    key = (plan.row, plan.out_dtype, tuple(args), slots)  # (Held.add's memo key)
    node = memo.get(key)
    if node is None:
        node = memo[key] = len(nodes)
        nodes.append(Node(plan.row, plan.out_dtype, key[2], slots))
        held.calls[node] = (plan.kernel, params, None)  # (the op that made it: its first)
    values[out._id] = (weakref.ref(out), node)
    held.ops += 1


def learn(op: str, flag, a: Buffer, b, fn, *args):
    """``fn(*args)``, the generic path of the op of ``a`` and ``b``; the one op it queued
    (if just one) becomes the plan of their signature when the short path can run it the
    same way."""
    if _learning:  # (another thread learns: this call just runs)
        return fn(*args)
    me = threading.get_ident()
    seen: list = []
    _learning.append(me)
    _lazy.hooks["learn"] = seen.append
    try:
        out = fn(*args)
    finally:
        _lazy.hooks["learn"] = None
        _learning.clear()
    if len(seen) == 1 and seen[0][0] == me and seen[0][3] is out:
        plan = _plan(*seen[0][1:], a, b)
        if plan is not None:
            if len(_PLANS) > 4096:
                _PLANS.clear()
            _PLANS[_key(op, flag, a, b)] = plan
    return out


def _plan(k, inputs, out, params, a, b) -> Plan | None:
    """The Plan of an op the generic path queued (``k`` on ``inputs`` into ``out``), or
    None where the short path would not run it the same way."""
    row = row_of(k, params)
    if (type(a) is not Buffer or out is None or row is None or out._base is not None
            or out is a or out is b or not out.size):
        return None
    if any(x._dt.feature is not None or x._base is not None for x in (*inputs, out)):
        return None  # (a dtype some adapters lack: the generic path checks the device)
    if not auto._valid(k, inputs, out, params) or row[0] == "pow" and a._dt.kind in "iu":
        return None  # (an integer power's check reads the exponent's value)
    bounds, swap, n = None, False, len(inputs)  # (Buffers compared by identity: == is an op)
    if type(b) is Buffer:
        if n != 2 or params or {inputs[0]._id, inputs[1]._id} != {a._id, b._id}:
            return None
        swap = inputs[0] is b and b is not a
    elif b is None:
        if n != 1 or inputs[0] is not a or params and len(row) < 4:
            return None  # (a row's parameters: relu's slope 0, kept in the plan)
    elif n == 1 and inputs[0] is a and type(b) in (int, float) and params and \
            list(params) == ["scalar"]:
        bounds = _bounds(a._dt, type(b))
        if bounds is None or not bounds[0] <= b <= bounds[1] or _convert(bounds, b) != \
                params["scalar"]:
            return None
    else:
        return None
    return Plan(k, inputs, out, row, bounds, swap, params)


def _bounds(dt, scalar_type):
    """The scalars of ``scalar_type`` the short path converts for a ``dt`` array as both
    generic paths do (a float rounds into a float dtype without overflow, an int fits an
    integer one): (lowest, highest, the numpy type to round through or None), or None."""
    if scalar_type is float and dt.kind == "f":
        top = float(np.finfo(dt.numpy).max)
        return -top, top, dt.numpy.type
    if scalar_type is int and dt.kind in "iu":
        info = np.iinfo(dt.numpy)
        return int(info.min), int(info.max), None
    return None


def _convert(bounds, value):
    return value if bounds[2] is None else float(bounds[2](value))
