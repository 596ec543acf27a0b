"""The interpreter's elementwise operators (math, comparison, logical, bitwise, activations,
casts) and reductions, each the array namespace's function of the same meaning, with ONNX's
broadcasting and type rules."""

from __future__ import annotations

import math

import numpy as np

from .. import array_api as xp
from .._lazy import enqueue
from ..array import astype
from ..array_api._elementwise import ROWS
from ..array_api._helpers import new
from ..buffer import Buffer, buffer
from ..dtypes import DTYPES
from ..errors import ModelError, WgComputeError
from ..kernels.elementwise.arrayops import array_op
from ..kernels.elementwise.optable import OPS
from .eager import ONNX_DTYPES, Context, eager, onnx_type_name, planned
from .ir import Node


def _bufs(ctx: Context, node: Node, ins: list) -> list:
    """The node's present inputs as Buffers (host values uploaded)."""
    return [None if v is None else ctx.buffer(v, f"{node.op} input") for v in ins]


def _wrap(ctx: Context, node: Node, fn, *args, **kwargs):
    """``fn(*args)``, a wgcompute error from it named by the node (the library's reason).
    float16 operands compute in float32 (the array namespace has no float16), and a float
    result comes back to float16: rounded once, as float16 arithmetic rounds."""
    half = any(isinstance(a, Buffer) and a.dtype == "f16" for a in args)
    if half and ctx.half and not kwargs:
        out = _half_row(ctx, node, fn, args)
        if out is not None:
            return out
    if half:
        args = tuple(astype(a, "f32") if isinstance(a, Buffer) and a.dtype == "f16" else a
                     for a in args)
    try:
        out = fn(*args, **kwargs)
    except ModelError:
        raise
    except WgComputeError as e:
        raise ctx.fail(node, str(e)) from e
    if half and isinstance(out, Buffer) and out.dtype == "f32":
        out = astype(out, "f16", casting="unsafe")
    return out


def _half_row(ctx, node, fn, args: tuple) -> Buffer | None:
    """``fn`` (an elementwise function of the namespace) of float16 Buffers of a dtype="f16"
    model by its op table row's kernel, which takes float16: computed in float32 and rounded
    once, as the way through float32 above, but one kernel instead of three, which automatic
    fusion joins to its neighbours. None where ``fn`` is no such row of these operands."""
    name = "div" if fn is _divide else ROWS.get(getattr(fn, "__name__", ""))
    if name is None or not all(isinstance(a, Buffer) and a.dtype == "f16" for a in args):
        return None
    row = OPS[name]
    if row.arity != len(args) or "f16" not in row.accepts():
        return None
    k = array_op(name, len(args))
    try:
        shape, _ = k.output_spec(list(args), {})
    except WgComputeError as e:
        raise ctx.fail(node, str(e)) from e
    out = new(tuple(shape), DTYPES[row.out_dtype("f16")], args[0].device, name)
    return enqueue(k, list(args), out) if out.size else out


# -- elementwise: one input ------------------------------------------------------------------
_UNARY = {"Abs": xp.abs, "Neg": xp.negative, "Reciprocal": xp.reciprocal, "Floor": xp.floor,
          "Ceil": xp.ceil, "Round": xp.round, "Sign": xp.sign, "Exp": xp.exp, "Log": xp.log,
          "Sqrt": xp.sqrt, "Sin": xp.sin, "Cos": xp.cos, "Tan": xp.tan, "Asin": xp.asin,
          "Acos": xp.acos, "Atan": xp.atan, "Sinh": xp.sinh, "Cosh": xp.cosh,
          "Asinh": xp.asinh, "Acosh": xp.acosh, "Atanh": xp.atanh, "IsNaN": xp.isnan,
          "Not": xp.logical_not, "BitwiseNot": xp.bitwise_invert}


@eager(*_UNARY)
def _unary(ctx, node, ins):
    (x,) = _bufs(ctx, node, ins[:1])
    return [_wrap(ctx, node, _UNARY[node.op], x)]


@eager("IsInf")
def _isinf(ctx, node, ins):
    (x,) = _bufs(ctx, node, ins[:1])
    pos, neg = int(ctx.attr(node, "detect_positive", 1)), int(ctx.attr(node, "detect_negative",
                                                                          1))
    out = _wrap(ctx, node, xp.isinf, x)
    if pos and neg:
        return [out]
    if not pos and not neg:
        return [xp.zeros(x.shape, dtype=xp.bool, device=x.device)]
    side = _wrap(ctx, node, xp.greater if pos else xp.less, x, 0.0)
    return [xp.logical_and(out, side)]


# -- elementwise: two or more inputs, broadcast ------------------------------------------------
def _same_type(ctx, node, a: Buffer, b: Buffer) -> tuple[Buffer, Buffer]:
    if a.dtype != b.dtype:
        raise ctx.fail(node, f"inputs are {a.dtype} and {b.dtype}; ONNX requires one type")
    return a, b


def _trunc_divide(a: Buffer, b: Buffer) -> Buffer:
    """Integer division rounding toward zero (ONNX's, C's), from the floor division."""
    if a.dtype.kind == "u":
        return xp.floor_divide(a, b)
    q = xp.floor_divide(xp.abs(a), xp.abs(b))
    neg = xp.logical_xor(xp.less(a, 0), xp.less(b, 0))
    return xp.where(neg, xp.negative(q), q)


def _divide(a, b):
    return xp.divide(a, b) if a.dtype.kind == "f" else _trunc_divide(a, b)


_BINARY = {"Add": xp.add, "Sub": xp.subtract, "Mul": xp.multiply, "Div": _divide,
           "Equal": xp.equal, "Less": xp.less, "LessOrEqual": xp.less_equal,
           "Greater": xp.greater, "GreaterOrEqual": xp.greater_equal, "And": xp.logical_and,
           "Or": xp.logical_or, "Xor": xp.logical_xor, "BitwiseAnd": xp.bitwise_and,
           "BitwiseOr": xp.bitwise_or, "BitwiseXor": xp.bitwise_xor}


@eager(*_BINARY)
def _binary(ctx, node, ins):
    a, b = _same_type(ctx, node, *_bufs(ctx, node, ins[:2]))
    return [_wrap(ctx, node, _BINARY[node.op], a, b)]


@eager("Pow")
def _pow(ctx, node, ins):
    """x ** y in x's type: an exponent of another type converted to it (a float exponent of an
    integer base: computed in the exponent's float type, then truncated to the base's)."""
    x, y = _bufs(ctx, node, ins[:2])
    if x.dtype == y.dtype:
        out = _wrap(ctx, node, xp.pow, x, y)
    elif x.dtype.kind == "f" or y.dtype.kind != "f":
        out = _wrap(ctx, node, xp.pow, x, astype(y, x.dtype, casting="unsafe"))
    else:
        fx = astype(x, y.dtype, casting="unsafe")
        out = astype(_wrap(ctx, node, xp.pow, fx, y), x.dtype, rounding="trunc",
                     casting="unsafe")
    return [out]


@eager("Mod")
def _mod(ctx, node, ins):
    """fmod=0: the remainder takes the divisor's sign (integers only, as numpy's %);
    fmod=1: the dividend's (C's fmod)."""
    a, b = _same_type(ctx, node, *_bufs(ctx, node, ins[:2]))
    if not int(ctx.attr(node, "fmod", 0)):
        return [_wrap(ctx, node, xp.remainder, a, b)]
    if a.dtype.kind == "u":
        return [_wrap(ctx, node, xp.remainder, a, b)]
    return [_wrap(ctx, node, _fmod, a, b)]


def _fmod(a, b):
    r = xp.remainder(xp.abs(a), xp.abs(b))
    return xp.where(xp.less(a, _scalar(a, 0)), xp.negative(r), r)


@eager("BitShift")
def _bitshift(ctx, node, ins):
    a, b = _same_type(ctx, node, *_bufs(ctx, node, ins[:2]))
    direction = ctx.attr(node, "direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(node, f"direction is {direction!r}; expected 'LEFT' or 'RIGHT'")
    fn = xp.bitwise_left_shift if direction == "LEFT" else xp.bitwise_right_shift
    return [_wrap(ctx, node, fn, a, b)]


_VARIADIC = {"Max": xp.maximum, "Min": xp.minimum, "Sum": xp.add, "Mean": xp.add}


@eager(*_VARIADIC)
def _variadic(ctx, node, ins):
    xs = [v for v in _bufs(ctx, node, ins) if v is not None]
    if not xs:
        raise ctx.fail(node, "needs at least one input")
    out = xs[0]
    for v in xs[1:]:
        out = _wrap(ctx, node, _VARIADIC[node.op], *_same_type(ctx, node, out, v))
    if len(xs) == 1:
        out = xp.asarray(out, copy=True)
    if node.op == "Mean":
        out = _wrap(ctx, node, xp.divide, out, float(len(xs)))
    return [out]


@eager("Where")
def _where(ctx, node, ins):
    c, a, b = _bufs(ctx, node, ins[:3])
    a, b = _same_type(ctx, node, a, b)
    return [_wrap(ctx, node, xp.where, c, a, b)]


# -- activations ------------------------------------------------------------------------------
def _clip_bounds(ctx, node, ins, x: Buffer):
    if ctx.opset < 11:
        lo, hi = ctx.attr(node, "min"), ctx.attr(node, "max")
        return (None if lo is None else float(lo)), (None if hi is None else float(hi))
    bounds = []
    for i in (1, 2):
        v = ins[i] if len(ins) > i else None
        if v is None:
            bounds.append(None)
        elif isinstance(v, np.ndarray):
            bounds.append(v.reshape(-1)[0].item())
        else:
            bounds.append(v)
    return tuple(bounds)


@eager("Clip")
def _clip(ctx, node, ins):
    """float32 / float16: the planned path's kernels; other types: maximum, then minimum."""
    (x,) = _bufs(ctx, node, ins[:1])
    outs = planned(ctx, node, [x, *ins[1:]])
    if outs is not None:
        return outs
    out = x
    for bound, fn in zip(_clip_bounds(ctx, node, ins, x), (xp.maximum, xp.minimum),
                         strict=True):
        if bound is None:
            continue
        if isinstance(bound, Buffer):
            out = _wrap(ctx, node, fn, out, xp.reshape(bound, ()) if bound.size == 1
                        else bound)
        else:
            out = _wrap(ctx, node, fn, out, xp.asarray(np.asarray(bound, x.dtype.numpy),
                                                        device=x.device))
    return [xp.asarray(out, copy=True) if out is x else out]


def _scalar(x: Buffer, v: float) -> Buffer:
    """``v`` as a 0-d Buffer of x's dtype (float16 too, which the namespace lacks)."""
    return buffer(np.asarray(v, dtype=x.dtype.numpy), device=x.device)


def _sigmoid(x):
    return xp.divide(_scalar(x, 1.0), xp.add(xp.exp(xp.negative(x)), _scalar(x, 1.0)))


def _hard_sigmoid(x, alpha, beta):
    y = xp.add(xp.multiply(x, _scalar(x, alpha)), _scalar(x, beta))
    return xp.clip(y, 0.0, 1.0)


_ACTIVATIONS = {
    "Relu": lambda x, n: xp.maximum(x, _scalar(x, 0)),
    "LeakyRelu": lambda x, n: xp.where(xp.less(x, _scalar(x, 0)),
                                       xp.multiply(x, _scalar(x, n.attrs.get("alpha", 0.01))),
                                       x),
    "Sigmoid": lambda x, n: _sigmoid(x),
    "Tanh": lambda x, n: xp.tanh(x),
    "HardSigmoid": lambda x, n: _hard_sigmoid(x, n.attrs.get("alpha", 0.2),
                                              n.attrs.get("beta", 0.5)),
    "HardSwish": lambda x, n: xp.multiply(x, _hard_sigmoid(x, 1.0 / 6.0, 0.5)),
}


@eager(*_ACTIVATIONS)
def _activation(ctx, node, ins):
    """float32 / float16: the planned path's activation kernel (Tanh: the op table's, whose
    relative error stays small near 0); other types: composed."""
    (x,) = _bufs(ctx, node, ins[:1])
    outs = planned(ctx, node, [x]) if node.op != "Tanh" else None
    if outs is not None:
        return outs
    if x.dtype.kind not in "fi" or (x.dtype.kind == "i" and node.op != "Relu"):
        raise ctx.fail(node, f"input is {x.dtype}; {node.op} takes floats"
                             + (" or signed integers" if node.op == "Relu" else ""))
    return [_wrap(ctx, node, _ACTIVATIONS[node.op], x, node)]


# -- softmax ------------------------------------------------------------------------------------
@eager("Softmax", "LogSoftmax")
def _softmax(ctx, node, ins):
    """Along ``axis`` (opset >= 13, default -1); before, the input is taken as 2-D at ``axis``
    (default 1) and normalized over the whole second part. float32 (and a dtype="f16"
    model's float16): the planned path's kernel; other float16 composed, rounded to float16
    after each step as float16 arithmetic (and ONNX's reference) rounds; float64 composed."""
    (x,) = _bufs(ctx, node, ins[:1])
    if x.dtype.kind != "f":
        raise ctx.fail(node, f"input is {x.dtype}; {node.op} takes floats")
    # (an f16 model's float16 too: computed in float32, rounded once)
    outs = planned(ctx, node, [x]) if x.size and (x.dtype == "f32" or ctx.half) else None
    if outs is not None:
        return outs
    r = max(x.ndim, 1)
    old = ctx.opset < 13
    axis = int(ctx.attr(node, "axis", 1 if old else -1))
    if not -r <= axis < r:
        raise ctx.fail(node, f"axis {axis} is out of range for a {x.ndim}-D input")
    axis %= r
    shape = x.shape
    if old:
        x = xp.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        axis = 1
    m = _wrap(ctx, node, xp.max, x, axis=axis, keepdims=True) if x.size else x
    d = _wrap(ctx, node, xp.subtract, x, m)
    e = _wrap(ctx, node, xp.exp, d)
    s = _wrap(ctx, node, xp.sum, e, axis=axis, keepdims=True)
    out = _wrap(ctx, node, xp.subtract, d, _wrap(ctx, node, xp.log, s)) \
        if node.op == "LogSoftmax" else _wrap(ctx, node, xp.divide, e, s)
    return [xp.reshape(out, shape) if old else out]


# -- casts -------------------------------------------------------------------------------------
def _cast(ctx, node, x, dt):
    if x.dtype == dt:
        return xp.asarray(x, copy=True)
    if dt.kind == "b":
        return _wrap(ctx, node, xp.not_equal, x, _scalar(x, 0)) if x.dtype.kind != "b" else x
    rounding = "trunc" if dt.kind in "iu" and x.dtype.kind == "f" else None
    return _wrap(ctx, node, astype, x, dt, rounding=rounding, casting="unsafe")


def _check_cast(node, opset):
    to = node.attrs.get("to")
    if to is None:
        return "attribute 'to' is required"
    if not ONNX_DTYPES.get(int(to)):
        return (f"a cast to {onnx_type_name(int(to))}: the type does not exist in wgcompute "
                f"(it has {', '.join(DTYPES)})")
    return None


@eager("Cast", check=_check_cast)
def _cast_node(ctx, node, ins):
    to = int(ctx.attr(node, "to"))
    dt = ctx.onnx_dtype(to, f"{node.op}'s 'to'")  # (FLOAT: float16 in an f16 model)
    (x,) = _bufs(ctx, node, ins[:1])
    return [_cast(ctx, node, x, dt)]


@eager("CastLike")
def _cast_like(ctx, node, ins):
    (x,) = _bufs(ctx, node, ins[:1])
    dt = ctx.dtype(ins[1])
    return [_cast(ctx, node, x, dt)]


@eager("Size")
def _size(ctx, node, ins):
    v = ins[0]
    return [np.asarray(v.size if v is not None else 0, dtype=np.int64)]


# -- reductions --------------------------------------------------------------------------------
def _reduce_axes(ctx, node, ins, ndim):
    """The axes to reduce (a tuple), or () for none (noop_with_empty_axes)."""
    takes_input = ctx.opset >= (13 if node.op == "ReduceSum" else 18)
    if takes_input:
        v = ins[1] if len(ins) > 1 else None
        axes = None if v is None else [int(a) for a in ctx.host(node, v, "axes").reshape(-1)]
    else:
        axes = ctx.attr(node, "axes")
    if not axes:
        if int(ctx.attr(node, "noop_with_empty_axes", 0)) and takes_input:
            return ()
        return tuple(range(ndim))
    r = max(ndim, 1)
    for a in axes:
        if not -r <= a < r:
            raise ctx.fail(node, f"axis {a} is out of range for a {ndim}-D input")
    return tuple(sorted({a % r for a in axes}))


def _sum_in(x, axes, keep):
    return xp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)


_REDUCE = {
    "ReduceSum": _sum_in,
    "ReduceMean": lambda x, a, k: xp.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: xp.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: xp.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: xp.prod(x, axis=a, keepdims=k, dtype=x.dtype),
    "ReduceL1": lambda x, a, k: _sum_in(xp.abs(x), a, k),
    "ReduceL2": lambda x, a, k: xp.sqrt(_sum_in(xp.multiply(x, x), a, k)),
    "ReduceSumSquare": lambda x, a, k: _sum_in(xp.multiply(x, x), a, k),
    "ReduceLogSum": lambda x, a, k: xp.log(_sum_in(x, a, k)),
    "ReduceLogSumExp": lambda x, a, k: _logsumexp(x, a, k),
}


def _logsumexp(x, axes, keep):
    m = xp.max(x, axis=axes, keepdims=True)
    m = xp.where(xp.isfinite(m), m, _scalar(m, 0))
    s = xp.log(_sum_in(xp.exp(xp.subtract(x, m)), axes, True))
    out = xp.add(s, m)
    return out if keep else xp.reshape(out, tuple(d for i, d in enumerate(x.shape)
                                                  if i not in axes))


def _empty_reduce(ctx, node, x, axes, keep):
    """A reduction over an empty axis: ONNX's identity of the operation."""
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    ident = {"ReduceSum": 0, "ReduceL1": 0, "ReduceL2": 0, "ReduceSumSquare": 0,
             "ReduceProd": 1, "ReduceLogSum": -math.inf, "ReduceLogSumExp": -math.inf,
             "ReduceMax": -math.inf, "ReduceMin": math.inf}.get(node.op)
    if ident is None:
        raise ctx.fail(node, "a mean over an empty axis is undefined")
    if x.dtype.kind == "b":
        ident = ident > 0 if node.op in ("ReduceMax", "ReduceMin") else bool(ident)
    elif x.dtype.kind != "f" and math.isinf(ident):
        info = np.iinfo(x.dtype.numpy)
        ident = info.min if ident < 0 else info.max
    return xp.full(shape, ident, dtype=x.dtype, device=x.device)


@eager(*_REDUCE)
def _reduce(ctx, node, ins):
    (x,) = _bufs(ctx, node, ins[:1])
    axes = _reduce_axes(ctx, node, ins, x.ndim)
    keep = bool(int(ctx.attr(node, "keepdims", 1)))
    if not axes:
        return [xp.asarray(x, copy=True)]
    if x.ndim == 0:
        return [xp.asarray(x, copy=True)] if node.op not in ("ReduceL1", "ReduceL2",
                                                           "ReduceSumSquare",
                                                           "ReduceLogSum",
                                                           "ReduceLogSumExp") \
            else [_REDUCE[node.op](xp.reshape(x, (1,)), (0,), False)]
    if any(x.shape[a] == 0 for a in axes):
        return [_empty_reduce(ctx, node, x, axes, keep)]
    if x.dtype.kind == "b":
        fn = xp.any if node.op == "ReduceMax" else xp.all if node.op == "ReduceMin" else None
        if fn is None:
            raise ctx.fail(node, f"input is bool; {node.op} takes numbers")
        return [fn(x, axis=axes, keepdims=keep)]
    return [_wrap(ctx, node, _REDUCE[node.op], x, axes, keep)]


@eager("ArgMax", "ArgMin")
def _arg(ctx, node, ins):
    (x,) = _bufs(ctx, node, ins[:1])
    r = max(x.ndim, 1)
    axis = int(ctx.attr(node, "axis", 0))
    if not -r <= axis < r:
        raise ctx.fail(node, f"axis {axis} is out of range for a {x.ndim}-D input")
    axis %= r
    keep = bool(int(ctx.attr(node, "keepdims", 1)))
    last = bool(int(ctx.attr(node, "select_last_index", 0)))
    fn = xp.argmax if node.op == "ArgMax" else xp.argmin
    src = xp.flip(x, axis=axis) if last else x
    idx = _wrap(ctx, node, fn, src, axis=axis, keepdims=keep)
    idx = astype(idx, "s64", casting="unsafe") if idx.dtype != "s64" else idx
    if last:
        idx = xp.subtract(_scalar(idx, x.shape[axis] - 1), idx)
    return [idx]
