"""Kernels that read a view of a buffer in place where a copy of it was asked for (automatic
fusion holds strided copies, _fusion_auto.py): kernel name -> (the operands a view may
replace, given the inputs and params; the inputs and params reading the given views, or None
where the kernel cannot read them so)."""

from __future__ import annotations

from .matmul.shapes import read_in_place, viewable_operands
from .nn.attention import attention_views, viewable_heads

IN_PLACE = {"matmul": (viewable_operands, read_in_place),
            "attention": (viewable_heads, attention_views)}
