"""The package's built-in kernels outside image, nn and conv (``builtin_kernels()``): the
elementwise kernels (elementwise.py), the copies (copies.py), casts, matmul and reductions."""

from __future__ import annotations

from ..core.base import Kernel, Param
from ..core.bind import GATHER
from ..matmul.matmul import Matmul
from ..reduce.reduce import reduce_kernels
from .cast import cast_kernels
from .copies import Copy, StridedCopy, Transpose
from .elementwise import (  # noqa: F401 - imported from here by arrayops and users' code
    Elementwise,
    Relu,
    item_layout,
    linear_launches,
    op_expr,
    same_shapes,
    split_launches,
)
from .optable import ALL, OPS, OpDef  # noqa: F401
from .regions import REGION_COPY

# the built-in binary kernels: registered name -> op table row
BUILTIN_OPS = {"elementwise_add": "add", "elementwise_sub": "sub",
               "elementwise_multiply": "mul", "elementwise_divide": "div"}


def builtin_kernels() -> list[Kernel]:
    scalar = Param("scalar", "T", doc="the factor")
    strided_copy = StridedCopy()
    GATHER[:] = [strided_copy, REGION_COPY]  # bind.bind gathers unaligned views with them
    return [
        *(Elementwise(name, OPS[op]) for name, op in BUILTIN_OPS.items()),
        Elementwise("scale", OPS["scale"], param=scalar, description="out = input * scalar"),
        Relu(),
        Elementwise("fill", OPS["fill"], ALL + ("bool",),  # bool: lanes of 0 or 1
                    param=Param("value", "T", doc="the value"),
                    description="out[...] = value"),
        Transpose(),
        Copy(),
        strided_copy,
        *cast_kernels(),
        Matmul(),
        *reduce_kernels(),
    ]
