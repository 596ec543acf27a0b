"""ElementwiseKernel: a user's WGSL statement over typed inputs and outputs, as CuPy's, run
with numpy broadcasting; one program per (source, dtypes, array or scalar args, rank)."""

from __future__ import annotations

import math

from ...buffer import Buffer, check_buffer, empty
from ...dtypes import DTYPES
from ...errors import ArgumentError, ShapeError
from ..core import custom, layout, shaders
from ..core.base import Kernel, Launch, Param, PipelineKey, fold_grid
from ..core.bind import _shared_memory, same_device
from . import signature as sig

WG = 256


class _Program(Kernel):
    """One ElementwiseKernel for one choice of which arguments are arrays: its storage
    bindings are the array inputs, then the outputs after the first (bound read_write
    through the key's in_place), then the first output."""

    dtypes = sig.TYPES
    workgroup_size = WG

    def __init__(self, owner: ElementwiseKernel, arrays: tuple[bool, ...]):
        self.owner = owner
        self.name = owner.name
        self.arrays = arrays
        ins = [a for a, is_array in zip(owner.in_args, arrays) if is_array]
        self.array_args = tuple(ins)
        self.scalar_args = tuple(a for a, is_array in zip(owner.in_args, arrays)
                                 if not is_array)
        outs = owner.out_args
        self.inputs = tuple(a.name for a in ins) + tuple(o.name for o in outs[1:])
        self.output = outs[0].name
        self.params = tuple(Param(a.name, "scalar") for a in self.scalar_args) + (
            Param("wgc_types", "types"),)
        self.extra = tuple(range(len(ins), len(ins) + len(outs) - 1))
        self.description = f"ElementwiseKernel {owner.name}"

    def in_place_refusal(self, inputs, output, aliased):
        if self.extra:
            return f"{self.name} has several outputs"
        for i in aliased:
            if tuple(inputs[i].shape) != tuple(output.shape):
                return f"input {self.inputs[i]!r} is broadcast to the output's shape"
        return None

    def _layout(self, inputs, output):
        shape = tuple(output.shape)
        n = len(self.array_args)
        strided = [k for k in range(n) if tuple(inputs[k].shape) != shape]
        strides = tuple(layout.broadcast_strides(tuple(inputs[k].shape), shape) for k in strided)
        sizes, steps = layout.coalesce(shape, strides)
        return tuple(strided), sizes, steps

    def key(self, inputs, output, params):
        strided, sizes, _ = self._layout(inputs, output)
        return PipelineKey(self.name, params["wgc_types"],
                           (("src", self.owner.digest), ("arrays", self.arrays),
                            ("strided", strided), ("ndim", len(sizes))), self.extra)

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        types = key.dtypes
        owner = self.owner
        n_in = len(owner.in_args)
        in_types, out_types = types[:n_in], types[n_in:]
        strided, ndim = c["strided"], c["ndim"]
        names = [f"w{k}x" for k in strided]
        fields = list(layout.uniform_fields(ndim, tuple(names)))
        storage, op_params, op_args = [], [], []
        slot = 0
        for a, t, is_array in zip(owner.in_args, in_types, self.arrays):
            op_params.append(f", {a.name}: {sig.body_type(t)}")
            if is_array:
                k = len(storage)
                at = f"i_w{k}x" if k in strided else "g"
                storage.append((slot, "read", f"wgc_in_{a.name}", sig.storage_element(t)))
                op_args.append(", " + sig.read_element(a.name, t, at))
                slot += 1
            else:
                fields.append((f"u_{a.name}", sig.UNIFORM_TYPE[t]))
                op_args.append(", " + sig.scalar_read(a, t))
        outs = list(zip(owner.out_args, out_types))
        for o, t in outs[1:] + outs[:1]:
            storage.append((slot, "read_write", f"wgc_out_{o.name}", sig.storage_element(t)))
            slot += 1
        packed_out = [DTYPES[t].packed for t in out_types]
        fields = [("total", "u32"), *fields]
        values = {
            **sig.program_values(owner, types, fields, storage,
                                 any(DTYPES[t].packed for t in types)),
            "OUTS": [(o.name, sig.body_type(t)) for o, t in outs],
            "OUT_NAMES": ", ".join(o.name for o, _ in outs), "OP_PARAMS": "".join(op_params),
            "OP_ARGS": "".join(op_args),
            "INDEX": layout.index_wgsl(ndim, tuple(names)).split("\n") if names else [],
            "BODY": owner.operation, "WG": WG, "WORDS": any(packed_out),
            "WRITES": [(o.name, t if DTYPES[t].packed else "") for o, t in outs],
        }
        src = shaders.render(shaders.load("user/elementwise.wgsl"), values,
                             name=f"{self.name} (ElementwiseKernel)")
        return src, tuple(fields)

    def launches(self, inputs, output, params, device):
        strided, sizes, steps = self._layout(inputs, output)
        total = math.prod(output.shape)
        values = {"total": total}
        values.update(layout.uniform_values(sizes, {f"w{k}x": (st, 0)
                                                    for k, st in zip(strided, steps)}))
        for a in self.scalar_args:
            values[f"u_{a.name}"] = params[a.name]
        words = any(DTYPES[t].packed for t in params["wgc_types"][len(self.owner.in_args):])
        items = -(-total // 4) if words else total
        groups = -(-items // WG)
        if groups == 0:
            return []
        return [Launch(fold_grid(groups, device, self.name), values)]


class ElementwiseKernel:
    """A user's elementwise kernel, as CuPy's ``ElementwiseKernel``, in WGSL.

    ``in_params`` and ``out_params`` are typed argument lists, ``"x: T, y: T, a: f32"``: a
    type is a dtype (f32, f64, f16, s32/i32, s64/i64, u32, u8, bool) or a generic in upper
    case (``T``), resolved from the arguments of a call (every argument declared ``T`` must
    have the same dtype). ``operation`` is WGSL statements that set the outputs from the
    inputs of one element: ``"z = a * x + y;"``; ``i`` is the element's flat index and ``n``
    the number of elements, a generic is also a WGSL type alias (``T(2)``), u8 values are
    u32 (stored modulo 256) and bool ones WGSL bools. ``preamble`` is WGSL placed before the
    body (helper functions).

    Called as ``k(x, y, 2.0)``: a Buffer argument is an array, broadcast with the others as
    numpy does; a number is a scalar (converted exactly to its type). Returns the output
    Buffer, or a tuple of them for several outputs; ``out=`` gives them (a Buffer or a
    tuple). Each output element is computed once, by one invocation: an input may be its
    own output when it has the output's shape. Compiled on first use, once per (source,
    dtypes, which arguments are arrays, rank)."""

    def __init__(self, in_params, out_params, operation: str, name: str | None = None,
                 preamble: str = ""):
        name = sig.check_name(name, "elementwise_kernel")
        self.name = name
        self.in_args = sig.parse_args(name, "in_params", in_params)
        self.out_args = sig.parse_args(name, "out_params", out_params)
        sig.check_names(name, self.in_args, self.out_args)
        self.operation = sig.check_wgsl_text(name, "operation", operation)
        self.preamble = sig.check_wgsl_text(name, "preamble", preamble, required=False)
        self.digest = sig.digest(self.in_args, self.out_args, operation, preamble)
        self._programs: dict[tuple[bool, ...], _Program] = {}

    def __repr__(self) -> str:
        ins = ", ".join(f"{a.name}: {a.type}" for a in self.in_args)
        outs = ", ".join(f"{a.name}: {a.type}" for a in self.out_args)
        return f"<wgc.ElementwiseKernel {self.name}({ins}) -> ({outs})>"

    __signature__ = custom.CallSignature()

    def call_signature(self):
        return sig.call_signature(self.in_args, out=None)

    def __call__(self, *args, out=None):
        where = self.name
        sig.check_count(where, self.in_args, args)
        outs = self._given_outs(out)
        in_types, out_types, _ = sig.call_types(where, self.in_args, self.out_args, args, outs)
        named = [(a.name, v) for a, v in zip(self.in_args, args) if isinstance(v, Buffer)]
        if outs is not None:
            named += list(zip([o.name for o in self.out_args], outs))
        if not named:
            raise ArgumentError(f"{where}: no argument is a Buffer; pass the outputs in out= "
                                f"(they give the shape)")
        shape = layout.broadcast_shapes(where, [(n, tuple(b.shape)) for n, b in named])
        layout.check_u32_index(where, shape)
        device = same_device(where, named)
        if outs is None:
            outs = tuple(empty(shape, t, label=f"{where}-{o.name}", device=device)
                         for o, t in zip(self.out_args, out_types))
        self._check_outs(outs, shape, args)
        arrays = tuple(isinstance(v, Buffer) for v in args)
        params = {a.name: sig.convert_scalar(where, a, v, t)
                  for a, v, t in zip(self.in_args, args, in_types) if not isinstance(v, Buffer)}
        params["wgc_types"] = tuple(t.name for t in in_types + out_types)
        prog = self._programs.get(arrays)
        if prog is None:
            prog = self._programs[arrays] = _Program(self, arrays)
        ins = [v for v in args if isinstance(v, Buffer)] + list(outs[1:])
        custom.runner(prog, ins, outs[0], params)
        return outs[0] if len(outs) == 1 else outs

    def _given_outs(self, out):
        if out is None:
            return None
        outs = (out,) if isinstance(out, Buffer) else out
        if not isinstance(outs, (tuple, list)) or len(outs) != len(self.out_args):
            raise ArgumentError(f"{self.name}: out: expected {len(self.out_args)} Buffer(s) "
                                f"({', '.join(o.name for o in self.out_args)}), got {out!r}")
        for o, b in zip(self.out_args, outs):
            check_buffer(b, f"{self.name}: out {o.name!r}")
        return tuple(outs)

    def _check_outs(self, outs, shape, args) -> None:
        """Outputs of the broadcast shape, whole buffers, none of them sharing memory with
        another output or (beyond the first, which may be an input of its own shape) an
        input."""
        for o, b in zip(self.out_args, outs):
            if tuple(b.shape) != shape:
                raise ShapeError(f"{self.name}: output {o.name!r} is {b.shape}; the arguments "
                                 f"broadcast to {shape}")
            if b._base is not None:
                raise ArgumentError(f"{self.name}: output {o.name!r} is a view of another "
                                    f"buffer's memory; outputs are buffers of their own")
        arrays = [(a.name, v) for a, v in zip(self.in_args, args) if isinstance(v, Buffer)]
        for j, (o, b) in enumerate(zip(self.out_args, outs)):
            others = [(f"output {p.name!r}", c)
                      for k, (p, c) in enumerate(zip(self.out_args, outs)) if k != j]
            if j:
                others += [(f"input {n!r}", v) for n, v in arrays]
            for what, c in others:
                if _shared_memory(b, c) is not None:
                    raise ArgumentError(f"{self.name}: output {o.name!r} is also {what}; "
                                        f"each output is a buffer of its own (only the first "
                                        f"may be an input of the output's shape)")
