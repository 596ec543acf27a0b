"""The elementwise kernels (add, sub, multiply, divide, scale, relu): vectorized loads and
several items per invocation, chunked over the storage-binding limit; binary ones broadcast as
numpy does (a separate shader reads each operand through its strides, bound at windows of it
where it is larger than a binding)."""

from __future__ import annotations

import math

import numpy as np

from ...buffer import _ALIGN
from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ...runtime import Device
from ..core import shaders
from ..core.base import (
    UNIFORM_STRIDE,
    BuiltinKernel,
    Kernel,
    Launch,
    Param,
    PipelineKey,
    fold_grid,
    pack_uniform,
)
from ..core.layout import (
    MAX_DIMS,
    STEPPED_DIMS,
    broadcast_shapes,
    broadcast_strides,
    check_u32_index,
    coalesce,
    index_wgsl,
    lane_index_wgsl,
    step_fields,
    step_values,
    stepped_index_wgsl,
    uniform_fields,
    uniform_values,
)
from . import packing
from .optable import OPS, OpDef


def item_layout(dt) -> tuple[int, int, str]:
    """(elements per item, bytes per item, WGSL item type) of the vectorized elementwise path.

    2- and 4-byte types move as vec4 (16 bytes for f32/s32/u32, 8 for f16); packed ones as
    vec4<u32> (sixteen u8 lanes, eight u16); 8-byte types stay scalar (vec4<f64> gains
    nothing and s64 vectors are not portable)."""
    if dt.packed:
        return 4 * dt.lanes, 16, "vec4<u32>"
    if dt.itemsize in (2, 4):
        return 4, 4 * dt.itemsize, f"vec4<{dt.wgsl}>"
    return 1, dt.itemsize, dt.wgsl


def same_shapes(kernel: Kernel, inputs, output) -> None:
    # Every input is named: an output made from input 'a' agrees with 'a' even when 'a' is
    # the odd one out.
    for attr, cls, rule in (("shape", ShapeError, "shapes must match exactly (no broadcasting)"),
                            ("dtype", DtypeError, "dtypes must match")):
        want = getattr(output, attr)
        got = [getattr(b, attr) for b in inputs]
        if any(g != want for g in got):
            named = ", ".join(f"input {n!r} is {g}" for n, g in zip(kernel.inputs, got))
            raise cls(f"{kernel.name}: {named} and output is {want}; {rule}")


def _vec4_inner(dt, sizes, strided) -> tuple[int, ...] | None:
    """The strided operands' steps along the row (1 or 0, in order) when the broadcast
    path can take four elements of a row at a time as vec4; None when it cannot (u8 and
    8-byte dtypes, rows not a multiple of 4, an operand stepping otherwise)."""
    if dt.packed or dt.itemsize not in (2, 4) or not sizes or sizes[-1] % 4:
        return None
    inner = []
    for steps, offset in strided.values():
        if steps[-1] not in (0, 1):
            return None
        # a vec4 load needs its four elements on a vec4 boundary; a repeated one does not
        if steps[-1] == 1 and (offset % 4 or any(st % 4 for st in steps[:-1])):
            return None
        inner.append(steps[-1])
    return tuple(inner)


def op_expr(kernel: str, row: OpDef, dt, v: str, t: str) -> str:
    """A row's WGSL expression for dtype ``dt``: ``${V}`` is the item type ``v`` (a vector on
    the vectorized paths), ``${T}`` the scalar type ``t``, ``${nan_x}`` whether x is nan (per
    lane; by its bits, see wgsl_is_nan), ``${a}`` the parameter p.p0."""
    return row.expr(dt, v, t, a="p.p0", where=kernel)


def _broadcasts_to(shape, target) -> bool:
    """Whether numpy would broadcast ``shape`` to exactly ``target`` (an output)."""
    try:
        return tuple(np.broadcast_shapes(shape, target)) == tuple(target)
    except ValueError:
        return False


def _bound_bytes(b) -> int:
    """Bytes of a buffer's allocation (buffer.py rounds every one up to 16-byte granules);
    ``b`` may be a Buffer or a Meta."""
    nbytes = b.size * DTYPES[b.dtype].itemsize
    return max(_ALIGN, -(-nbytes // _ALIGN) * _ALIGN)


def _extent(sizes, steps) -> tuple[int, int]:
    """Lowest and highest element offset of a whole block of ``sizes`` read by ``steps``."""
    return (sum(min(0, (n - 1) * st) for n, st in zip(sizes, steps)),
            sum(max(0, (n - 1) * st) for n, st in zip(sizes, steps)))


def _span(sizes, steps, start: int, stop: int) -> tuple[int, int]:
    """The lowest and highest element (from the operand's offset) that output elements
    start..stop-1 read through ``steps`` over the coalesced ``sizes``: the partial blocks at
    either end exactly, the whole ones between by their extent."""
    inner = math.prod(sizes[1:])
    if not sizes or (start == 0 and stop == sizes[0] * inner):
        return _extent(sizes, steps)
    a, b = start // inner, (stop - 1) // inner
    st = steps[0]
    if a == b:
        lo, hi = _span(sizes[1:], steps[1:], start - a * inner, stop - a * inner)
        return lo + a * st, hi + a * st
    lo1, hi1 = _span(sizes[1:], steps[1:], start - a * inner, inner)
    lo2, hi2 = _span(sizes[1:], steps[1:], 0, stop - b * inner)
    lo, hi = min(lo1 + a * st, lo2 + b * st), max(hi1 + a * st, hi2 + b * st)
    if b > a + 1:
        elo, ehi = _extent(sizes[1:], steps[1:])
        lo = min(lo, elo + min((a + 1) * st, (b - 1) * st))
        hi = max(hi, ehi + max((a + 1) * st, (b - 1) * st))
    return lo, hi


def broadcast_plan(name: str, names, inputs, shape: tuple[int, ...], flat: bool = False):
    """(full flags per input, coalesced sizes, {name: (strides, 0)} of the strided inputs)
    for outputs of ``shape`` (the elementwise and fused kernels' layout): an input of the
    output's size is read flat, the others through strides over the coalesced sizes, at most
    MAX_DIMS of them. ``flat``: no sizes at all when no input is strided."""
    check_u32_index(name, shape)
    size = math.prod(shape)
    full = tuple(b.size == size for b in inputs)
    strided = tuple(n for n, f in zip(names, full) if not f)
    if flat and not strided:
        return full, (), {}
    strides = tuple(broadcast_strides(b.shape, shape) for b, f in zip(inputs, full) if not f)
    sizes, steps = coalesce(shape, strides)
    if len(sizes) > MAX_DIMS:
        raise ShapeError(f"{name}: broadcasting {' and '.join(str(b.shape) for b in inputs)} "
                         f"to {shape} alternates over {len(sizes)} dimensions; at most "
                         f"{MAX_DIMS} are supported")
    return full, sizes, {n: (st, 0) for n, st in zip(strided, steps)}


def split_launches(name: str, operands, full, sizes, strided: dict, total: int,
                   out_item: int, device: Device):
    """(start, count, ranges, offsets) of each launch of a strided / broadcasting kernel over
    ``total`` output elements. The output and the operands of its size are bound per launch
    at the launch's elements; a strided operand is bound whole where it fits the binding
    limit, else at a window around the elements the launch reads (``offsets``: its element
    offset from that window, for the uniform), and the launches shrink (by halves, down to
    1024 elements) until every window fits. None for ranges: one launch binds everything.
    ``operands``: (name, buffer or Meta) in binding order."""
    max_bind = device.limit("max-storage-buffer-binding-size")
    # launch starts are multiples of 1024 elements: whole u8 words, and byte offsets that are
    # multiples of 256 (the largest min-storage-buffer-offset-alignment)
    chunk = max(1024, (max_bind // out_item) // 1024 * 1024)
    big = {n for (n, b), f in zip(operands, full) if not f and _bound_bytes(b) > max_bind}
    while True:
        launches = []
        for start in range(0, total, chunk):
            count = min(chunk, total - start)
            if total <= chunk and not big:
                return [(start, count, None, {})]
            piece = (start * out_item, (count * out_item + 3) // 4 * 4)
            ranges, offsets = [], {}
            for (n, b), f in zip(operands, full):
                item = DTYPES[b.dtype].itemsize
                if f:
                    ranges.append((start * item, (count * item + 3) // 4 * 4))
                    continue
                if n not in big:
                    ranges.append((0, _bound_bytes(b)))
                    continue
                steps, offset = strided[n]
                lo, hi = _span(sizes, steps, start, start + count)
                align = 256 // item
                a0 = (offset + lo) // align * align
                size = -(-(offset + hi + 1 - a0) * item // 16) * 16
                if size > max_bind:
                    break
                ranges.append((a0 * item, size))
                offsets[n] = (offset - a0) & 0xFFFFFFFF
            else:
                launches.append((start, count, tuple(ranges) + (piece,), offsets))
                continue
            break  # a window is too wide: shorter launches
        else:
            return launches
        if chunk == 1024:
            n, b = next((n, b) for n, b in operands if n in big)
            raise ShapeError(
                f"{name}: input {n!r} {b.shape} {b.dtype} is read through strides (broadcast, "
                f"so it is bound whole, or where it is larger than this adapter's "
                f"max-storage-buffer-binding-size ({max_bind} bytes), at a window around the "
                f"elements each launch reads), and 1024 elements of the output read it at "
                f"places too far apart for one window (strides {strided[n][0]} over the "
                f"output's {sizes})")
        chunk = max(1024, chunk // 2 // 1024 * 1024)


def linear_launches(n_items: int, item_bytes: int, n_bindings: int, wg: int, device: Device,
                    name: str, uniform: dict, items_per_invocation: int = 1) -> list[Launch]:
    """Launches covering ``n_items`` items, split where the binding limit requires it."""
    if n_items == 0:
        return []
    max_bind = device.limit("max-storage-buffer-binding-size")
    chunk = max(256, (max_bind // item_bytes) // 256 * 256)
    out = []
    for start in range(0, n_items, chunk):
        count = min(chunk, n_items - start)
        size = (count * item_bytes + 3) // 4 * 4
        groups = math.ceil(count / (wg * items_per_invocation))
        u = dict(uniform, n=count)
        ranges = ((start * item_bytes, size),) * n_bindings if n_items > chunk else None
        out.append(Launch(fold_grid(groups, device, name), u, ranges))
    return out



def stepped_index(fields, ndim: int, operands: tuple[str, ...], first: str):
    """(fields + the step's, head, item, advance lines) of ``stepped_index_wgsl`` where the
    coalesced dims are few and the uniform with the step still fits its 256-byte slot;
    None where the program decodes every item (``index_wgsl``)."""
    fields = tuple(fields) + step_fields(ndim)
    if ndim > STEPPED_DIMS or len(pack_uniform(fields, dict.fromkeys(
            (n for n, _ in fields), 0))) > UNIFORM_STRIDE:
        return None
    return (fields, *stepped_index_wgsl(ndim, operands, first))


def packed_item(dt, ndim: int, strided: tuple[str, ...], fields, put: str, word: str = "w"):
    """(fields, head, item lines) of a packed item: the ``dt.lanes`` elements of one u32
    word, each (while below p.total) OR-ing ``put`` (of lane ``l``, operand indices i_<name>,
    or ``e`` for the output's size) into ``word``; stepped (lane coordinates advanced by one,
    no division) where ``stepped_index`` allows."""
    stepped = stepped_index(fields, ndim, strided, f"p.start + base * {dt.lanes}u")
    head, start, nxt, advance = [], [], [], []
    index = index_wgsl(ndim, strided).splitlines()
    if stepped is not None:
        fields, head, _, advance = stepped
        start, index, nxt = lane_index_wgsl(ndim, strided)
    return fields, head, [
        f"var {word} = 0u;", *start,
        f"for (var l = 0u; l < {dt.lanes}u; l = l + 1u) {{",
        f"    let e = i * {dt.lanes}u + l;",
        "    let g = p.start + e;",
        "    if (g < p.total) {",
        *("        " + x for x in index),
        f"        {word} = {word} | {put};",
        "    }",
        *("    " + x for x in nxt),
        "}",
        f"out[i] = {word};", *advance]


def broadcast_source(kernel, types, item_type: str, fields, bindings: list[str], args: str,
                     body: str, item: list[str], helpers: str = "", packed: bool = False,
                     head=()) -> str:
    """elementwise_broadcast.wgsl for one kernel: its bindings, the op ``fn op(args)`` whose
    ``body`` maps one item of ``item_type``, the per-item code and the uniform ``fields``
    after the first three (n, start, total are the template's own); ``packed``: an operand
    or the output is packed (u8, bool), read and written by packed.wgsl's functions;
    ``head``: lines run once per invocation before its items."""
    return shaders.render(shaders.load("elementwise/elementwise_broadcast.wgsl"), {
        "ENABLE": shaders.enable_directives(types),
        "T": item_type,
        "DIMS": "\n".join(f"    {n}: {ft}," for n, ft in fields[3:]),
        "BINDINGS": "\n".join(bindings),
        "UB": len(kernel.inputs) + 1,
        "WG": kernel.workgroup_size,
        "U": kernel.per_invocation,
        "ARGS": args,
        "BODY": body,
        "ITEM": item,
        "HELPERS": helpers,
        "PACKED": packed,
        "HEAD": head,
    })


class Elementwise(BuiltinKernel):
    """out = op(inputs...) elementwise, for every dtype listed (u8 lane by lane).

    ``row`` is the op's row of the op table (optable.OPS): its WGSL expression on ``x`` (and
    ``y``), its parameter ``p.p0``, rendered by ``op_expr`` with ``${V}`` the item type (a
    vector on the fast path) and ``${T}`` the scalar type."""

    workgroup_size = 256
    per_invocation = 4  # items per invocation: fewer, fatter workgroups saturate bandwidth
    vec4_rows = True  # the broadcast path may take rows four elements at a time
    not_in_place = None  # each invocation reads its items, then writes the same items

    def __init__(self, name: str, row: OpDef, dtypes=None, param: Param | None = None,
                 description: str = ""):
        self.name = name
        self.row = row
        self.inputs = ("a", "b")[:row.arity]
        self.dtypes = tuple(dtypes or row.accepts())
        self.params = (param,) if param else ()
        self.description = description or f"out = {row.description}"

    def check(self, inputs, output, params) -> None:
        if len(self.inputs) < 2:
            same_shapes(self, inputs, output)
            return
        for name, b in zip(self.inputs, inputs, strict=True):
            if b.dtype != output.dtype:
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype} and output is "
                                 f"{output.dtype}; dtypes must match")
        shape = self._broadcast(inputs)
        if shape != output.shape and not _broadcasts_to(shape, output.shape):
            raise ShapeError(f"{self.name}: the inputs broadcast to {shape} and out is "
                             f"{output.shape}; out must have that shape (or one it "
                             f"broadcasts to)")
        if any(b.size != output.size for b in inputs):
            self._plan(inputs, output, params)  # refuses what the strided shader cannot index

    def _broadcast(self, inputs) -> tuple[int, ...]:
        shapes = [b.shape for b in inputs]
        if all(s == shapes[0] for s in shapes):
            return shapes[0]
        return broadcast_shapes(self.name, [(f"input {n!r}", sh)
                                            for n, sh in zip(self.inputs, shapes)])

    def output_spec(self, inputs, params):
        if len(self.inputs) < 2:
            return super().output_spec(inputs, params)
        for name, b in zip(self.inputs[1:], inputs[1:]):
            if b.dtype != inputs[0].dtype:
                raise DtypeError(f"{self.name}: input 'a' is {inputs[0].dtype} and input "
                                 f"{name!r} is {b.dtype}; dtypes must match (no implicit "
                                 f"conversion)")
        return self._broadcast(inputs), inputs[0].dtype

    # -- broadcasting: operands whose size differs from the output's are read by strides --
    def _plan(self, inputs, output, params):
        """(full flags per input, coalesced sizes, {name: (strides, element offset)} of the
        strided inputs)."""
        return broadcast_plan(self.name, self.inputs, inputs, tuple(output.shape))

    def key(self, inputs, output, params) -> PipelineKey:
        # the operands of the output's size share its memory layout: the vectorized path
        if all(b.size == output.size for b in inputs):
            return PipelineKey(self.name, (output.dtype,), ())
        full, sizes, strided = self._plan(inputs, output, params)
        consts = (("broadcast", len(sizes)), ("full", full))
        inner = _vec4_inner(DTYPES[output.dtype], sizes, strided) if self.vec4_rows else None
        if inner is not None:
            consts += (("vec4", inner),)
        return PipelineKey(self.name, (output.dtype,), consts)

    def _render_broadcast(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        consts = dict(key.constants)
        ndim, full = consts["broadcast"], consts["full"]
        t = dt.wgsl  # the work type (i32 or u32 for packed dtypes, whose words are u32)
        at = "u32" if dt.packed else t
        strided = tuple(n for n, f in zip(self.inputs, full) if not f)
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{at}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{at}>;")
        vec4 = consts.get("vec4")
        if vec4 is not None:
            return self._render_vec4(key, dt, ndim, full, strided, vec4)
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  ("p0", dt.wgsl if self.params else "u32"), *uniform_fields(ndim, strided))
        if dt.packed:
            args = [packing.load(dt, n, "e" if f else f"i_{n}")
                    for n, f in zip(self.inputs, full)]
            fields, head, item = packed_item(
                dt, ndim, strided, fields, packing.put(dt, f"op({', '.join(args)})", "l"))
        else:
            head = []
            args = [f"{n}[i]" if f else f"{n}[i_{n}]" for n, f in zip(self.inputs, full)]
            item = ["let g = p.start + i;", *index_wgsl(ndim, strided).split("\n")]
            stepped = stepped_index(fields, ndim, strided, "p.start + base")
            if stepped is not None:
                fields, head, item, advance = stepped
                item = item + advance
            item = [*item, f"out[i] = op({', '.join(args)});"]
        args = ", ".join(f"{v}: {t}" for v in ("x", "y")[:len(self.inputs)])
        body = f"return {op_expr(self.name, self.row, dt, t, t)};"
        return broadcast_source(self, [t], t, fields, lines, args, body, item,
                                packed=dt.packed, head=head), fields

    def _render_vec4(self, key, dt, ndim, full, strided, inner):
        """Four elements of one row per item (the innermost coalesced size is a multiple
        of 4): the index is computed once per item, and operands load as vec4 (the output's
        size, or stepping by one along the row) or as one element repeated (broadcast
        along it); the op runs on vectors, as on the equal-shape path."""
        t = dt.wgsl
        v = f"vec4<{t}>"
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{v}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{v}>;")
        steps = dict(zip(strided, inner))
        args = []
        for n, f in zip(self.inputs, full):
            if f:
                args.append(f"{n}[i]")
            elif steps[n]:
                args.append(f"{n}[i_{n} / 4u]")
            else:
                args.append(f"{v}({n}[i_{n} / 4u][i_{n} % 4u])")
        item = ["let g = p.start + i * 4u;", *index_wgsl(ndim, strided).split("\n")]
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  ("p0", t if self.params else "u32"), *uniform_fields(ndim, strided))
        head = []
        stepped = stepped_index(fields, ndim, strided, "p.start + base * 4u")
        if stepped is not None:
            fields, head, item, advance = stepped
            item = item + advance
        item = [*item, f"out[i] = op({', '.join(args)});"]
        args = ", ".join(f"{a}: {v}" for a in ("x", "y")[:len(self.inputs)])
        body = f"return {op_expr(self.name, self.row, dt, v, t)};"
        return broadcast_source(self, [t], v, fields, lines, args, body, item,
                                head=head), fields

    def _broadcast_launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        full, sizes, strided = self._plan(inputs, output, params)
        dt = DTYPES[output.dtype]
        vec4 = self.vec4_rows and _vec4_inner(dt, sizes, strided) is not None
        per_item = dt.lanes if dt.packed else 4 if vec4 else 1
        p0 = params[self.params[0].name] if self.params and len(self.inputs) > 1 else 0
        dims = uniform_values(sizes, strided)
        # the stepped decode's step (unused where it decodes every item)
        dims.update(step_values(sizes, self.workgroup_size * per_item))
        out = []
        for start, count, ranges, offsets in split_launches(
                self.name, list(zip(self.inputs, inputs)), full, sizes, strided, total,
                dt.itemsize, device):
            items = -(-count // per_item)
            groups = math.ceil(items / (self.workgroup_size * self.per_invocation))
            u = dict(dims, n=items, start=start, total=total, p0=p0)
            u.update({f"o{n}": off for n, off in offsets.items()})
            out.append(Launch(fold_grid(groups, device, self.name), u, ranges))
        return out

    def render(self, key: PipelineKey):
        if key.constants:
            return self._render_broadcast(key)
        dt = DTYPES[key.dtypes[0]]
        t = dt.wgsl
        v = item_layout(dt)[2]
        ov = f"vec4<{t}>" if dt.packed else v  # op's item: the lanes of four words
        arity = len(self.inputs)
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{v}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{v}>;")
        operands = ("x", "y")[:arity]
        src = shaders.render(shaders.load("elementwise/elementwise.wgsl"), {
            "ENABLE": shaders.enable_directives([t]),
            "T": t,
            "V": v,
            "PT": t if self.params else "u32",
            "BINDINGS": "\n".join(lines),
            "UB": len(self.inputs) + 1,
            "WG": self.workgroup_size,
            "U": self.per_invocation,
            "OV": ov,
            "ARGS": ("", f"x: {v}", f"x: {v}, y: {v}")[arity],
            "OP_ARGS": ("", f"x: {ov}", f"x: {ov}, y: {ov}")[arity],
            "CALL": ("", "a[i]", "a[i], b[i]")[arity],
            "EXPR": op_expr(self.name, self.row, dt, ov, t),
            "PACKED": dt.packed,
            "HEAD": (),
            "N_LANES": dt.lanes,
            "OPERANDS": ", ".join(operands),
            "PUT": packing.put_x4(dt, "op(" + ", ".join(packing.lane_x4(dt, n, "l")
                                                        for n in operands) + ")", "l"),
        })
        return src, (("n", "u32"), ("p0", t if self.params else "u32"))

    def launches(self, inputs, output, params, device):
        if any(b.size != output.size for b in inputs):
            return self._broadcast_launches(inputs, output, params, device)
        dt = DTYPES[output.dtype]
        per_item, item_bytes, _ = item_layout(dt)
        items = -(-output.size // per_item)
        p0 = params[self.params[0].name] if self.params else 0
        return linear_launches(items, item_bytes, len(inputs) + 1, self.workgroup_size, device,
                               self.name, {"p0": p0}, self.per_invocation)


class Relu(Elementwise):
    def __init__(self):
        # a nan stays nan (tested by its bits: see wgsl_is_nan)
        super().__init__("relu", OPS["relu"], param=Param(
            "slope", "T", 0.0, "negative-side slope (leaky ReLU)"),
            description=OPS["relu"].description)

    def resolve_params(self, params, dt):
        if dt.is_float:  # the slope must fit the buffer's float type exactly (no overflow)
            return super().resolve_params(params, dt)
        out = super().resolve_params(params, DTYPES["f64"])
        if out["slope"] != 0:
            raise DtypeError(f"relu: slope={out['slope']} needs a float dtype; the input and "
                             f"output are {dt.name}, which supports slope=0 only")
        out["slope"] = 0
        return out

    def launches(self, inputs, output, params, device):
        dt = DTYPES[output.dtype]
        launches = super().launches(inputs, output, params, device)
        for launch in launches:
            launch.uniform["p0"] = float(params["slope"]) if dt.is_float else 0
        return launches
