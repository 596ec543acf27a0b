"""Neural-network inference on wgcompute: ONNX models loaded into GPU kernels (load_onnx,
Model, register_model) and the operators as functions on Buffers and numpy arrays."""

from . import eager_planned  # noqa: F401 - installs the planned path into the interpreter
from .functional import (
    activation,
    add,
    avg_pool2d,
    batch_norm,
    clip,
    concat,
    conv2d,
    conv_transpose2d,
    div,
    flatten,
    gemm,
    global_avg_pool,
    global_max_pool,
    hard_sigmoid,
    hard_swish,
    leaky_relu,
    log_softmax,
    lrn,
    matmul,
    max_pool2d,
    mul,
    relu,
    relu6,
    reshape,
    sigmoid,
    softmax,
    sub,
    transpose,
)
from .model import Model, ModelKernel, load_onnx, register_model

__all__ = ["Model", "ModelKernel", "load_onnx", "register_model", "activation", "add",
           "avg_pool2d", "batch_norm", "clip", "concat", "conv2d", "conv_transpose2d", "div",
           "flatten", "gemm", "global_avg_pool", "global_max_pool", "hard_sigmoid",
           "hard_swish", "leaky_relu", "log_softmax", "lrn", "matmul", "max_pool2d", "mul",
           "relu", "relu6", "reshape", "sigmoid", "softmax", "sub", "transpose"]
