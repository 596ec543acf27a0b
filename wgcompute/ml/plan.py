"""A model lowered for one set of input shapes: kernel steps with their logical shapes, fused
where the graph allows (activations, residual adds), and activations packed into a few flat
scratch buffers by liveness. The plan becomes a multi-step kernel's ``passes()``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, ShapeError
from . import operators
from .ir import Const, Graph, Node, Tensor

COPY = operators.COPY


@dataclass
class Step:
    kernel: object
    ins: list
    out: Tensor
    params: dict
    label: str


@dataclass
class Storage:
    kind: str  # "input", "weight", "const", "act", "out", "extra"
    size: int = 0  # elements
    ref: object = None  # input index, weight name, const array
    dtype: str = "f32"


@dataclass
class Plan:
    """What a model runs for given input shapes."""

    input_shapes: tuple  # per graph input: its shape, or None for an integer (host) input
    dtype: str  # the dtype of activations and weights on the GPU
    steps: list[Step]
    storages: dict[int, Storage]
    outputs: list  # per graph output: ("const", array) or ("tensor", sid, shape)
    slots: list[int] = field(default_factory=list)  # elements of each scratch buffer
    slot_of: dict[int, int] = field(default_factory=dict)  # act sid -> slot index
    slot_dtypes: list[str] = field(default_factory=list)
    extra_temps: dict[int, int] = field(default_factory=dict)  # extra output sid -> temp
    input_dtypes: tuple = ()  # per float input, the dtype its buffer holds
    key: tuple = ()  # the model's cache key of this plan

    @property
    def output_shape(self) -> tuple:
        kind, *rest = self.outputs[0]
        return tuple(rest[1]) if kind == "tensor" else tuple(rest[0].shape)

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.steps]

    def dispatch_count(self) -> int:
        return len(self.steps)


_PRECISION_KERNELS = {"conv2d", "conv2d_residual"}  # the kernels with a precision param
ACTIVATION_OPS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}


class Lowering:
    """Walks the graph for concrete input shapes; operators's lowerings call back into it."""

    def __init__(self, graph: Graph, shapes: tuple, dtype: str, binding_limit: int,
                 input_dtypes: tuple = (), precision: str = "f32"):
        self.graph = graph
        self.dtype = dtype
        self.precision = precision  # "mixed": the convolutions' tiled GEMMs sum k slices in f16
        self.binding_limit = binding_limit  # the device's max-storage-buffer-binding-size
        self.values: dict[str, Const | Tensor] = {}
        self.storages: dict[int, Storage] = {}
        self.steps: list[Step] = []
        self.done: set[int] = set()  # ids of nodes consumed by a fusion
        # what folding the values of integer inputs may create, per plan
        self.budget = operators.FoldBudget(graph.max_folded_bytes)
        self.users: dict[str, list[Node]] = {}
        for n in graph.nodes:
            for x in n.inputs:
                if x:
                    self.users.setdefault(x, []).append(n)
        self.graph_outputs = set(graph.outputs)
        for name, arr in graph.constants.items():
            self.values[name] = Const(arr, name)
        k = 0  # float inputs are the kernel's inputs in0, in1...; integer ones host values
        for (name, _, _), spec in zip(graph.inputs, shapes, strict=True):
            if isinstance(spec, np.ndarray):
                self.values[name] = Const(spec)
                continue
            in_dtype = input_dtypes[k] if k < len(input_dtypes) else "f32"
            sid = self._storage(Storage("input", math.prod(spec), k, in_dtype))
            k += 1
            t = Tensor(sid, tuple(spec))
            if in_dtype != dtype:  # an input not in the model's dtype: converted once, first
                t = self.cast(t, dtype, f"{name} -> {dtype}")
            self.values[name] = t

    # -- storage -----------------------------------------------------------------------------------
    def _storage(self, s: Storage) -> int:
        sid = len(self.storages)
        self.storages[sid] = s
        return sid

    def new_tensor(self, shape, dtype: str | None = None) -> Tensor:
        shape = tuple(int(d) for d in shape)
        return Tensor(self._storage(Storage("act", math.prod(shape), None,
                                            dtype or self.dtype)), shape)

    def alias(self, t: Tensor, shape) -> Tensor:
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != math.prod(t.shape):
            raise ShapeError(f"cannot view {t.shape} as {shape}")
        return Tensor(t.sid, shape)

    def cast(self, t: Tensor, dtype: str, label: str) -> Tensor:
        out = self.new_tensor(t.shape, dtype)
        self.emit(COPY, [t], out, {}, label)
        return out

    # -- values ------------------------------------------------------------------------------------
    def value(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise ModelError(f"the graph uses {name!r} before any node produces it") from None

    def is_const(self, name: str) -> bool:
        return bool(name) and isinstance(self.value(name), Const)

    def const(self, node: Node, name: str, what: str) -> np.ndarray:
        v = self.value(name)
        if not isinstance(v, Const):
            raise self.fail(node, f"{what} must be a constant (it is computed at run time)")
        return v.array

    def tensor(self, name: str) -> Tensor:
        """The value as a GPU tensor (a constant is uploaded: once per device for the model's
        own constants, with the plan otherwise)."""
        v = self.value(name)
        if isinstance(v, Tensor):
            return v
        return self.const_tensor(v.array, v.name)

    def const_tensor(self, arr: np.ndarray, name: str | None = None) -> Tensor:
        arr = np.asarray(arr)
        if arr.dtype.kind != "f":
            raise ModelError(f"a {arr.dtype} constant ({name or 'folded'}) cannot feed a "
                             f"float kernel")
        key = ("weight", name) if name is not None else None
        if key is not None:
            for sid, s in self.storages.items():
                if s.kind == "weight" and s.ref == name:
                    return Tensor(sid, tuple(arr.shape))
            sid = self._storage(Storage("weight", arr.size, name, self.dtype))
        else:
            sid = self._storage(Storage("const", arr.size, arr, self.dtype))
        return Tensor(sid, tuple(arr.shape))

    def set(self, name: str, v) -> None:
        if name:
            self.values[name] = v

    def emit(self, kernel, ins: list[Tensor], out: Tensor, params: dict, label: str) -> Tensor:
        params = dict(params)
        if self.precision != "f32" and kernel.name in _PRECISION_KERNELS:
            params["precision"] = self.precision
        self.steps.append(Step(kernel, list(ins), out, params, label))
        return out

    def fail(self, node: Node, msg: str) -> ModelError:
        return ModelError(f"node {node.op} {node.name!r} (opset {self.graph.opset}): {msg}")

    # -- fusion ------------------------------------------------------------------------------------
    def single_user(self, name: str) -> Node | None:
        """The one node reading ``name``, if it is read by exactly one node and is no graph
        output (a fused value is never materialized)."""
        if name in self.graph_outputs:
            return None
        us = self.users.get(name, [])
        if len(us) != 1 or id(us[0]) in self.done:
            return None
        if sum(1 for x in us[0].inputs if x == name) != 1:
            return None
        return us[0]

    def fuse_activation(self, name: str):
        """If ``name`` feeds only an activation node with constant parameters: consume it and
        return ((act, alpha, beta), its output name, its node name); else None."""
        n = self.single_user(name)
        if n is None or n.op not in ACTIVATION_OPS or n.inputs[0] != name:
            return None
        act = self.activation_of(n)
        if act is None:
            return None
        self.done.add(id(n))
        return act, n.outputs[0], n.name

    def activation_of(self, n: Node):
        """(name, alpha, beta) of activation node ``n``, None if a parameter is computed."""
        return operators.activation_of(
            n, self.graph.opset, lambda x: self.value(x).array if self.is_const(x) else None)

    def fuse_add(self, name: str, shape) -> tuple[Tensor, str, str] | None:
        """If ``name`` feeds only an Add (or a Sum of two) whose other operand is a GPU tensor
        of the same shape, already computed: consume it and return (that tensor, the Add's
        output name, its node name)."""
        n = self.single_user(name)
        if n is None or n.op not in ("Add", "Sum") or len(n.inputs) != 2:
            return None
        other = n.inputs[1] if n.inputs[0] == name else n.inputs[0]
        v = self.values.get(other)
        if not isinstance(v, Tensor) or tuple(v.shape) != tuple(shape):
            return None
        self.done.add(id(n))
        return v, n.outputs[0], n.name

    # -- the walk ----------------------------------------------------------------------------------
    def run(self) -> None:
        for n in self.graph.nodes:
            if id(n) in self.done:
                continue
            spec = operators.OPS[n.op]
            ins = [x for x in n.inputs if x]
            if spec.fold is not None and all(self.is_const(x) for x in ins):
                try:
                    outs = operators.fold(n, [self.value(x).array if x else None
                                             for x in n.inputs], self.graph.opset, self.budget)
                except ModelError:
                    raise
                except Exception as e:  # noqa: BLE001 - numpy's error, named after the node
                    raise self.fail(n, str(e)) from e
                for name, v in zip(n.outputs, outs):
                    if v is not None:
                        self.set(name, Const(np.asarray(v)))
                continue
            if spec.lower is None:
                raise self.fail(n, "runs only on constants here (its input is computed at "
                                   "run time)")
            try:
                spec.lower(self, n)
            except ShapeError as e:
                raise self.fail(n, str(e)) from e


def lower(graph: Graph, shapes: tuple, dtype: str, binding_limit: int,
          input_dtypes: tuple = (), precision: str = "f32") -> Plan:
    """The plan of ``graph`` for inputs of ``shapes`` (one tuple per graph input) whose float
    inputs have ``input_dtypes`` (f32 where not given), on a device binding at most
    ``binding_limit`` bytes per buffer; ``precision`` "mixed" (f16 models) for the
    convolutions that take it."""
    lw = Lowering(graph, shapes, dtype, binding_limit, input_dtypes, precision)
    lw.run()
    outputs = []
    for i, name in enumerate(graph.outputs):
        v = lw.value(name)
        if isinstance(v, Const):
            outputs.append(("const", v.array))
            continue
        outputs.append(("tensor", _place_output(lw, v, i, name), v.shape))
    plan = Plan(tuple(None if isinstance(s, np.ndarray) else tuple(s) for s in shapes), dtype,
                lw.steps, lw.storages, outputs)
    plan.input_dtypes = tuple(s.dtype for s in sorted(
        (s for s in lw.storages.values() if s.kind == "input"), key=lambda s: s.ref))
    _assign_slots(plan)
    return plan


def _place_output(lw: Lowering, v: Tensor, index: int, name: str) -> int:
    """The storage graph output ``index`` is written to: output 0 is the kernel's ``out``,
    the others dedicated buffers; written in place by their producer where possible, by a
    copy (or a cast back to f32) otherwise."""
    kind = "out" if index == 0 else "extra"
    s = lw.storages[v.sid]
    if s.kind == "act" and s.dtype == "f32" and math.prod(v.shape) == s.size:
        s.kind = kind
        return v.sid
    sid = lw._storage(Storage(kind, math.prod(v.shape), None, "f32"))
    lw.emit(COPY, [v], Tensor(sid, v.shape), {}, f"output {name}")
    return sid


def _assign_slots(plan: Plan) -> None:
    """Scratch buffers for the "act" storages: a storage takes a free slot from its first
    write to its last use (best fit, grown if needed); a step's output never shares a slot
    with that step's inputs."""
    last: dict[int, int] = {}
    first: dict[int, int] = {}
    for i, st in enumerate(plan.steps):
        for t in [*st.ins, st.out]:
            last[t.sid] = i
        first.setdefault(st.out.sid, i)
    free: list[int] = []
    slots: list[int] = []
    dtypes: list[str] = []
    for i, st in enumerate(plan.steps):
        sid = st.out.sid
        s = plan.storages[sid]
        if s.kind == "act" and sid not in plan.slot_of:
            fits = [k for k in free if dtypes[k] == s.dtype and slots[k] >= s.size]
            same = [k for k in free if dtypes[k] == s.dtype]
            if fits:
                k = min(fits, key=lambda k: slots[k])
            elif same:
                k = max(same, key=lambda k: slots[k])
                slots[k] = s.size
            else:
                k = len(slots)
                slots.append(s.size)
                dtypes.append(s.dtype)
            if k in free:
                free.remove(k)
            plan.slot_of[sid] = k
        for t in {x.sid for x in [*st.ins, st.out]}:
            if last.get(t) == i and plan.storages[t].kind == "act" and t in plan.slot_of:
                free.append(plan.slot_of[t])
    plan.slots = slots
    plan.slot_dtypes = dtypes
