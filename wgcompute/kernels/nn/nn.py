"""Neural-network operator kernels on NCHW float tensors (f32, f16 stored, f32 arithmetic):
activations, broadcasting binaries, batch norm, pools, softmax, transpose, copies, LRN.

Every kernel here reads the *logical* shapes of its operands from the ``shapes`` param when
given (a model runs its layers on flat scratch buffers reused between layers) and from the
buffers otherwise; a buffer must hold at least its logical shape's elements.

The kernels live in common.py, pointwise.py, pool.py, softmax.py and layout.py beside this
module; it gathers them (``nn_kernels``) and re-exports their names."""

from __future__ import annotations

from .common import (
    ACTIVATION,
    ACTIVATION_DEFAULTS,
    ACTIVATIONS,
    FLOATS,
    MAX_RANK,
    SHAPES,
    WG,
    NNKernel,
    act_fn,
    activation_numpy,
    convert_activation,
    f32_bits,
)
from .layout import (
    CopyRows,
    PreprocessBatch,
    Transpose,
)
from .pointwise import (
    BINARY_OPS,
    Activation,
    BatchNorm,
    Binary,
    broadcast_shape,
    broadcast_strides,
)
from .pool import (
    GlobalPool,
    Pool,
    pool_out_size,
)
from .softmax import (
    LRN,
    Softmax,
)

__all__ = [
    "ACTIVATION",
    "ACTIVATIONS",
    "ACTIVATION_DEFAULTS",
    "Activation",
    "BINARY_OPS",
    "BatchNorm",
    "Binary",
    "CopyRows",
    "FLOATS",
    "GlobalPool",
    "LRN",
    "MAX_RANK",
    "NNKernel",
    "Pool",
    "PreprocessBatch",
    "SHAPES",
    "Softmax",
    "Transpose",
    "WG",
    "act_fn",
    "activation_numpy",
    "broadcast_shape",
    "broadcast_strides",
    "convert_activation",
    "f32_bits",
    "pool_out_size",
]


def nn_kernels() -> list:
    return [Activation(), Binary(), BatchNorm(), Pool(), GlobalPool(), Softmax(), Transpose(),
            CopyRows(), LRN(), PreprocessBatch()]
