"""The operator kernels as functions: NCHW tensors as wgc.Buffers (f32 or f16) or numpy arrays
(uploaded as f32); numpy in, numpy out; Buffers in, a new Buffer out (or ``out=``), its kernel
queued as the operators' are."""

from __future__ import annotations

import math

import numpy as np

from .._lazy import enqueue as _enqueue
from ..buffer import Buffer, from_numpy
from ..errors import ArgumentError, ShapeError
from ..kernels.conv.conv import CONV2D, CONV_TRANSPOSE2D, GEMM
from ..kernels.nn.nn import (
    LRN,
    Activation,
    BatchNorm,
    Binary,
    CopyRows,
    GlobalPool,
    Pool,
    Softmax,
    Transpose,
    pool_out_size,
)

_ACT, _BIN, _BN, _POOL, _GPOOL = Activation(), Binary(), BatchNorm(), Pool(), GlobalPool()
_SOFTMAX, _TRANSPOSE, _COPY, _LRN = Softmax(), Transpose(), CopyRows(), LRN()


def _buffers(*xs):
    """(Buffers, whether the result goes back as numpy): numpy arrays are uploaded as f32."""
    host = not isinstance(xs[0], Buffer)
    out = []
    for x in xs:
        if x is None or isinstance(x, Buffer):
            out.append(x)
        else:
            out.append(from_numpy(np.require(np.asarray(x), np.float32, "C")))
    return out, host


def _finish(result: Buffer, host: bool, uploaded):
    if not host:
        return result
    arr = result.to_numpy()
    for b in [*uploaded, result]:
        if b is not None:
            b.free()
    return arr


def _run(kernel, xs, params, out=None):
    bufs, host = _buffers(*xs)
    if host and out is not None:
        raise ArgumentError(f"{kernel.name}: out= takes a Buffer when the inputs are Buffers")
    result = _enqueue(kernel, bufs, out, params)
    return _finish(result, host, [b for b, x in zip(bufs, xs, strict=True)
                                  if not isinstance(x, Buffer)])


def _pair(v, what: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    try:
        a, b = v
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: expected an int or a pair of ints, got {v!r}") from None


def _pads(padding, kernel, stride, dilation, size) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from an int, (ph, pw), (t, l, b, r), "valid" or "same"."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            out = []
            for k, s, d, n in zip(kernel, stride, dilation, size, strict=True):
                total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
                out.append((total // 2, total - total // 2))
            return (out[0][0], out[1][0], out[0][1], out[1][1])
        raise ArgumentError(f"padding: expected an int, pairs, 'same' or 'valid', got "
                            f"{padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return tuple(int(p) for p in padding)
    ph, pw = _pair(padding, "padding")
    return (ph, pw, ph, pw)


def conv2d(x, w, bias=None, *, stride=1, padding=0, dilation=1, groups: int = 1,
           activation=None, out=None):
    """2-D convolution of NCHW ``x`` with ``w`` (K, C/groups, KH, KW), plus ``bias`` (K,),
    then ``activation`` (e.g. "relu", ("clip", 0, 6)). ``padding``: an int, (ph, pw),
    (top, left, bottom, right), "same" or "valid". groups = C is a depthwise convolution."""
    xs, host = _buffers(x, w, bias)
    if xs[2] is None:
        xs[2] = from_numpy(np.zeros(xs[1].shape[0], np.float32 if xs[1].dtype == "f32"
                                    else np.float16))
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if xs[0].ndim != 4 or xs[1].ndim != 4:
        raise ShapeError(f"conv2d: x is {xs[0].shape} and w is {xs[1].shape}; expected "
                         f"(N, C, H, W) and (K, C/groups, KH, KW)")
    pads = _pads(padding, xs[1].shape[2:], stride, dilation, xs[0].shape[2:])
    params = {"strides": stride, "pads": pads, "dilations": dilation, "group": groups,
              "activation": activation}
    result = _enqueue(CONV2D, xs, out, params)
    return _finish(result, host, [b for b, v in zip(xs, (x, w, bias), strict=True)
                                  if not isinstance(v, Buffer)])


def conv_transpose2d(x, w, bias=None, *, stride=1, padding=0, output_padding=0,
                     dilation=1, groups: int = 1, activation=None, out=None):
    """Transposed 2-D convolution of NCHW ``x`` with ``w`` (C, K/groups, KH, KW)."""
    xs, host = _buffers(x, w, bias)
    if xs[2] is None:
        xs[2] = from_numpy(np.zeros(xs[1].shape[1] * groups, np.float32))
    ph, pw = _pair(padding, "padding")
    params = {"strides": _pair(stride, "stride"), "pads": (ph, pw, ph, pw),
              "dilations": _pair(dilation, "dilation"), "group": groups,
              "output_padding": _pair(output_padding, "output_padding"),
              "activation": activation}
    result = _enqueue(CONV_TRANSPOSE2D, xs, out, params)
    return _finish(result, host, [b for b, v in zip(xs, (x, w, bias), strict=True)
                                  if not isinstance(v, Buffer)])


def batch_norm(x, scale, bias, mean, var, *, epsilon: float = 1e-5, activation=None,
               out=None):
    """Batch normalization (inference) over axis 1 of (N, C, ...)."""
    return _run(_BN, [x, scale, bias, mean, var], {"epsilon": epsilon,
                                                    "activation": activation}, out)


def activation(x, name, alpha: float | None = None, beta: float | None = None, out=None):
    """An activation by name: relu, leaky_relu, clip, sigmoid, hard_sigmoid, hard_swish,
    tanh (alpha and beta as ONNX defines them; None: ONNX's defaults)."""
    spec = (name,) + tuple(v for v in (alpha, beta) if v is not None)
    if alpha is None and beta is not None:
        raise ArgumentError("activation: give alpha when you give beta")
    return _run(_ACT, [x], {"activation": spec}, out)


def relu(x, out=None):
    return activation(x, "relu", out=out)


def relu6(x, out=None):
    """min(max(x, 0), 6) (ONNX Clip(0, 6))."""
    return activation(x, "clip", 0.0, 6.0, out=out)


def clip(x, lo=-math.inf, hi=math.inf, out=None):
    return activation(x, "clip", lo, hi, out=out)


def leaky_relu(x, alpha: float = 0.01, out=None):
    return activation(x, "leaky_relu", alpha, out=out)


def sigmoid(x, out=None):
    return activation(x, "sigmoid", out=out)


def hard_sigmoid(x, alpha: float = 0.2, beta: float = 0.5, out=None):
    return activation(x, "hard_sigmoid", alpha, beta, out=out)


def hard_swish(x, out=None):
    return activation(x, "hard_swish", out=out)


def _binary(op):
    def fn(a, b, out=None, activation=None):
        return _run(_BIN, [a, b], {"op": op, "activation": activation}, out)
    fn.__name__ = op
    fn.__doc__ = f"a {op} b with numpy broadcasting (then an optional activation)."
    return fn


add, sub, mul, div = (_binary(op) for op in ("add", "sub", "mul", "div"))


def max_pool2d(x, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               out=None):
    """Max pooling over H and W of (N, C, H, W); ``stride`` defaults to ``kernel``."""
    return _pool(x, "max", kernel, stride, padding, dilation, ceil_mode, False, out)


def avg_pool2d(x, kernel, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = False, out=None):
    """Average pooling over H and W of (N, C, H, W); ``stride`` defaults to ``kernel``."""
    return _pool(x, "avg", kernel, stride, padding, 1, ceil_mode, count_include_pad, out)


def _pool(x, mode, kernel, stride, padding, dilation, ceil_mode, incl, out):
    k = _pair(kernel, "kernel")
    s = k if stride is None else _pair(stride, "stride")
    d = _pair(dilation, "dilation")
    shape = x.shape
    if len(shape) != 4:
        raise ShapeError(f"{mode}_pool2d: x is {shape}; expected (N, C, H, W)")
    pads = _pads(padding, k, s, d, shape[2:])
    return _run(_POOL, [x], {"mode": mode, "kernel": k, "strides": s, "pads": pads,
                             "dilations": d, "ceil_mode": ceil_mode,
                             "count_include_pad": incl}, out)


def global_avg_pool(x, out=None):
    """Mean over every axis after the first two: (N, C, ...) -> (N, C, 1, ...)."""
    return _run(_GPOOL, [x], {"mode": "avg"}, out)


def global_max_pool(x, out=None):
    return _run(_GPOOL, [x], {"mode": "max"}, out)


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 1.0, trans_a: bool = False,
         trans_b: bool = False, activation=None, out=None):
    """alpha · op(a) · op(b) + beta · c (c broadcast; leading axes batched as numpy.matmul)."""
    if c is None:
        c, beta = np.zeros(1, np.float32), 0.0
        if isinstance(a, Buffer):
            c = from_numpy(c.astype(np.float16) if a.dtype == "f16" else c)
    return _run(GEMM, [a, b, c], {"alpha": alpha, "beta": beta, "trans_a": trans_a,
                                  "trans_b": trans_b, "activation": activation}, out)


def matmul(a, b, out=None):
    """numpy.matmul of tensors of rank >= 2 (leading axes broadcast)."""
    return gemm(a, b, out=out)


def softmax(x, axis: int = -1, out=None):
    return _run(_SOFTMAX, [x], {"axis": axis}, out)


def log_softmax(x, axis: int = -1, out=None):
    return _run(_SOFTMAX, [x], {"axis": axis, "log": True}, out)


def transpose(x, perm=None, out=None):
    """numpy.transpose(x, perm)."""
    return _run(_TRANSPOSE, [x], {"perm": perm}, out)


def lrn(x, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, out=None):
    """Local response normalization across channels (ONNX LRN)."""
    return _run(_LRN, [x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias}, out)


def reshape(x, shape):
    """A copy of ``x`` with a new shape (-1 infers one axis), as a new Buffer or array."""
    if not isinstance(x, Buffer):
        return np.asarray(x).reshape(shape)
    shape = tuple(int(v) for v in shape)
    if shape.count(-1) == 1:
        rest = math.prod(v for v in shape if v != -1)
        shape = tuple(x.size // rest if v == -1 else v for v in shape) if rest else shape
    if math.prod(shape) != x.size:
        raise ShapeError(f"reshape: x is {x.shape}; cannot reshape {x.size} elements to "
                         f"{shape}")
    from ..buffer import empty

    out = empty(shape, x.dtype, label="reshape")
    return _enqueue(_COPY, [x], out, {"shapes": (x.shape, shape)})


def flatten(x, axis: int = 1):
    """(prod(shape[:axis]), prod(shape[axis:])) (ONNX Flatten)."""
    shape = x.shape
    axis = axis + len(shape) if axis < 0 else axis
    return reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def concat(xs, axis: int = 1):
    """numpy.concatenate along ``axis`` (Buffers of one dtype, or numpy arrays)."""
    if not isinstance(xs, (list, tuple)) or not xs:
        raise ArgumentError("concat: expected a non-empty list of tensors")
    bufs, host = _buffers(*xs)
    r = bufs[0].ndim
    axis %= r
    for b in bufs:
        if b.ndim != r or any(b.shape[i] != bufs[0].shape[i] for i in range(r) if i != axis):
            raise ShapeError(f"concat: shapes {[b.shape for b in bufs]} differ outside axis "
                             f"{axis}")
    total = sum(b.shape[axis] for b in bufs)
    shape = bufs[0].shape[:axis] + (total,) + bufs[0].shape[axis + 1:]
    from ..buffer import empty

    out = empty(shape, bufs[0].dtype, label="concat")
    inner, rows, off = math.prod(shape[axis + 1:]), math.prod(shape[:axis]), 0
    for b in bufs:
        if b.size:
            _enqueue(_COPY, [b], out, {"rows": rows, "dst_stride": total * inner,
                                         "dst_offset": off * inner})
        off += b.shape[axis]
    return _finish(out, host, [b for b, x in zip(bufs, xs, strict=True)
                               if not isinstance(x, Buffer)])


__all__ = ["conv2d", "conv_transpose2d", "batch_norm", "activation", "relu", "relu6", "clip",
           "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish", "add", "sub", "mul", "div",
           "max_pool2d", "avg_pool2d", "global_avg_pool", "global_max_pool", "gemm", "matmul",
           "softmax", "log_softmax", "transpose", "lrn", "reshape", "flatten", "concat",
           "pool_out_size"]
