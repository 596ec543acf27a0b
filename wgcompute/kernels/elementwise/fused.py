"""Fused elementwise programs: one kernel for a DAG of op table rows (leaves: input buffers
read through broadcast strides, and scalars from the uniform), writing one or several of its
values. The shader is rendered per DAG structure and cached with the compiled pipelines.

Results equal running the rows one kernel each, bit for bit: every row is the same WGSL as
its one-op kernel (ArrayOp's function of the row, in the same work type), each result is
rounded to its dtype before the next row reads it (f16 stored as f16, u8 masked to a byte),
and each f32 (and f64, where the adapter has shader-int64) result passes through an exclusive
or with a uniform the compiler cannot know, so no compiler contracts one row's product into
the next row's sum as a fused multiply-add. An f64 chain on an adapter without shader-int64
has no such barrier: a driver that contracts across rows may round such a chain once where
separate kernels round twice (Vulkan allows it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ...dtypes import DTYPES
from ...errors import ShapeError
from ...runtime import Device
from ..core import shaders
from ..core.base import (
    UNIFORM_STRIDE,
    BuiltinKernel,
    Dispatch,
    Launch,
    Meta,
    PipelineKey,
    fold_grid,
    pack_uniform,
)
from ..core.bind import _check_binding_sizes, _create_bind_groups, params_buffer
from ..core.layout import (
    MAX_DIMS,
    broadcast_strides,
    coalesce,
    index_wgsl,
    lane_index_wgsl,
    step_values,
    uniform_fields,
    uniform_values,
)
from . import packing
from .arrayops import ZERO, _float_divmod
from .elementwise import broadcast_plan, split_launches, stepped_index
from .optable import OPS

KERNEL = "elementwise_fused"
LEAVES = ("in", "scalar")  # a node's op for an input buffer and for a scalar of the uniform
CASTS = ("cast",)  # a conversion that holds every value (the operators' promotions)


class Node(NamedTuple):
    """One value of a fused DAG. ``op``: "in" (input buffer ``args[0]``), "scalar" (uniform
    scalar ``args[0]``), "cast" (``args[0]`` converted exactly to ``dtype``), or an op table
    row applied to earlier nodes ``args``, its operands all of one dtype; ``params``: the
    scalar slots of the row's parameters (relu's slope), ZERO for the literal 0.
    ``dtype``: the value's dtype.
    A tuple: made, hashed and compared in C (a flush of a 300-node chain makes 300 of them,
    and its Dag is hashed and compared to find the compiled program)."""

    op: str
    dtype: str
    args: tuple[int, ...] = ()
    params: tuple[int, ...] = ()


@dataclass(frozen=True)
class Dag:
    """The structure of a fused program: its nodes in order (arguments before use) and the
    nodes it writes. Hashable: it keys the compiled pipeline, never buffers or values (its
    hash is computed once: a pipeline key's look-up hashes it)."""

    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.nodes, self.outputs)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):  # made again where unpickled: string hashes differ between processes
        return (Dag, (self.nodes, self.outputs))

    def leaves(self, op: str) -> tuple[str, ...]:
        """The dtypes of the input buffers (op "in") or scalar slots ("scalar": the scalar
        leaves' and the rows' parameters, in their operands' dtype), by number."""
        found = {n.args[0]: n.dtype for n in self.nodes if n.op == op}
        if op == "scalar":
            found.update({s: self.operand_dtype(n) for n in self.nodes for s in n.params
                          if s != ZERO})
        return tuple(found[i] for i in range(len(found)))

    def operand_dtype(self, node: Node) -> str:
        return self.nodes[node.args[0]].dtype if node.args else node.dtype

    def dtypes(self) -> tuple[str, ...]:
        return tuple(sorted({n.dtype for n in self.nodes}))


_SUB_DAGS: dict = {}  # (nodes, outputs) -> sub_dag's result: a chain run in a loop repeats


def sub_dag(nodes, outputs) -> tuple[Dag, tuple[int, ...], tuple[int, ...]]:
    """The Dag of what ``outputs`` (node numbers of ``nodes``, a list in order) need,
    renumbered: (Dag, the input leaves it reads, the scalar slots it reads), both as their
    numbers in ``nodes``, in the Dag's binding and uniform order. Memoized: hashing the
    nodes (tuples, in C) costs a tenth of walking them (28 us for a 32-node chain)."""
    key = (tuple(nodes), tuple(outputs))
    got = _SUB_DAGS.get(key)
    if got is None:
        got = _sub_dag(nodes, outputs)
        if len(_SUB_DAGS) >= 1024:
            _SUB_DAGS.clear()
        _SUB_DAGS[key] = got
    return got


def _sub_dag(nodes, outputs) -> tuple[Dag, tuple[int, ...], tuple[int, ...]]:
    need: set[int] = set()
    stack = list(outputs)
    while stack:
        k = stack.pop()
        if k not in need:
            need.add(k)
            if nodes[k].op not in LEAVES:
                stack.extend(nodes[k].args)
    order = sorted(need)
    index = {k: i for i, k in enumerate(order)}
    inputs: dict[int, int] = {}
    slots: dict[int, int] = {}
    out = []
    for k in order:
        node = nodes[k]
        if node.op == "in":
            args = (inputs.setdefault(node.args[0], len(inputs)),)
        elif node.op == "scalar":
            args = (slots.setdefault(node.args[0], len(slots)),)
        else:
            args = tuple(index[a] for a in node.args)
        params = tuple(s if s == ZERO else slots.setdefault(s, len(slots)) for s in node.params)
        out.append(Node(node.op, node.dtype, args, params))
    return Dag(tuple(out), tuple(index[k] for k in outputs)), tuple(inputs), tuple(slots)


def _rep(dt) -> str:
    """WGSL type holding a value of dtype ``dt`` between rows (a packed lane: its u32 or
    i32, as the one-op kernels compute it)."""
    return dt.wgsl


def _storage(dt) -> str:
    """A storage array's element type: packed dtypes are u32 words of lanes."""
    return "u32" if dt.packed else dt.wgsl


def _work(dt) -> str:
    """The type a row computes in for operands of ``dt`` (ArrayOp's: f16 in f32)."""
    return "f32" if dt.name == "f16" else _rep(dt)


def _row_function(row, dt, params: tuple[str, ...]) -> tuple[str, str]:
    """(signature after the name, body) of ``row`` for operands of dtype ``dt``, as ArrayOp
    computes it (arrayops._arith), its parameters read from the uniform."""
    w = _work(dt)
    if row.body is not None:
        body = row.body(dt, w)
    else:
        a, b = (tuple(f"{w}(p.{s})" if s is not None else f"{w}(0)" for s in params)
                + ("0", "0"))[:2]
        expr = row.expr(dt, w, w, a=a, b=b, where=f"{KERNEL} {row.name}")
        body = f"return select(0u, 1u, {expr});" if row.truth else f"return {expr};"
    args = ", ".join(f"{v}: {w}" for v in ("x", "y")[:row.arity])
    return f"({args}) -> {'u32' if row.truth else w}", body


def _operand(a: int, i: int, args: tuple[int, ...], w: str, src, keep64: bool) -> str:
    """Value ``a`` as a row's operand ``i``. A float value passed twice (y - y, y / y, y != y)
    goes through the opaque barrier the second time: the shader compiler may otherwise fold
    y - y to 0 (lavapipe does, at y = inf or nan), as one kernel reading y from two bindings
    never does."""
    v = f"f32(v{a})" if w != _rep(src) else f"v{a}"
    if a in args[:i] and src.is_float:
        if w == "f32":
            return f"keep32({v})"
        if w == "f64" and keep64:
            return f"keep64({v})"
    return v


def _node_value(call: str, dst, keep64: bool) -> str:
    """A row's result stored as its dtype's value: rounded to f16, wrapped to a packed
    integer's bits (as a store and a load of its lane do), or passed through the barrier of
    its float type."""
    if dst.packed:
        return f"extractBits({call}, 0u, {dst.bits}u)" if dst.kind != "b" else call
    if dst.name == "f16":
        return f"f16(round16({call}))"
    if dst.name == "f32":
        return f"keep32({call})"
    if dst.name == "f64" and keep64:
        return f"keep64({call})"
    return call


# Programs whose inputs and outputs are all 4-byte dtypes read flat run on vec4 items (tests
# turn it off to compare the element-at-a-time programs). Measured on an H200: 10 fused
# relu(x + b) on 64M f32 took 0.33 ms of GPU time element at a time, 0.258 on vec4 items (one
# add: 0.191).
vectorized = True


class FusedKernel(BuiltinKernel):
    """The fused program of one Dag: inputs x0.., outputs out0.. (one shape: the launch's),
    scalars s0.. in the uniform. Made once per Dag (``fused_kernel``); bound by
    ``fused_dispatch`` (several outputs: ``bind`` takes one)."""

    name = KERNEL
    workgroup_size = 256
    per_invocation = 4
    not_in_place = "a fused program's outputs are new buffers"

    def __init__(self, dag: Dag):
        self.dag = dag
        self.inputs = tuple(f"x{i}" for i in range(len(dag.leaves("in"))))
        self.outs = tuple(f"out{i}" for i in range(len(dag.outputs)))
        self.output = self.outs[0]
        self.dtypes = dag.dtypes()
        # a packed output is written whole words at a time: an item is four elements
        self.words = any(DTYPES[dag.nodes[k].dtype].packed for k in dag.outputs)
        # inputs and outputs of 4-byte unpacked dtypes: read flat, an item is a vec4 of four
        # elements (as the one-op kernels' items are)
        ends = [DTYPES[d] for d in dag.leaves("in")] + [DTYPES[dag.nodes[k].dtype]
                                                         for k in dag.outputs]
        self.vec_dtypes = not self.words and all(
            d.itemsize == 4 and not d.packed for d in ends)

    def vec(self, full) -> bool:
        """Whether the program runs on vec4 items: 4-byte dtypes and every input read flat."""
        return vectorized and self.vec_dtypes and all(full)

    def storage_bindings(self) -> tuple[str, ...]:
        return self.inputs + self.outs

    # -- layout --------------------------------------------------------------------------------
    def plan(self, inputs, shape, views=None):
        """(full flags per input, coalesced sizes, {name: (strides, offset)} of the strided
        inputs) for outputs of ``shape``; an input of the output's size is read flat.
        ``views``: per input None, or the (strides, element offset) it is read through (a
        view of it of the outputs' shape: a permutation's, read in place)."""
        if not views:
            return broadcast_plan(KERNEL, self.inputs, inputs, tuple(shape), flat=True)
        size = math.prod(shape)
        full = tuple(v is None and b.size == size for b, v in zip(inputs, views))
        strided = [(n, v[0] if v is not None else broadcast_strides(b.shape, shape),
                    v[1] if v is not None else 0)
                   for n, b, v, f in zip(self.inputs, inputs, views, full) if not f]
        sizes, steps = coalesce(tuple(shape), tuple(st for _, st, _ in strided))
        if len(sizes) > MAX_DIMS:
            raise ShapeError(f"{KERNEL}: its inputs' views of {tuple(shape)} alternate over "
                             f"{len(sizes)} dimensions; at most {MAX_DIMS} are supported")
        return full, sizes, {n: (st, off) for (n, _, off), st in zip(strided, steps)}

    def fused_key(self, inputs, shape, device: Device, views=None) -> PipelineKey:
        full, sizes, _ = self.plan(inputs, shape, views)
        keep64 = "f64" in self.dtypes and device.has("shader-int64")
        return PipelineKey(KERNEL, self.dtypes, (("dag", self.dag), ("ndim", len(sizes)),
                                                  ("full", full), ("keep64", keep64),
                                                  ("vec", self.vec(full))))

    # -- the shader ----------------------------------------------------------------------------
    def render(self, key: PipelineKey):
        consts = dict(key.constants)
        dag, ndim, full, keep64 = consts["dag"], consts["ndim"], consts["full"], consts["keep64"]
        vec = consts["vec"]
        strided = tuple(n for n, f in zip(self.inputs, full) if not f)
        functions, element, helpers = self._program(dag, full, keep64)
        vec_head, vec_stores = [], []
        if vec:  # each lane's lines in a block of their own, its element's loads from the item
            lanes = [self._program(dag, full, keep64, lane)[1] for lane in "xyzw"]
            element = [line for k, body in enumerate(lanes) for line in (
                "{", f"    let e = i * 4u + {k}u;", "    let g = p.start + e;",
                *(f"    {x}" for x in body), "}")]
            vec_head = [f"let xv{i} = x{i}[i];" for i in range(len(self.inputs))]
            vec_head += [f"var ov{j}: vec4<{_storage(DTYPES[dag.nodes[k].dtype])}>;"
                         for j, k in enumerate(dag.outputs)]
            # the last item may hold fewer than four elements: only theirs are written
            vec_stores = ["if (p.start + i * 4u + 4u <= p.total) {"]
            vec_stores += [f"    out{j}[i] = ov{j};" for j in range(len(dag.outputs))]
            vec_stores += ["} else {"]
            for k, c in enumerate("xyzw"):
                vec_stores += [f"    if (p.start + i * 4u + {k}u < p.total) {{"]
                vec_stores += [f"        out{j}[i].{c} = ov{j}.{c};"
                               for j in range(len(dag.outputs))]
                vec_stores += ["    }"]
            vec_stores += ["}"]
        scalars = tuple((f"s{i}", _rep(DTYPES[d])) for i, d in enumerate(dag.leaves("scalar")))
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"), ("opaque", "u32"),
                  *scalars, *uniform_fields(ndim, strided))
        item = "vec4<{}>" if vec else "{}"
        bindings = [f"@group(0) @binding({i}) var<storage, read> {n}: "
                    f"array<{item.format(_storage(DTYPES[d]))}>;"
                    for i, (n, d) in enumerate(zip(self.inputs, dag.leaves("in")))]
        bindings += [f"@group(0) @binding({len(self.inputs) + j}) var<storage, read_write> "
                     f"out{j}: array<{item.format(_storage(DTYPES[dag.nodes[k].dtype]))}>;"
                     for j, k in enumerate(dag.outputs)]
        index = index_wgsl(ndim, strided).splitlines() if strided else []
        head, start, nxt, advance = [], [], [], []
        stepped = stepped_index(fields, ndim, strided, "p.start + base" + (
            " * 4u" if self.words else "")) if strided else None
        if stepped is not None:  # one decode per invocation, a carry per element
            fields, head, index, advance = stepped
            if self.words:  # four elements an item: lane coordinates step by one
                start, index, nxt = lane_index_wgsl(ndim, strided)
            else:
                index, advance = index + advance, []
        packed = any(DTYPES[n.dtype].packed for n in dag.nodes if n.op == "in") or self.words
        src = shaders.render(shaders.load("elementwise/fused.wgsl"), {
            "ENABLE": shaders.enable_directives([DTYPES[d].wgsl for d in self.dtypes]),
            "SCALARS": "\n".join(f"    {n}: {t}," for n, t in scalars),
            "DIMS": "\n".join(f"    {n}: {t}," for n, t in fields[4 + len(scalars):]),
            "BINDINGS": "\n".join(bindings),
            "UB": len(self.inputs) + len(self.outs),
            "WG": self.workgroup_size,
            "U": self.per_invocation,
            "PACKED": packed,
            "WORDS": self.words,
            "VEC": vec, "VEC_HEAD": vec_head, "VEC_STORES": vec_stores,
            "WORD_VARS": self._word_lines(dag)[0],
            "WORD_STORES": self._word_lines(dag)[1],
            "KEEP64": keep64,
            "KEEP16": "f16" in self.dtypes,
            "HELPERS": "\n".join(helpers),
            "FUNCTIONS": functions,
            "HEAD": head, "LANE_START": start, "LANE_NEXT": nxt, "ADVANCE": advance,
            "ELEMENT": index + element,
        }, name="elementwise/fused.wgsl")
        return src, fields

    def _program(self, dag: Dag, full, keep64: bool, lane: str | None = None):
        """(the row functions, one element's lines, helper functions): each node a let,
        each distinct row application a function (shared by the nodes that repeat it).
        ``lane``: the element is that lane of a vec4 item (inputs xv.., outputs ov..)."""
        functions: dict[str, str] = {}  # source -> name
        helpers: list[str] = []
        lines = []
        for k, node in enumerate(dag.nodes):
            dt = DTYPES[node.dtype]
            if node.op == "in":
                i = node.args[0]
                at = "e" if full[i] else f"i_x{i}"
                load = packing.load(dt, f"x{i}", at) if dt.packed else f"x{i}[{at}]"
                if lane is not None:
                    load = f"xv{i}.{lane}"
                lines.append(f"let v{k} = {load};")
            elif node.op == "scalar":
                lines.append(f"let v{k} = p.s{node.args[0]};")
            elif node.op in CASTS:
                lines.append(f"let v{k} = {_rep(dt)}(v{node.args[0]});")
            else:
                src = DTYPES[dag.operand_dtype(node)]
                row = OPS[node.op]
                sig, body = _row_function(row, src, tuple(None if s == ZERO else f"s{s}"
                                                          for s in node.params))
                text = f"{sig} {{\n    {body}\n}}"
                name = functions.setdefault(text, f"row{len(functions)}")  # (f16, f32: types)
                if row.helpers == "divmod" and src.is_float and not helpers:
                    helpers.append(_float_divmod(_work(src)))
                w = _work(src)
                args = ", ".join(_operand(a, i, node.args, w, src, keep64)
                                 for i, a in enumerate(node.args))
                lines.append(f"let v{k} = {_node_value(f'{name}({args})', dt, keep64)};")
        for j, k in enumerate(dag.outputs):
            dt = DTYPES[dag.nodes[k].dtype]
            word = f"w{j}[l / {dt.lanes}u]"
            lines.append(f"{word} = {word} | {packing.put(dt, f'v{k}', 'e')};" if dt.packed
                         else f"ov{j}.{lane} = v{k};" if lane is not None
                         else f"out{j}[e] = v{k};")
        return [f"fn {n}{text}" for text, n in functions.items()], lines, helpers

    def _word_lines(self, dag: Dag) -> tuple[list[str], list[str]]:
        """The packed outputs' words of one item (four elements: 4 / lanes words each) and
        their stores; a word past the last element is not written (it may lie past the
        output's binding)."""
        decls, stores = [], []
        for j, k in enumerate(dag.outputs):
            dt = DTYPES[dag.nodes[k].dtype]
            if not dt.packed:
                continue
            n = 4 // dt.lanes
            decls.append(f"var w{j} = array<u32, {n}>();")
            for w in range(n):
                stores += [f"if (p.start + i * 4u + {w * dt.lanes}u < p.total) {{",
                           f"    out{j}[i * {n}u + {w}u] = w{j}[{w}];", "}"]
        return decls, stores

    # -- launches ------------------------------------------------------------------------------
    def fused_launches(self, inputs, outputs, scalars, device: Device,
                       views=None) -> list[Launch]:
        """The dispatches over the outputs' elements, split where a binding would pass the
        adapter's limit (as the broadcasting kernels are: split_launches)."""
        shape = outputs[0].shape
        total = math.prod(shape)
        if total == 0:
            return []
        full, sizes, strided = self.plan(inputs, shape, views)
        vec = self.vec(full)
        per_item = 4 if self.words or vec else 1  # (elements)
        items = [DTYPES[b.dtype].itemsize for b in outputs]
        item_bytes = max(items + [DTYPES[b.dtype].itemsize for b, f in zip(inputs, full) if f])
        dims = uniform_values(sizes, strided)  # (a view of a one-element output: its offset)
        dims.update(step_values(sizes, self.workgroup_size * per_item))  # (stepped decode)
        named = {f"s{i}": v for i, v in enumerate(scalars)}
        out = []
        for start, count, ranges, offsets in split_launches(
                KERNEL, list(zip(self.inputs, inputs)), full, sizes, strided, total,
                item_bytes, device):
            n = -(-count // per_item)
            groups = math.ceil(n / (self.workgroup_size * self.per_invocation))
            if ranges is not None:  # each output's piece in its own item size
                ranges = ranges[:-1] + tuple((start * it, (count * it + 3) // 4 * 4)
                                             for it in items)
                if vec:  # whole vec4 items (a piece's last one may reach past its count)
                    ranges = tuple((off, (size + 15) // 16 * 16) for off, size in ranges)
            u = dict(dims, n=n, start=start, total=total, opaque=0, **named)
            u.update({f"o{name}": off for name, off in offsets.items()})
            out.append(Launch(fold_grid(groups, device, KERNEL), u, ranges))
        return out


_KERNELS: dict[Dag, FusedKernel] = {}


def fused_kernel(dag: Dag) -> FusedKernel:
    """The kernel of one Dag, made once (its pipelines are cached by the Dag's key)."""
    k = _KERNELS.get(dag)
    if k is None:
        k = _KERNELS.setdefault(dag, FusedKernel(dag))
    return k


def fused_dispatch(kernel: FusedKernel, inputs, outputs, scalars, device: Device,
                   held: bool = False, views=None) -> Dispatch:
    """``kernel`` bound to its input and output buffers (checked by the caller: bindable, on
    ``device``, of the Dag's dtypes, the outputs new and of one shape) and scalar values,
    cached per device by buffer keys and values as commands.bound caches one-output runs.
    ``held``: the inputs were held for this work since it was asked for (a free() since
    then deferred their memory's release): bound even if freed, and not cached. ``views``:
    per input None or the (strides, offset) it is read through (``FusedKernel.plan``; the
    caller checked that each reads within its input, which binds whole: not past the
    adapter's binding size)."""
    # (values by repr: 0.0 and -0.0 are equal as keys but not as scalars)
    key = (KERNEL, kernel, tuple(b._key for b in inputs), tuple(b._key for b in outputs),
           tuple(map(repr, scalars)), views)
    cache = device.binds
    d = None if held else cache.get(key)
    if d is not None and d.kernel is kernel:
        return d
    pkey = kernel.fused_key(inputs, outputs[0].shape, device, views)
    compiled = kernel.compiled(pkey, device)
    launches = kernel.fused_launches(inputs, outputs, scalars, device, views)
    # fixed: nothing sets a fused binding's params again, so its params buffer is the one the
    # device shares between bindings with the same bytes
    d = Dispatch(kernel, [Meta.of(b) for b in inputs], Meta.of(outputs[0]), {}, compiled,
                 launches, device=device, fixed=True)
    storage = list(inputs) + list(outputs)
    _check_binding_sizes(kernel, storage, launches, device)
    if launches:
        d.uniform = params_buffer(kernel, device, d._uniform_bytes(), True)
        if held:
            _held_bind_groups(d, storage)
        else:
            _create_bind_groups(d, storage)
    if held:
        return d
    with device.binds_lock:
        cache[key] = d
        while len(cache) > 256:
            cache.popitem(last=False)
    return d


def _held_bind_groups(d: Dispatch, storage) -> None:
    """bind.py's bind groups, each buffer at its held binding (``_held_binding``)."""
    device, names = d.device, d.kernel.storage_bindings()
    where = [b._held_binding(f"{KERNEL}: {names[j]!r}") for j, b in enumerate(storage)]
    for i, launch in enumerate(d.launches):
        entries = []
        for j, b in enumerate(storage):
            off, size = launch.ranges[j] if launch.ranges is not None else (0,
                                                                            b._bound_bytes())
            entries.append((j, where[j][0], where[j][1] + off, size))
        entries.append((len(storage), d.uniform, i * UNIFORM_STRIDE,
                        len(pack_uniform(d.compiled.uniform_fields, launch.uniform))))
        try:
            bg = device.link.bind_group(KERNEL, d.compiled.layout, entries)
        except Exception as e:
            raise device.wrap(e, f"{KERNEL}: binding its buffers") from e
        d.bind_groups.append(bg)
        device.stats["bind_groups_created"] += 1
