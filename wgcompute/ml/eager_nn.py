"""The interpreter's neural-network operators: the activations beyond the planner's (Gelu, Erf,
Elu, Selu, Softplus, PRelu, ...), HardMax, the normalizations (Layer, Group, Instance,
MeanVariance, Lp) and Attention, on the array namespace's functions and the op table."""

from __future__ import annotations

import math

import numpy as np

from .. import array_api as xp
from .._lazy import enqueue
from ..array import astype
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..kernels.elementwise.arrayops import array_op
from ..kernels.nn.layer_norm import LAYER_NORM
from .eager import eager
from .eager_args import back, const, empty, floats, host_value, scalar, work
from .eager_attention import run_attention

# ONNX operators that are one op-table row of their own (the array namespace has no erf)
ONNX_ROWS = {"Erf": "erf"}


def row(name: str, x: Buffer) -> Buffer:
    """Op-table row ``name`` (one operand) of ``x``, in x's dtype (erf has no function in the
    array namespace: it is ONNX's)."""
    from ..array_api._helpers import new

    out = new(x.shape, DTYPES[x.dtype], x.device, name)
    return enqueue(array_op(name, 1), [x], out) if out.size else out


# -- activations -----------------------------------------------------------------------------
def _softplus(x: Buffer) -> Buffer:
    """log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))."""
    return xp.maximum(x, 0.0) + xp.log1p(xp.exp(-xp.abs(x)))


def _gelu(x: Buffer, approximate: str) -> Buffer:
    if approximate == "tanh":
        inner = (x + 0.044715 * x * x * x) * math.sqrt(2 / math.pi)
        return 0.5 * x * (1.0 + xp.tanh(inner))
    return 0.5 * x * (1.0 + row("erf", x * (1 / math.sqrt(2))))


def _check_gelu(node, opset):
    approx = node.attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        return f"approximate is {approx!r}; expected 'none' or 'tanh'"
    return None


_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _selu(x: Buffer, a) -> Buffer:
    alpha, gamma = float(a.get("alpha", _SELU_ALPHA)), float(a.get("gamma", _SELU_GAMMA))
    return xp.where(x > 0.0, x * gamma, xp.expm1(x) * (alpha * gamma))


def _celu(x: Buffer, a) -> Buffer:
    alpha = float(a.get("alpha", 1.0))
    return xp.maximum(x, 0.0) + xp.minimum(xp.expm1(x * (1 / alpha)) * alpha, 0.0)


# op -> fn(x, attributes): the activations beyond the op table's rows
_ACTIVATIONS = {
    "Gelu": lambda x, a: _gelu(x, a.get("approximate", "none")),
    "Softplus": lambda x, a: _softplus(x),
    "Softsign": lambda x, a: x / (1.0 + xp.abs(x)),
    "Elu": lambda x, a: xp.where(x < 0.0, xp.expm1(x) * float(a.get("alpha", 1.0)), x),
    "Selu": _selu,
    "Celu": _celu,
    "ThresholdedRelu": lambda x, a: xp.where(x > float(a.get("alpha", 1.0)), x,
                                             xp.zeros_like(x)),
    "Mish": lambda x, a: x * xp.tanh(_softplus(x)),
    "Swish": lambda x, a: x * row("sigmoid", x * float(a.get("alpha", 1.0))),
}


def _activation(op: str, x: Buffer, a) -> Buffer:
    """The activation ``op`` of ``x`` with its attributes ``a`` (a dict)."""
    if op in ONNX_ROWS:
        return row(ONNX_ROWS[op], x)
    return _ACTIVATIONS[op](x, a)


@eager(*ONNX_ROWS, *_ACTIVATIONS, check=_check_gelu)
def _elementwise(ctx, node, ins):
    x = floats(ctx, node, ins[0])
    if x.size == 0:
        return [empty(x.shape, x.dtype, x.device)]
    if ctx.half and node.op in ONNX_ROWS:  # the row takes float16 (computed in float32)
        return [row(ONNX_ROWS[node.op], x)]
    return [back(_activation(node.op, work(x), node.attrs), x)]


@eager("SwiGLU")
def _swiglu(ctx, node, ins):
    a, b = floats(ctx, node, ins[0], "A"), floats(ctx, node, ins[1], "B")
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ctx.fail(node, f"A is {a.dtype} {a.shape} and B {b.dtype} {b.shape}; they must "
                             f"match (SwiGLU does not broadcast)")
    if a.size == 0:
        return [empty(a.shape, a.dtype, a.device)]
    gate = _activation("Swish", work(a), node.attrs)
    return [back(gate * work(b), a)]


@eager("Shrink")
def _shrink(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    lambd, bias = float(ctx.attr(node, "lambd", 0.5)), float(ctx.attr(node, "bias", 0.0))
    if x.dtype.kind in "iu":  # the integer types compare and subtract in their own type
        w = astype(x, "f64" if ctx.device.has("shader-f64") else "f32")
        y = _shrunk(w, lambd, bias)
        return [astype(y, x.dtype, rounding="round", casting="unsafe")]
    return [back(_shrunk(work(x), lambd, bias), x)]


def _shrunk(x: Buffer, lambd: float, bias: float) -> Buffer:
    zero = xp.zeros_like(x)
    return xp.where(x < -lambd, x + bias, xp.where(x > lambd, x - bias, zero))


@eager("PRelu")
def _prelu(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    slope = ctx.buffer(ins[1], "slope")
    if slope.dtype != x.dtype:
        raise ctx.fail(node, f"slope is {slope.dtype} and X {x.dtype}; they must match")
    if ctx.opset < 7 and slope.ndim == 1 and x.ndim > 2 and slope.size == x.shape[1]:
        slope = xp.reshape(slope, (slope.size,) + (1,) * (x.ndim - 2))  # per channel
    try:
        np.broadcast_shapes(slope.shape, x.shape)
    except ValueError:
        raise ctx.fail(node, f"slope {slope.shape} does not broadcast to X {x.shape}") \
            from None
    return [xp.where(x < const(ctx, 0, x.dtype), x * slope, x)]


@eager("Hardmax")
def _hardmax(ctx, node, ins):
    x = floats(ctx, node, ins[0], "input")
    axis = int(ctx.attr(node, "axis", -1 if ctx.opset >= 13 else 1))
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise ctx.fail(node, f"axis {axis} is out of range for input {x.shape}")
    axis %= max(x.ndim, 1)
    shape = x.shape
    if ctx.opset < 13:  # the input taken as a matrix (before axis, from axis)
        x = xp.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        axis = 1
    hot = _one_hot_max(work(x), axis)
    return [xp.reshape(back(hot, x), shape)]


def _one_hot_max(x: Buffer, axis: int) -> Buffer:
    """1 at the first largest element along ``axis``, 0 elsewhere (x's dtype)."""
    if x.size == 0:
        return xp.zeros_like(x)
    first = xp.argmax(x, axis=axis, keepdims=True)
    n = x.shape[axis]
    pos = xp.reshape(xp.arange(n, dtype=xp.int32, device=x.device),
                     tuple(n if i == axis else 1 for i in range(x.ndim)))
    return astype(xp.equal(first, pos), x.dtype)


# -- normalizations --------------------------------------------------------------------------
def moments(x: Buffer, axes: tuple[int, ...]) -> tuple[Buffer, Buffer, Buffer]:
    """(mean, x - mean, variance) over ``axes``, kept as size-1 axes (population variance)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    d = x - mean
    return mean, d, xp.mean(d * d, axis=axes, keepdims=True)


def _rsqrt(v: Buffer, eps: float) -> Buffer:
    return 1.0 / xp.sqrt(v + eps)


def _axis(ctx, node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ctx.fail(node, f"axis {axis} is out of range for a rank-{rank} input")
    return axis % rank


def _affine(ctx, node, ins, x0: Buffer, inner: tuple):
    """Scale and B (None if omitted) in x's dtype, each broadcast to the normalized shape."""
    out = []
    for i, what in ((1, "Scale"), (2, "B")):
        if len(ins) <= i or ins[i] is None:
            out.append(None)
            continue
        p = _same(ctx.buffer(ins[i], what), x0)
        try:
            np.broadcast_to(np.empty(p.shape, dtype=bool), inner)
        except ValueError:
            raise ctx.fail(node, f"{what} {p.shape} does not broadcast to the normalized "
                                 f"shape {inner}") from None
        out.append(xp.broadcast_to(p, inner) if p.shape != inner else p)
    return out


def _row_norm(x0: Buffer, inner: tuple, scale, bias, eps: float, center: bool) -> Buffer:
    """Rows of ``inner``'s size normalized, scaled and shifted: one kernel."""
    out = empty(x0.shape, x0.dtype, x0.device)
    n = math.prod(inner)
    if x0.size == 0 or n == 0:
        return out
    return enqueue(LAYER_NORM, [x0, scale, scale if bias is None else bias], out,
                      {"n": n, "eps": eps, "bias": bias is not None, "center": center})


@eager("LayerNormalization", "RMSNormalization")
def _layer_norm(ctx, node, ins):
    x0 = floats(ctx, node, ins[0])
    axis = _axis(ctx, node, int(ctx.attr(node, "axis", -1)), x0.ndim)
    eps = float(ctx.attr(node, "epsilon", 1e-5))
    inner = x0.shape[axis:]
    scale, bias = _affine(ctx, node, ins, x0, inner)
    center = node.op == "LayerNormalization"
    if not any(node.outputs[1:]):  # Y alone: one kernel
        return [_row_norm(x0, inner, scale, bias, eps, center)]
    x = work(x0)
    mean, d, var = moments(x, tuple(range(axis, x.ndim)))
    inv = _rsqrt(var, eps)
    y = d * inv * work(scale)
    if bias is not None:
        y = y + work(bias)
    return [back(y, x0), back(mean, x0), back(inv, x0)]


def _same(p: Buffer, x: Buffer) -> Buffer:
    return astype(p, x.dtype, casting="unsafe") if p.dtype != x.dtype else p


def _channel_norm(ctx, node, x: Buffer, groups: int, scale, bias, eps: float) -> Buffer:
    """(N, C, ...) normalized over each group of C / groups channels (and their elements),
    then scaled and shifted per channel: one kernel."""
    scale, bias = (_same(ctx.buffer(v, what), x) for v, what in ((scale, "scale"),
                                                                  (bias, "bias")))
    c = x.shape[1]
    if scale.size != c or bias.size != c:
        raise ctx.fail(node, f"scale {scale.shape} and bias {bias.shape} must hold one value "
                             f"per channel ({c})")
    out = empty(x.shape, x.dtype, x.device)
    spatial = math.prod(x.shape[2:])
    if out.size == 0:
        return out
    return enqueue(LAYER_NORM, [x, scale, bias], out, {
        "n": spatial * c // groups, "eps": eps, "groups": groups, "cpg": c // groups,
        "spatial": spatial})


@eager("InstanceNormalization")
def _instance_norm(ctx, node, ins):
    x = floats(ctx, node, ins[0], "input")
    if x.ndim < 3:
        raise ctx.fail(node, f"input is {x.shape}; expected (N, C, D1, ...)")
    eps = float(ctx.attr(node, "epsilon", 1e-5))
    return [_channel_norm(ctx, node, x, x.shape[1], ins[1], ins[2], eps)]


@eager("GroupNormalization")
def _group_norm(ctx, node, ins):
    x = floats(ctx, node, ins[0])
    groups = int(ctx.attr(node, "num_groups"))
    c = x.shape[1] if x.ndim > 1 else 0
    if x.ndim < 3 or groups <= 0 or c % groups:
        raise ctx.fail(node, f"X is {x.shape} and num_groups {groups}; expected (N, C, ...) "
                             f"with C a multiple of num_groups")
    eps = float(ctx.attr(node, "epsilon", 1e-5))
    scale, bias = ins[1], ins[2]
    if ctx.opset < 21:  # one scale and bias per group: repeated for its channels
        scale, bias = (xp.repeat(ctx.buffer(v), c // groups) for v in (scale, bias))
    return [_channel_norm(ctx, node, x, groups, scale, bias, eps)]


@eager("MeanVarianceNormalization")
def _mvn(ctx, node, ins):
    x0 = floats(ctx, node, ins[0])
    x = work(x0)
    axes = tuple(sorted(_axis(ctx, node, int(a), x.ndim)
                        for a in ctx.attr(node, "axes", [0, 2, 3])))
    mean = xp.mean(x, axis=axes, keepdims=True)
    var = xp.mean(x * x, axis=axes, keepdims=True) - mean * mean
    return [back((x - mean) / (xp.sqrt(var) + 1e-9), x0)]


@eager("LpNormalization")
def _lp_norm(ctx, node, ins):
    x0 = floats(ctx, node, ins[0], "input")
    x = work(x0)
    axis = _axis(ctx, node, int(ctx.attr(node, "axis", -1)), x.ndim)
    p = int(ctx.attr(node, "p", 2))
    if p == 1:
        norm = xp.sum(xp.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True))
    else:
        raise ctx.fail(node, f"p is {p}; expected 1 or 2")
    one = xp.ones_like(norm)
    return [back(x / xp.where(norm == 0.0, one, norm), x0)]


# -- DFT -------------------------------------------------------------------------------------
DFT_MATRIX_ELEMENTS = 1 << 22  # past this a DFT takes the namespace's FFT (float32)


def _dft_matrices(n_in: int, n: int, inverse: bool, onesided: bool):
    """(cos part, sin part) of the DFT as a product: (n_in, n_out) float64 matrices such that
    out = re @ C - im @ S (real part) and re @ S + im @ C (imaginary part); irfft (inverse,
    onesided) folds the Hermitian half's weights into C and S and gives a real result."""
    k = np.arange(n_in, dtype=np.float64)[:, None]
    if inverse and onesided:  # bins 0..n//2 of a real signal's spectrum
        t = np.arange(n, dtype=np.float64)[None, :]
        w = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) / n
        w = np.where(k <= n // 2, w, 0.0)
        return w * np.cos(2 * np.pi * k * t / n), w * np.sin(2 * np.pi * k * t / n)
    m = n // 2 + 1 if onesided else n
    j = np.arange(m, dtype=np.float64)[None, :]
    phase = 2 * np.pi * ((k * j) % n) / n  # (reduced first: exact angles for large k·j)
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / n if inverse else 1.0
    return scale * np.cos(phase), scale * sign * np.sin(phase)


def _dft_product(ctx, x: Buffer, axis: int, n: int, inverse: bool, onesided: bool) -> Buffer:
    """The DFT of (..., 1 | 2) x along ``axis`` as float64 matrix products (exact to the
    output's rounding), (..., 1 | 2) out."""
    x = xp.moveaxis(astype(x, "f64"), axis, -2)  # (..., n_in, 1 | 2)
    n_in = x.shape[-2] if inverse and onesided else min(x.shape[-2], n)
    x = xp.asarray(x[..., :n_in, :], copy=True)
    cos, sin = (ctx.buffer(m) for m in _dft_matrices(n_in, n, inverse, onesided))
    re = x[..., 0]
    parts = [xp.matmul(re, cos), xp.matmul(re, sin)]
    if x.shape[-1] == 2:
        im = x[..., 1]
        parts = [parts[0] - xp.matmul(im, sin), parts[1] + xp.matmul(im, cos)]
    if inverse and onesided:
        parts = parts[:1]  # a real signal
    return xp.moveaxis(xp.stack(parts, axis=-1), -2, axis)


def _complex(x: Buffer) -> Buffer:
    """(..., 2) float32 as complex64 (...), or (..., 1) real as complex64 with 0 imaginary."""
    if x.shape[-1] == 1:
        x = xp.concat([x, xp.zeros_like(x)], axis=-1)
    return xp.reshape(xp.reshape(x, (x.size,)).view("c64"), x.shape[:-1])


def _dft_fft(x: Buffer, axis: int, n: int, inverse: bool, onesided: bool) -> Buffer:
    """The DFT by the namespace's FFT, in float32 (complex64)."""
    x = x if x.dtype == "f32" else astype(x, "f32", casting="unsafe")
    if inverse and onesided:
        return xp.expand_dims(xp.fft.irfft(_complex(x), n=n, axis=axis), axis=-1)
    z = (xp.fft.ifft if inverse else xp.fft.fft)(_complex(x), n=n, axis=axis)
    if onesided:
        z = xp.asarray(z[(slice(None),) * axis + (slice(0, n // 2 + 1),)], copy=True)
    return xp.reshape(xp.reshape(z, (z.size,)).view("f32"), z.shape + (2,))


@eager("DFT")
def _dft(ctx, node, ins):
    x0 = floats(ctx, node, ins[0], "input")
    axis = ctx.attr(node, "axis", 1 if ctx.opset < 20 else -2)
    if ctx.opset >= 20 and len(ins) > 2 and ins[2] is not None:
        axis = int(scalar(ctx, node, ins[2], "axis"))
    if x0.ndim < 2 or x0.shape[-1] not in (1, 2) or not -x0.ndim <= axis < x0.ndim or \
            axis % x0.ndim == x0.ndim - 1:
        raise ctx.fail(node, f"input is {x0.shape} and axis {axis}; expected (..., 1) real or "
                             f"(..., 2) complex values and an axis before the last")
    axis %= x0.ndim
    inverse, onesided = bool(ctx.attr(node, "inverse", 0)), bool(ctx.attr(node, "onesided", 0))
    n = x0.shape[axis]
    if len(ins) > 1 and ins[1] is not None:
        n = int(scalar(ctx, node, ins[1], "dft_length"))
    elif inverse and onesided:
        n = 2 * (x0.shape[axis] - 1)
    if n <= 0:
        raise ctx.fail(node, f"the DFT's length is {n}; expected > 0")
    if ctx.device.has("shader-f64") and n * x0.shape[axis] <= DFT_MATRIX_ELEMENTS:
        return [back(_dft_product(ctx, x0, axis, n, inverse, onesided), x0)]
    return [back(_dft_fft(x0, axis, n, inverse, onesided), x0)]


# -- attention -------------------------------------------------------------------------------
def _rotary_caches(ctx, node, ins, b: int, s: int, half: int):
    """cos and sin (B, S, 1, half): the caches at position_ids, or as given."""
    caches = [work(floats(ctx, node, ins[i], w)) for i, w in ((1, "cos_cache"),
                                                              (2, "sin_cache"))]
    pos = ins[3] if len(ins) > 3 else None
    out = []
    for c in caches:
        if pos is not None:
            p = ctx.buffer(pos, "position_ids")
            c = xp.reshape(xp.take(c, xp.reshape(p, (p.size,)), axis=0), p.shape + (half,))
        if c.shape != (b, s, half):
            raise ctx.fail(node, f"the caches give {c.shape} where (batch, sequence, "
                                 f"rotary_embedding_dim / 2) = {(b, s, half)} is needed")
        out.append(xp.expand_dims(c, axis=2))
    return out


@eager("RotaryEmbedding")
def _rotary(ctx, node, ins):
    x0 = floats(ctx, node, ins[0])
    x = work(x0)
    if x.ndim == 4:  # (B, H, S, D) -> (B, S, H, D)
        x = xp.permute_dims(x, (0, 2, 1, 3))
    elif x.ndim == 3 and ctx.attr(node, "num_heads") and \
            x.shape[2] % int(ctx.attr(node, "num_heads")) == 0:
        heads = int(ctx.attr(node, "num_heads"))
        x = xp.reshape(x, x.shape[:2] + (heads, x.shape[2] // heads))
    else:
        raise ctx.fail(node, f"X is {x0.shape}; expected (B, H, S, D), or (B, S, H·D) with "
                             f"num_heads dividing its last axis")
    d = x.shape[3]
    r = int(ctx.attr(node, "rotary_embedding_dim", 0) or d)
    if r % 2 or r > d:
        raise ctx.fail(node, f"rotary_embedding_dim {r} must be even and at most {d}")
    cos, sin = _rotary_caches(ctx, node, ins, x.shape[0], x.shape[1], r // 2)
    interleaved = bool(ctx.attr(node, "interleaved", 0))
    parts = (x[..., 0:r:2], x[..., 1:r:2]) if interleaved else (x[..., :r // 2],
                                                                 x[..., r // 2:r])
    x1, x2 = (xp.asarray(v, copy=True) for v in parts)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rot = xp.reshape(xp.stack([real, imag], axis=-1), x.shape[:3] + (r,)) if interleaved \
        else xp.concat([real, imag], axis=-1)
    y = xp.concat([rot, xp.asarray(x[..., r:], copy=True)], axis=-1) if r < d else rot
    y = xp.permute_dims(y, (0, 2, 1, 3)) if x0.ndim == 4 else xp.reshape(y, x0.shape)
    return [back(y, x0)]



def _heads(x: Buffer, heads: int) -> Buffer:
    """(B, S, heads·D) -> (B, heads, S, D)."""
    b, s, hidden = x.shape
    return xp.permute_dims(xp.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _host_bias(q: int, kv: int, offset, left: int, right: int, causal: bool):
    """The causal and sliding-window parts of the bias (0 or -inf), on the host: (q, kv), or
    (B, 1, q, kv) for per-batch offsets; None where neither applies."""
    if not causal and left < 0 and right < 0:
        return None
    off = np.asarray(offset).reshape(-1, 1, 1) if np.ndim(offset) else int(offset)
    diff = np.arange(q).reshape(q, 1) + off - np.arange(kv).reshape(1, kv)
    allowed = np.ones(np.shape(diff), dtype=bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    bias = np.where(allowed, np.float32(0), np.float32(-np.inf))
    return bias.reshape(bias.shape[0], 1, q, kv) if bias.ndim == 3 else bias


def _mask_bias(ctx, node, mask, kv: int, dt):
    """attn_mask as an additive bias of dtype ``dt`` (bool: 0 or -inf), its last axis padded to
    ``kv`` (with -inf: keys past the mask are not attended)."""
    m = ctx.buffer(mask, "attn_mask")
    if m.dtype.kind == "b":
        m = xp.where(m, xp.zeros((), dtype=dt, device=m.device),
                     xp.full((), -math.inf, dtype=dt, device=m.device))
    elif m.dtype != dt:
        m = astype(m, dt, casting="unsafe")
    pad = kv - m.shape[-1]
    if pad > 0:
        fill = xp.full(m.shape[:-1] + (pad,), -math.inf, dtype=dt, device=m.device)
        m = xp.concat([m, fill], axis=-1)
    elif pad < 0:
        raise ctx.fail(node, f"attn_mask has {m.shape[-1]} keys, more than the {kv} of K")
    return m


def _softmax_rows(x: Buffer) -> Buffer:
    """Softmax over the last axis; a row of -inf gives zeros (no key to attend)."""
    m = xp.max(x, axis=-1, keepdims=True)
    zero = xp.zeros((), dtype=x.dtype, device=x.device)
    e = xp.exp(x - xp.where(m == -math.inf, zero, m))
    s = xp.sum(e, axis=-1, keepdims=True)
    return e / xp.where(s == 0.0, xp.ones((), dtype=x.dtype, device=x.device), s)


def _check_attention(node, opset):
    mode = int(node.attrs.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode is {mode}; expected 0, 1, 2 or 3"
    return None


def _qkv(ctx, node, ins):
    """Q, K, V as (B, heads, S, D) in the work dtype, and whether they came as 3-D."""
    q0, k0, v0 = (floats(ctx, node, ins[i], w) for i, w in enumerate(("Q", "K", "V")))
    if not q0.ndim == k0.ndim == v0.ndim or q0.ndim not in (3, 4):
        raise ctx.fail(node, f"Q {q0.shape}, K {k0.shape} and V {v0.shape} must all be 3-D "
                             f"or all 4-D")
    q, k, v = (work(t) for t in (q0, k0, v0))
    if q.ndim == 3:
        qh, kvh = ctx.attr(node, "q_num_heads"), ctx.attr(node, "kv_num_heads")
        if not qh or not kvh or q.shape[2] % qh or k.shape[2] % kvh or v.shape[2] % kvh:
            raise ctx.fail(node, f"3-D Q {q.shape}, K {k.shape}, V {v.shape} need "
                                 f"q_num_heads and kv_num_heads dividing their last axes")
        q, k, v = _heads(q, int(qh)), _heads(k, int(kvh)), _heads(v, int(kvh))
    return q0, q, k, v


def _opt(ins, i):
    return ins[i] if len(ins) > i else None


@eager("Attention", check=_check_attention)
def _attention(ctx, node, ins):
    q0, q, k, v = _qkv(ctx, node, ins)
    past_k, past_v, nonpad = _opt(ins, 4), _opt(ins, 5), _opt(ins, 6)
    if (past_k is None) != (past_v is None) or (nonpad is not None and past_k is not None):
        raise ctx.fail(node, "past_key and past_value come together, and not with "
                             "nonpad_kv_seqlen")
    if past_k is not None:
        k = xp.concat([work(ctx.buffer(past_k, "past_key")), k], axis=2)
        v = xp.concat([work(ctx.buffer(past_v, "past_value")), v], axis=2)
    present = (back(k, q0), back(v, q0))
    if q.shape[1] != k.shape[1]:
        if q.shape[1] % k.shape[1] or k.shape[1] != v.shape[1]:
            raise ctx.fail(node, f"{q.shape[1]} query heads do not group over {k.shape[1]} "
                                 f"key/value heads")
    sq, skv = q.shape[2], k.shape[2]
    scale = ctx.attr(node, "scale")
    scale = float(scale) if scale is not None else 1 / math.sqrt(q.shape[3])
    softcap = float(ctx.attr(node, "softcap", 0.0) or 0.0)
    if softcap <= 0 and not any(node.outputs[3:4]):  # Y (and the caches) alone: one kernel
        bias = _attention_bias(ctx, node, ins, past_k, nonpad, sq, skv, q.dtype)
        y = run_attention(q, k, v, bias, scale, "masked")  # (grouped heads as they are)
        if y is not None:
            return _attention_outputs(node, q0, y, present, None)
    if q.shape[1] != k.shape[1]:
        k, v = (xp.repeat(t, q.shape[1] // k.shape[1], axis=1) for t in (k, v))
    root = math.sqrt(scale)
    qk = xp.matmul(q * root, xp.matrix_transpose(k * root))
    if softcap > 0:
        qk = xp.tanh(qk * (1 / softcap)) * softcap
    bias = _attention_bias(ctx, node, ins, past_k, nonpad, sq, skv, qk.dtype)
    with_bias = qk if bias is None else qk + bias
    mode = int(ctx.attr(node, "qk_matmul_output_mode", 0))
    probs = _softmax_rows(with_bias)
    if bias is not None:  # rows with no key to attend give 0 (decided on the bias)
        masked = xp.max(bias, axis=-1, keepdims=True) == -math.inf
        probs = xp.where(masked, xp.zeros((), dtype=probs.dtype, device=probs.device), probs)
    qk_out = {2: with_bias, 3: probs}.get(mode, qk)
    return _attention_outputs(node, q0, xp.matmul(probs, v), present, qk_out)


def _attention_outputs(node, q0: Buffer, y: Buffer, present: tuple, qk_out) -> list:
    """Attention's outputs: Y (back to 3-D where Q came so), the caches, the scores."""
    if q0.ndim == 3:
        y = xp.reshape(xp.permute_dims(y, (0, 2, 1, 3)), (y.shape[0], y.shape[2], -1))
    outs = [back(y, q0), *present] + ([back(qk_out, q0)] if qk_out is not None else [])
    return outs[:max(len(node.outputs), 1)]


def _attention_bias(ctx, node, ins, past_k, nonpad, sq: int, skv: int, dt):
    """The additive bias of the scores (None: none): attn_mask, causal and window parts,
    and the padding of an external cache (nonpad_kv_seqlen)."""
    offset = 0
    if past_k is not None:
        offset = ctx.buffer(past_k).shape[2]
    lengths = None
    if nonpad is not None:
        lengths = host_value(ctx, node, nonpad, "nonpad_kv_seqlen").reshape(-1)
        offset = lengths - sq
    host = _host_bias(sq, skv, offset, int(ctx.attr(node, "left_window_size", -1)),
                      int(ctx.attr(node, "right_window_size", -1)),
                      bool(ctx.attr(node, "is_causal", 0)))
    if lengths is not None:
        pad = np.where(np.arange(skv) < lengths[:, None], np.float32(0), np.float32(-np.inf))
        pad = pad.reshape(len(lengths), 1, 1, skv)
        host = pad if host is None else host + pad
    mask = _opt(ins, 3)
    bias = None if mask is None else _mask_bias(ctx, node, mask, skv, dt)
    if host is not None:
        hb = ctx.buffer(host.astype(dt.numpy))
        bias = hb if bias is None else bias + hb
    return bias
