"""ReductionKernel: a user's map, reduce and post-map expressions in WGSL, as CuPy's, over
any axes; a workgroup-memory tree per output, or partials and a merge pass for long ones."""

from __future__ import annotations

import math
import re

from ...buffer import Buffer, check_buffer, empty
from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import custom, layout, registry, shaders
from ..core.base import Kernel, Launch, Param, PipelineKey, fold_grid
from ..core.bind import same_device
from ..reduce.axes import normalize_axes
from . import signature as sig

WG = 256
PER_INVOCATION = 8  # elements one invocation reduces before a part is split off
BUSY = 4096  # partials worth spreading a few long reductions over
_VEC = re.compile(r"vec([234])<(f32|f16|f64|i32|u32|i64)>$")
_SCALAR_BYTES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "f64": 8, "i64": 8}


def plan(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(outputs, elements per output, parts per output, elements per part)."""
    r = math.prod(shape[d] for d in axes)
    nout = math.prod(s for d, s in enumerate(shape) if d not in axes)
    parts = 1
    if r > WG * PER_INVOCATION and nout < BUSY:
        parts = min(-(-r // (WG * PER_INVOCATION)), max(1, BUSY // max(nout, 1)))
    return nout, r, parts, -(-r // parts) if r else 0


def _stride(r_type: str) -> int:
    """Bytes between two values of the reduce type in a storage array (the partials)."""
    if r_type in _SCALAR_BYTES:
        return _SCALAR_BYTES[r_type]
    m = _VEC.match(r_type)
    n, s = int(m.group(1)), _SCALAR_BYTES[m.group(2)]
    return s * (4 if n == 3 else n)


class _Program(Kernel):
    """One ReductionKernel pass for one choice of which arguments are arrays (see the
    template's modes)."""

    dtypes = sig.TYPES

    def __init__(self, owner: ReductionKernel, arrays: tuple[bool, ...], mode: str):
        self.owner, self.arrays, self.mode = owner, arrays, mode
        self.name = owner.name
        self.array_args = tuple(a for a, is_a in zip(owner.in_args, arrays) if is_a)
        self.scalar_args = tuple(a for a, is_a in zip(owner.in_args, arrays) if not is_a)
        self.inputs = ("wgc_part",) if mode == "merge" else tuple(a.name for a in
                                                                  self.array_args)
        self.output = owner.out_args[0].name
        self.params = tuple(Param(a.name, "scalar") for a in self.scalar_args) + (
            Param("wgc_types", "types"), Param("wgc_axes", "axes"),
            Param("wgc_plan", "plan", None))
        self.description = f"ReductionKernel {owner.name}"

    def _layout(self, inputs, params):
        """(plan, coalesced sizes, strides per input) over kept-then-reduced axes."""
        shape = layout.broadcast_shapes(self.name, [(n, tuple(b.shape))
                                                    for n, b in zip(self.inputs, inputs)])
        axes = params["wgc_axes"]
        perm = [d for d in range(len(shape)) if d not in axes] + list(axes)
        strides = tuple(tuple(layout.broadcast_strides(tuple(b.shape), shape)[d] for d in perm)
                        for b in inputs)
        sizes, steps = layout.coalesce(tuple(shape[d] for d in perm), strides)
        return plan(shape, axes), sizes, steps

    def key(self, inputs, output, params):
        ndim = 0 if self.mode == "merge" else len(self._layout(inputs, params)[1])
        return PipelineKey(self.name, params["wgc_types"],
                           (("src", self.owner.digest), ("arrays", self.arrays),
                            ("mode", self.mode), ("ndim", ndim)))

    def render(self, key: PipelineKey):
        owner = self.owner
        c = dict(key.constants)
        types = key.dtypes
        n_in = len(owner.in_args)
        in_types, out_t, r_type = types[:n_in], types[n_in], owner.reduce_wgsl(types)
        names = tuple(f"w{k}x" for k in range(len(self.array_args)))
        fields = list(layout.uniform_fields(c["ndim"], names)) if self.mode != "merge" else []
        storage, op_params, op_args, scalars = [], [], [], []
        for a, t, is_array in zip(owner.in_args, in_types, self.arrays):
            if is_array:
                k = len(storage)
                op_params.append(f", {a.name}: {sig.body_type(t)}")
                op_args.append(", " + sig.read_element(a.name, t, f"i_w{k}x"))
                storage.append((k, "read", f"wgc_in_{a.name}", sig.storage_element(t)))
            else:
                fields.append((f"u_{a.name}", sig.UNIFORM_TYPE[t]))
                scalars.append(f"let {a.name}: {sig.body_type(t)} = {sig.scalar_read(a, t)};")
        if self.mode == "merge":
            storage = [(0, "read", "wgc_in_wgc_part", r_type)]
        out_elem = r_type if self.mode == "partial" else sig.storage_element(out_t)
        storage.append((len(storage), "read_write", "wgc_out", out_elem))
        fields = [("nout", "u32"), ("r", "u32"), ("parts", "u32"), ("chunk", "u32"), *fields]
        values = {
            **sig.program_values(owner, types, fields, storage,
                                 any(DTYPES[t].packed for t in in_types),
                                 ["f16"] if "f16" in r_type else []),
            "MODE": self.mode, "R": r_type, "OT": sig.body_type(out_t),
            "OUT_ELEM": sig.storage_element(out_t), "OUT_KIND": out_t,
            "OUT": owner.out_args[0].name, "WG": WG, "IDENTITY": owner.identity,
            "REDUCE": owner.reduce_expr, "MAP": owner.map_expr, "POST": owner.post_map_expr,
            "SCALARS": scalars, "OP_PARAMS": "".join(op_params), "OP_ARGS": "".join(op_args),
            "INDEX": layout.index_wgsl(c["ndim"], names).split("\n") if names else [],
        }
        src = shaders.render(shaders.load("user/reduction.wgsl"), values,
                             name=f"{self.name} (ReductionKernel)")
        return src, tuple(fields)

    def launches(self, inputs, output, params, device):
        values = {f"u_{a.name}": params[a.name] for a in self.scalar_args}
        if self.mode == "merge":
            nout, r, parts, chunk = params["wgc_plan"]
        else:
            (nout, r, parts, chunk), sizes, steps = self._layout(inputs, params)
            names = [f"w{k}x" for k in range(len(inputs))]
            values.update(layout.uniform_values(sizes, {n: (st, 0) for n, st in zip(names, steps)}))
            if self.mode in ("direct", "single"):
                parts, chunk = 1, r
        values.update(nout=nout, r=r, parts=parts, chunk=chunk)
        groups = nout * parts if self.mode == "partial" else nout
        if groups == 0:
            return []
        return [Launch(fold_grid(groups, device, self.name), values)]

    def passes(self, inputs, output, params):
        """A long reduction: partials, then their merge; a u8 or bool output: its values as
        u32 words, then packed by astype. Otherwise one pass (None)."""
        if self.mode != "direct":
            return None
        layout_plan = self._layout(inputs, params)[0]
        nout, _, parts, _ = layout_plan
        packed = DTYPES[params["wgc_types"][len(self.owner.in_args)]].packed
        if parts == 1 and not packed:
            return None
        step = dict(params, wgc_plan=layout_plan)
        refs = [f"in{i}" for i in range(len(inputs))]
        temps, steps = [], []
        if parts > 1:
            stride = _stride(self.owner.reduce_wgsl(params["wgc_types"]))
            temps.append(((-(-nout * parts * stride // 4),), "u32"))
            steps.append((self.owner.program(self.arrays, "partial"), refs, "tmp0", step))
        final = f"tmp{len(temps)}" if packed else "out"
        if packed:
            temps.append((tuple(output.shape), "u32"))
        steps.append((self.owner.program(self.arrays, "merge"), ["tmp0"], final, step)
                     if parts > 1 else
                     (self.owner.program(self.arrays, "single"), refs, final, step))
        if packed:
            steps.append((registry.get("astype"), [final], "out", {"casting": "unsafe"}))
        return temps, steps


class ReductionKernel:
    """A user's reduction, as CuPy's ``ReductionKernel``, in WGSL.

    ``in_params`` and ``out_params`` are typed argument lists as ElementwiseKernel's (one
    output). ``map_expr`` is a WGSL expression of the inputs (and ``j``, the element's index
    along the reduced axes, row-major) giving the value reduced; ``reduce_expr`` combines two
    of them, ``a`` and ``b``; ``post_map_expr`` is statements setting the output from the
    reduced ``a``; ``identity`` is the WGSL value the reduction starts from (``"0"`` for a sum;
    also the result of an empty reduction). ``reduce_type`` (default: the output's type) is a
    dtype, a generic, or a WGSL vector (``vec2<f32>``): the type of ``a`` and ``b``.

    ``reduce_expr`` must be associative and commutative: the elements are combined in a
    tree (each invocation over a strided slice, then the workgroup pairwise, then, for long
    reductions, partials of several workgroups), not from left to right. Float results may
    therefore differ from a sequential sum in the last bits.

    Called as ``k(x, axis=None, keepdims=False, out=None)``: ``axis`` is numpy's (None: every
    element; an int or a tuple of ints); array inputs are broadcast together first, numbers
    are scalars."""

    def __init__(self, in_params, out_params, map_expr: str, reduce_expr: str,
                 post_map_expr: str, identity, name: str | None = None,
                 reduce_type: str | None = None, preamble: str = ""):
        name = sig.check_name(name, "reduction_kernel")
        self.name = name
        self.in_args = sig.parse_args(name, "in_params", in_params)
        self.out_args = sig.parse_args(name, "out_params", out_params)
        sig.check_names(name, self.in_args, self.out_args)
        if len(self.out_args) != 1:
            raise ArgumentError(f"{name}: out_params: a ReductionKernel has one output, got "
                                f"{len(self.out_args)}")
        self.map_expr = sig.check_wgsl_text(name, "map_expr", map_expr)
        self.reduce_expr = sig.check_wgsl_text(name, "reduce_expr", reduce_expr)
        self.post_map_expr = sig.check_wgsl_text(name, "post_map_expr", post_map_expr)
        if isinstance(identity, (int, float)) and not isinstance(identity, bool):
            identity = repr(identity)
        self.identity = sig.check_wgsl_text(name, "identity", identity)
        self.preamble = sig.check_wgsl_text(name, "preamble", preamble, required=False)
        self.reduce_type = self._check_reduce_type(reduce_type)
        self.digest = sig.digest(self.in_args, self.out_args, map_expr, reduce_expr,
                                 post_map_expr, self.identity, self.reduce_type, preamble)
        self._programs: dict = {}

    def _check_reduce_type(self, reduce_type):
        if reduce_type is None:
            if self.out_args[0].type == "bool":
                raise ArgumentError(f"{self.name}: reduce_type: the output is bool; pass "
                                    f"reduce_type='u32' and set the output from it "
                                    f"(y = a != 0u;)")
            return self.out_args[0].type
        if isinstance(reduce_type, str) and _VEC.match("".join(reduce_type.split())):
            return "".join(reduce_type.split())  # spaces dropped: vec2<f32>, one spelling
        (arg,) = sig.parse_args(self.name, "reduce_type", f"a: {reduce_type}")
        if arg.generic and arg.type not in {a.type for a in self.in_args + self.out_args}:
            raise ArgumentError(f"{self.name}: reduce_type {reduce_type!r} is a generic no "
                                f"argument is declared with")
        if arg.type == "bool":
            raise ArgumentError(f"{self.name}: reduce_type {reduce_type!r}: reduce in u32 "
                                f"(and set a bool output from it: y = a != 0u;)")
        return arg.type

    def reduce_wgsl(self, types) -> str:
        """The WGSL type of ``a`` and ``b`` for these argument dtypes."""
        t = self.reduce_type
        if t in DTYPES:
            return sig.body_type(t)
        if _VEC.match(t):
            return t
        for a, d in zip(self.in_args + self.out_args, types):
            if a.type == t:
                if d == "bool":
                    raise DtypeError(f"{self.name}: reduce_type {t} is bool here; pass "
                                     f"reduce_type='u32'")
                return sig.body_type(d)
        raise AssertionError(t)

    def program(self, arrays, mode: str) -> _Program:
        p = self._programs.get((arrays, mode))
        if p is None:
            p = self._programs[(arrays, mode)] = _Program(self, arrays, mode)
        return p

    def __repr__(self) -> str:
        ins = ", ".join(f"{a.name}: {a.type}" for a in self.in_args)
        o = self.out_args[0]
        return f"<wgc.ReductionKernel {self.name}({ins}) -> ({o.name}: {o.type})>"

    __signature__ = custom.CallSignature()

    def call_signature(self):
        return sig.call_signature(self.in_args, axis=None, keepdims=False, out=None)

    def __call__(self, *args, axis=None, keepdims: bool = False, out=None):
        where = self.name
        sig.check_count(where, self.in_args, args)
        if out is not None:
            check_buffer(out, f"{where}: out")
        outs = None if out is None else (out,)
        in_types, out_types, _ = sig.call_types(where, self.in_args, self.out_args, args, outs)
        named = [(a.name, v) for a, v in zip(self.in_args, args) if isinstance(v, Buffer)]
        if not named:
            raise ArgumentError(f"{where}: no argument is a Buffer; a reduction reduces arrays")
        shape = layout.broadcast_shapes(where, [(n, tuple(b.shape)) for n, b in named])
        layout.check_u32_index(where, shape)
        if not isinstance(keepdims, bool):
            raise ArgumentError(f"{where}: keepdims must be True or False, got {keepdims!r}")
        axes = normalize_axes(where, axis, len(shape))
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape)
                          if keepdims or d not in axes)
        device = same_device(where, named + ([("out", out)] if out is not None else []))
        if out is None:
            out = empty(out_shape, out_types[0], label=f"{where}-out", device=device)
        elif tuple(out.shape) != out_shape:
            raise ShapeError(f"{where}: out is {out.shape}; reducing {shape} over axes "
                             f"{axes} gives {out_shape}")
        arrays = tuple(isinstance(v, Buffer) for v in args)
        params = {a.name: sig.convert_scalar(where, a, v, t)
                  for a, v, t in zip(self.in_args, args, in_types) if not isinstance(v, Buffer)}
        params["wgc_types"] = tuple(t.name for t in in_types + out_types)
        params["wgc_axes"] = axes
        custom.runner(self.program(arrays, "direct"), [b for _, b in named], out, params)
        return out
