"""The ONNX operators wgcompute runs: per operator, what it refuses (checked at load), how it
folds on the host when its inputs are constants, and how it lowers to kernel steps."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..kernels.nn.nn import broadcast_shape
from .operators_common import COPY, _a
from .operators_conv import (
    _check_conv,
    _check_conv_transpose,
    _lower_conv,
    _lower_conv_transpose,
    _lower_gemm,
    _lower_matmul,
)
from .operators_layout import (
    _check_cast,
    _check_constant,
    _check_dropout,
    _fold_cast,
    _fold_concat,
    _fold_constant,
    _fold_constant_of_shape,
    _fold_flatten,
    _fold_gather,
    _fold_identity,
    _fold_reshape,
    _fold_shape,
    _fold_slice,
    _fold_squeeze,
    _fold_transpose,
    _fold_unsqueeze,
    _lower_cast,
    _lower_concat,
    _lower_dropout,
    _lower_gather,
    _lower_identity,
    _lower_shape,
    _lower_transpose,
    _lower_view,
    _np_dtype,
    type_name,
)
from .operators_nn import (
    _BINARY,
    _act_fold,
    _check_bn,
    _check_lrn,
    _check_pool,
    _fold_binary,
    _lower_activation,
    _lower_binary,
    _lower_bn,
    _lower_global_pool,
    _lower_lrn,
    _lower_pool,
    _lower_softmax,
    activation_of,
)

__all__ = ["COPY", "OPS", "FoldBudget", "activation_of", "fold", "fold_out_bytes", "type_name"]


@dataclass(frozen=True)
class OpSpec:
    check: Callable | None = None  # (node, opset) -> reason it cannot run, or None
    fold: Callable | None = None  # (node, input arrays, opset) -> output arrays
    lower: Callable | None = None  # (lowering, node) -> None (emits steps, sets values)



# -- folding on the host, within a budget ----------------------------------------------------------
@dataclass
class FoldBudget:
    """What folding constants may create, in bytes, in all (counted before each fold)."""

    limit: int
    used: int = 0

    def charge(self, n, nbytes: int) -> None:
        if self.used + nbytes > self.limit:
            raise ModelError(
                f"load_onnx: node {n.op} {n.name!r} would fold into {nbytes:,} bytes of "
                f"constants ({self.used:,} folded before it), over the limit of "
                f"{self.limit:,} bytes; load_onnx(max_folded_bytes=...) or the environment "
                f"variable WGCOMPUTE_MAX_FOLDED_BYTES raises it")
        self.used += nbytes


def fold_out_bytes(n, vals, opset) -> int:
    """An upper bound of the bytes folding node ``n`` on ``vals`` creates, from shapes alone
    (nothing is allocated)."""
    op = n.op
    present = [np.asarray(v) for v in vals if v is not None]
    if op == "Constant":
        return 0  # its value is in the file already
    if op == "ConstantOfShape":
        shape = [int(d) for d in np.asarray(vals[0]).reshape(-1)]
        if any(d < 0 for d in shape):
            raise ValueError(f"shape {shape} has a negative dimension")
        value = n.attrs.get("value")
        item = 4 if value is None else np.asarray(value).dtype.itemsize
        return math.prod(shape) * item
    if op in _BINARY:
        shape: tuple = ()
        for v in present:
            shape = broadcast_shape(shape, v.shape, op)
        return math.prod(shape) * max(v.dtype.itemsize for v in present)
    if op == "Concat":
        return sum(v.size for v in present) * max(v.dtype.itemsize for v in present)
    if op == "Gather":
        data, idx = present[0], present[1]
        axis = int(_a(n, "axis", 0)) % max(data.ndim, 1)
        rest = math.prod(d for i, d in enumerate(data.shape) if i != axis)
        return idx.size * rest * data.dtype.itemsize
    if op == "Cast":
        return present[0].size * np.dtype(_np_dtype(int(_a(n, "to")))).itemsize
    if op == "Dropout":
        return 2 * present[0].nbytes  # the output and its mask
    return sum(v.nbytes for v in present)  # the rest never outgrow their inputs


def fold(n, vals, opset, budget: FoldBudget) -> list:
    """Node ``n`` evaluated on the host (numpy), its size charged to ``budget`` first."""
    budget.charge(n, fold_out_bytes(n, vals, opset))
    return OPS[n.op].fold(n, vals, opset)


OPS: dict[str, OpSpec] = {
    "Conv": OpSpec(_check_conv, None, _lower_conv),
    "ConvTranspose": OpSpec(_check_conv_transpose, None, _lower_conv_transpose),
    "BatchNormalization": OpSpec(_check_bn, None, _lower_bn),
    "Relu": OpSpec(None, _act_fold, _lower_activation),
    "Clip": OpSpec(None, _act_fold, _lower_activation),
    "LeakyRelu": OpSpec(None, _act_fold, _lower_activation),
    "Sigmoid": OpSpec(None, _act_fold, _lower_activation),
    "HardSigmoid": OpSpec(None, _act_fold, _lower_activation),
    "HardSwish": OpSpec(None, _act_fold, _lower_activation),
    "Tanh": OpSpec(None, _act_fold, _lower_activation),
    "Add": OpSpec(None, _fold_binary, _lower_binary),
    "Sub": OpSpec(None, _fold_binary, _lower_binary),
    "Mul": OpSpec(None, _fold_binary, _lower_binary),
    "Div": OpSpec(None, _fold_binary, _lower_binary),
    "Sum": OpSpec(None, _fold_binary, _lower_binary),
    "MaxPool": OpSpec(_check_pool, None, _lower_pool),
    "AveragePool": OpSpec(_check_pool, None, _lower_pool),
    "GlobalAveragePool": OpSpec(None, None, _lower_global_pool),
    "GlobalMaxPool": OpSpec(None, None, _lower_global_pool),
    "Gemm": OpSpec(None, None, _lower_gemm),
    "MatMul": OpSpec(None, None, _lower_matmul),
    "Flatten": OpSpec(None, _fold_flatten, _lower_view),
    "Reshape": OpSpec(None, _fold_reshape, _lower_view),
    "Squeeze": OpSpec(None, _fold_squeeze, _lower_view),
    "Unsqueeze": OpSpec(None, _fold_unsqueeze, _lower_view),
    "Transpose": OpSpec(None, _fold_transpose, _lower_transpose),
    "Concat": OpSpec(None, _fold_concat, _lower_concat),
    "Softmax": OpSpec(None, None, _lower_softmax),
    "LogSoftmax": OpSpec(None, None, _lower_softmax),
    "Dropout": OpSpec(_check_dropout, _fold_identity, _lower_dropout),
    "Identity": OpSpec(None, _fold_identity, _lower_identity),
    "LRN": OpSpec(_check_lrn, None, _lower_lrn),
    "Constant": OpSpec(_check_constant, _fold_constant, None),
    "ConstantOfShape": OpSpec(None, _fold_constant_of_shape, None),
    "Shape": OpSpec(None, _fold_shape, _lower_shape),
    "Gather": OpSpec(None, _fold_gather, _lower_gather),
    "Cast": OpSpec(_check_cast, _fold_cast, _lower_cast),
    "Slice": OpSpec(None, _fold_slice, None),
}
