"""The "where" kernel: out = condition ? x1 : x2 elementwise, the three operands broadcast
together as numpy does (where.wgsl): the array namespace's where."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import Launch, PipelineKey, fold_grid
from ..core.layout import index_wgsl, step_values, uniform_fields, uniform_values
from .elementwise import Elementwise, split_launches, stepped_index
from .optable import ALL, OPS


class Where(Elementwise):
    """out = x1 where condition (bool) holds, else x2; every dtype (x1, x2 and out share it),
    numpy's broadcasting of all three. One element per item (a u32 word of four for u8 and
    bool outputs)."""

    vec4_rows = False
    not_in_place = None  # each invocation reads its items' elements, then writes the same items

    def __init__(self):
        # every dtype: the bits of x1 or x2 move (c64 as its vec2<f32>, c128 its vec2<f64>)
        dtypes = ALL + tuple(d for d in ("bool", "c64", "c128") if d in DTYPES)
        super().__init__("where", OPS["identity"], dtypes,
                         description="out = x1 where condition is true, else x2 (broadcast)")
        self.inputs = ("condition", "x1", "x2")

    def _dtype(self, inputs) -> str:
        c, x1, x2 = inputs
        if c.dtype != "bool":
            raise DtypeError(f"where: condition is {c.dtype}; expected bool (compare first, "
                             f"e.g. x != 0)")
        if x1.dtype != x2.dtype:
            raise DtypeError(f"where: x1 is {x1.dtype} and x2 is {x2.dtype}; dtypes must "
                             f"match")
        return x1.dtype

    def output_spec(self, inputs, params):
        return self._broadcast(inputs), self._dtype(inputs)

    def check(self, inputs, output, params) -> None:
        dt = self._dtype(inputs)
        if output.dtype != dt:
            raise DtypeError(f"where: out is {output.dtype}, expected {dt} (x1's and x2's)")
        shape = self._broadcast(inputs)
        if shape != output.shape:
            raise ShapeError(f"where: the inputs broadcast to {shape} and out is "
                             f"{output.shape}")
        self._plan(inputs, output, params)

    def _plan(self, inputs, output, params):
        full, sizes, strided = super()._plan(inputs, output, params)
        if not strided:  # every operand full: a flat index, no strides
            return full, (), strided
        return full, sizes, strided

    def key(self, inputs, output, params) -> PipelineKey:
        full, sizes, _ = self._plan(inputs, output, params)
        return PipelineKey(self.name, (output.dtype,), (("ndim", len(sizes)), ("full", full)))

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        consts = dict(key.constants)
        ndim, full = consts["ndim"], consts["full"]
        strided = tuple(n for n, f in zip(self.inputs, full) if not f)
        at = {n: "e" if f else f"i_{n}" for n, f in zip(self.inputs, full)}
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  *uniform_fields(ndim, strided))
        index = index_wgsl(ndim, strided).splitlines() if ndim else []
        stepped = None if dt.packed or not ndim else stepped_index(fields, ndim, strided,
                                                                   "p.start + base")
        head = item = []
        if stepped is not None:  # one decode per invocation, a carry per item
            fields, head, item, advance = stepped
            item, index = item + advance, []
        src = shaders.render(shaders.load("elementwise/where.wgsl"), {
            "ENABLE": shaders.enable_directives([dt.wgsl]),
            "AT": "u32" if dt.packed else dt.wgsl,
            "PACKED": dt.packed, "LANES": dt.lanes, "BITS": dt.bits,
            "DIMS": "\n".join(f"    {n}: {ft}," for n, ft in fields[3:]),
            "INDEX": index, "STEPPED": stepped is not None, "ITEM": item,
            "C": at["condition"], "X1": at["x1"], "X2": at["x2"],
            "WG": self.workgroup_size, "U": self.per_invocation, "HEAD": head,
        }, name="elementwise/where.wgsl")
        return src, fields

    def launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        full, sizes, strided = self._plan(inputs, output, params)
        dt = DTYPES[output.dtype]
        per_item = dt.lanes
        dims = uniform_values(sizes, strided) if sizes else {}
        dims.update(step_values(sizes, self.workgroup_size))  # (for the stepped decode)
        out = []
        for start, count, ranges, offsets in split_launches(
                self.name, list(zip(self.inputs, inputs)), full, sizes, strided, total,
                dt.itemsize, device):
            items = -(-count // per_item)
            groups = math.ceil(items / (self.workgroup_size * self.per_invocation))
            u = dict(dims, n=items, start=start, total=total)
            u.update({f"o{n}": off for n, off in offsets.items()})
            out.append(Launch(fold_grid(groups, device, self.name), u, ranges))
        return out


WHERE = Where()
