"""The ONNX operators wgcompute runs: per operator, what it refuses (checked at load), how it
folds on the host when its inputs are constants, and how it lowers to kernel steps."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..kernels.conv.conv import CONV2D, CONV2D_RESIDUAL, CONV_TRANSPOSE2D, GEMM
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
    broadcast_shape,
    pool_out_size,
)
from .ir import Const

ACT = Activation()
BINARY = Binary()
BATCHNORM = BatchNorm()
POOL = Pool()
GLOBAL_POOL = GlobalPool()
SOFTMAX = Softmax()
TRANSPOSE = Transpose()
LRN_K = LRN()
COPY = CopyRows()


@dataclass(frozen=True)
class OpSpec:
    check: Callable | None = None  # (node, opset) -> reason it cannot run, or None
    fold: Callable | None = None  # (node, input arrays, opset) -> output arrays
    lower: Callable | None = None  # (lowering, node) -> None (emits steps, sets values)


def _a(n, key, default=None):
    return n.attrs.get(key, default)


def _label(*names) -> str:
    return "+".join(x for x in names if x)


# -- activations -----------------------------------------------------------------------------------
def activation_of(n, opset: int, const_of):
    """(name, alpha, beta) of an activation node, or None if its parameters are computed;
    ``const_of(name)`` gives a constant input's array (None if it is computed)."""
    op = n.op
    if op == "Relu":
        return ("relu", 0.0, 0.0)
    if op == "LeakyRelu":
        return ("leaky_relu", float(_a(n, "alpha", 0.01)), 0.0)
    if op == "Sigmoid":
        return ("sigmoid", 0.0, 0.0)
    if op == "Tanh":
        return ("tanh", 0.0, 0.0)
    if op == "HardSigmoid":
        return ("hard_sigmoid", float(_a(n, "alpha", 0.2)), float(_a(n, "beta", 0.5)))
    if op == "HardSwish":
        return ("hard_swish", 1.0 / 6.0, 0.5)
    if op == "Clip":
        if opset < 11:
            return ("clip", float(_a(n, "min", -3.4028234663852886e38)),
                    float(_a(n, "max", 3.4028234663852886e38)))
        bounds = [-math.inf, math.inf]
        for i in (1, 2):
            if len(n.inputs) > i and n.inputs[i]:
                v = const_of(n.inputs[i])
                if v is None:
                    return None
                bounds[i - 1] = float(np.asarray(v).reshape(-1)[0])
        return ("clip", bounds[0], bounds[1])
    return None


def _act_fold(n, vals, opset):
    from ..kernels.nn.nn import activation_numpy

    by_name = {name: v for name, v in zip(n.inputs, vals) if name}
    x = vals[0]
    name, alpha, beta = activation_of(n, opset, by_name.get)
    return [activation_numpy(name, alpha, beta, x.astype(np.float64)).astype(x.dtype)]


def _lower_activation(lw, n):
    act = lw.activation_of(n)
    x = lw.tensor(n.inputs[0])
    if act is None:  # Clip with computed bounds: max(x, min), then min(., max)
        cur = x
        for i, op in ((1, "max"), (2, "min")):
            if len(n.inputs) > i and n.inputs[i]:
                bound = lw.tensor(n.inputs[i])
                out = lw.new_tensor(broadcast_shape(cur.shape, bound.shape, "Clip"))
                lw.emit(BINARY, [cur, bound], out, {"op": op}, n.name)
                cur = out
        lw.set(n.outputs[0], cur)
        return
    out = lw.new_tensor(x.shape)
    lw.emit(ACT, [x], out, {"activation": act}, n.name)
    lw.set(n.outputs[0], out)


# -- convolutions ----------------------------------------------------------------------------------
def _same_pads(sizes, kernel, strides, dilations, mode):
    pads_begin, pads_end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        begin = small if mode == "SAME_UPPER" else total - small
        pads_begin.append(begin)
        pads_end.append(total - begin)
    return pads_begin + pads_end


def _geometry(lw, n, x_shape, kernel):
    """(strides, pads (t, l, b, r), dilations) in 2-D for a 1-D or 2-D conv / pool node."""
    nd = len(x_shape) - 2
    if nd not in (1, 2):
        raise lw.fail(n, f"input is {x_shape}; only 1-D and 2-D (N, C, L) / (N, C, H, W) "
                         f"are supported")
    strides = list(_a(n, "strides", [1] * nd))
    dil = list(_a(n, "dilations", [1] * nd))
    auto = _a(n, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(x_shape[2:], kernel, strides, dil, auto)
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    else:
        pads = list(_a(n, "pads", [0] * (2 * nd)))
    if len(strides) != nd or len(dil) != nd or len(pads) != 2 * nd or len(kernel) != nd:
        raise lw.fail(n, f"strides {strides}, dilations {dil}, pads {pads} or kernel "
                         f"{kernel} do not match a {nd}-D input {x_shape}")
    if nd == 1:
        return (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dil[0])
    return tuple(strides), (pads[0], pads[1], pads[2], pads[3]), tuple(dil)


def _to4(shape):
    return tuple(shape) if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])


def _check_conv(n, opset):
    ks = _a(n, "kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return f"{len(ks)}-D convolution (only 1-D and 2-D)"
    if _a(n, "auto_pad", "NOTSET") not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"auto_pad {_a(n, 'auto_pad')!r}"
    return None


def _epilogue(lw, name, shape, label, residual_ok=True):
    """Fuse what follows a conv or gemm: an activation, then (conv) a residual Add and a
    second activation. Returns (activation, residual tensor or None, post activation, the
    value name the result stands for, the label)."""
    act, res, post = None, None, None
    f = lw.fuse_activation(name)
    if f is not None:
        act, name, nm = f
        label = _label(label, nm)
    if residual_ok:
        r = lw.fuse_add(name, shape)
        if r is not None:
            res, name, nm = r
            label = _label(label, nm)
            f = lw.fuse_activation(name)
            if f is not None:
                post, name, nm = f
                label = _label(label, nm)
    return act, res, post, name, label


def _lower_conv(lw, n):
    x = lw.tensor(n.inputs[0])
    w = lw.tensor(n.inputs[1])
    if len(w.shape) != len(x.shape):
        raise lw.fail(n, f"w is {w.shape} and x is {x.shape}; their ranks differ")
    strides, pads, dil = _geometry(lw, n, x.shape, list(_a(n, "kernel_shape", w.shape[2:])))
    k = w.shape[0]
    if len(n.inputs) > 2 and n.inputs[2]:
        b = lw.tensor(n.inputs[2])
    else:
        b = lw.const_tensor(np.zeros(k, np.float32))
    x4, w4 = lw.alias(x, _to4(x.shape)), lw.alias(w, _to4(w.shape))
    params = {"strides": strides, "pads": pads, "dilations": dil,
              "group": int(_a(n, "group", 1))}
    out4 = CONV2D.out_shape([x4.shape, w4.shape], CONV2D.resolve_params(params, None))
    shape = out4 if len(x.shape) == 4 else (out4[0], out4[1], out4[3])
    act, res, post, name, label = _epilogue(lw, n.outputs[0], shape, n.name)
    params["activation"] = act
    out = lw.new_tensor(out4)
    if res is None:
        lw.emit(CONV2D, [x4, w4, b], out, params, label)
    else:
        params["post_activation"] = post
        lw.emit(CONV2D_RESIDUAL, [x4, w4, b, lw.alias(res, out4)], out, params, label)
    lw.set(name, lw.alias(out, shape))


def _check_conv_transpose(n, opset):
    why = _check_conv(n, opset)
    if why:
        return why
    return None


def _lower_conv_transpose(lw, n):
    x = lw.tensor(n.inputs[0])
    w = lw.tensor(n.inputs[1])
    nd = len(x.shape) - 2
    if nd not in (1, 2) or len(w.shape) != len(x.shape):
        raise lw.fail(n, f"x is {x.shape} and w is {w.shape}; only 1-D and 2-D are supported")
    kernel = list(_a(n, "kernel_shape", w.shape[2:]))
    strides = list(_a(n, "strides", [1] * nd))
    dil = list(_a(n, "dilations", [1] * nd))
    outpad = list(_a(n, "output_padding", [0] * nd))
    group = int(_a(n, "group", 1))
    auto = _a(n, "auto_pad", "NOTSET")
    out_shape = _a(n, "output_shape")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if out_shape is None:
            out_shape = [s * st for s, st in zip(x.shape[2:], strides, strict=True)]
        out_shape = list(out_shape)[-nd:]
        begin, end = [], []
        for i in range(nd):
            total = (strides[i] * (x.shape[2 + i] - 1) + outpad[i]
                     + (kernel[i] - 1) * dil[i] + 1 - out_shape[i])
            if total < 0:
                outpad[i] -= total  # a larger output than the stride gives: pad the end
                total = 0
            half = total // 2
            b0 = half if auto == "SAME_UPPER" else total - half
            begin.append(b0)
            end.append(total - b0)
        pads = begin + end
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    else:
        pads = list(_a(n, "pads", [0] * (2 * nd)))
    if nd == 1:
        strides, dil, outpad = [1, strides[0]], [1, dil[0]], [0, outpad[0]]
        pads = [0, pads[0], 0, pads[1]]
    k = w.shape[1] * group
    if len(n.inputs) > 2 and n.inputs[2]:
        b = lw.tensor(n.inputs[2])
    else:
        b = lw.const_tensor(np.zeros(k, np.float32))
    x4, w4 = lw.alias(x, _to4(x.shape)), lw.alias(w, _to4(w.shape))
    params = {"strides": tuple(strides), "pads": tuple(pads), "dilations": tuple(dil),
              "group": group, "output_padding": tuple(outpad)}
    out4 = CONV_TRANSPOSE2D.out_shape([x4.shape, w4.shape],
                                      CONV_TRANSPOSE2D.resolve_params(params, None))
    shape = out4 if nd == 2 else (out4[0], out4[1], out4[3])
    f = lw.fuse_activation(n.outputs[0])
    name, label = n.outputs[0], n.name
    if f is not None:
        params["activation"], name, nm = f
        label = _label(label, nm)
    out = lw.new_tensor(out4)
    lw.emit(CONV_TRANSPOSE2D, [x4, w4, b], out, params, label)
    lw.set(name, lw.alias(out, shape))


# -- gemm, matmul ----------------------------------------------------------------------------------
def _lower_gemm(lw, n):
    a = lw.tensor(n.inputs[0])
    b = lw.tensor(n.inputs[1])
    ta, tb = bool(_a(n, "transA", 0)), bool(_a(n, "transB", 0))
    alpha, beta = float(_a(n, "alpha", 1.0)), float(_a(n, "beta", 1.0))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise lw.fail(n, f"a is {a.shape} and b is {b.shape}; Gemm takes 2-D a and b")
    m = a.shape[1] if ta else a.shape[0]
    nn = b.shape[0] if tb else b.shape[1]
    if len(n.inputs) > 2 and n.inputs[2]:
        c = lw.tensor(n.inputs[2])
    else:
        c, beta = lw.const_tensor(np.zeros(1, np.float32)), 0.0
    act, _, _, name, label = _epilogue(lw, n.outputs[0], (m, nn), n.name, residual_ok=False)
    # the 1×1 convolution adds one bias value per output column: only a c of (N,) or (1, N)
    # is that (a (M, 1) c of a square output has as many values, one per row)
    per_column = tuple(c.shape) in ((nn,), (1, nn))
    if (not ta and tb and alpha == 1.0 and (beta == 0.0 or per_column)
            and beta in (0.0, 1.0) and math.prod(b.shape) * 4 <= lw.binding_limit):
        # a classifier (b the weights, rows of the output = samples): a 1×1 convolution
        # whose rows are the output features, so a batch of 1 still fills the GPU, and
        # whose epilogue adds the bias
        bias = c if beta == 1.0 else lw.const_tensor(np.zeros(nn, np.float32))
        out = lw.new_tensor((m, nn, 1, 1))
        lw.emit(CONV2D, [lw.alias(a, (m, a.shape[1], 1, 1)),
                         lw.alias(b, (nn, b.shape[1], 1, 1)), lw.alias(bias, (nn,))], out,
                {"activation": act}, label)
        lw.set(name, lw.alias(out, (m, nn)))
        return
    params = {"trans_a": ta, "trans_b": tb, "alpha": alpha, "beta": beta, "activation": act}
    out = lw.new_tensor((m, nn))
    lw.emit(GEMM, [a, b, c], out, params, label)
    lw.set(name, out)


def _bias_in_full(bias, shape, full, a_vector: bool, b_vector: bool):
    """The shape a bias added to a MatMul's result of ``shape`` takes against the product
    ``full`` (the 1-D operands' axes restored), when adding it there gives exactly what the
    Add would: the bias broadcasts to ``shape`` unchanged. None where fusing would not."""
    if len(bias) > len(shape):
        return None
    try:
        if broadcast_shape(bias, shape, "Add") != tuple(shape):
            return None
    except ValueError:  # not broadcastable: the Add itself fails, unfused
        return None
    cs = (1,) * (len(shape) - len(bias)) + tuple(bias)
    if a_vector:  # the row axis a 1-D a lacks
        cs = cs[:-1] + (1,) + cs[-1:] if cs else (1,)
    if b_vector:  # the column axis a 1-D b lacks
        cs = cs + (1,)
    cs = (1,) * (len(full) - len(cs)) + cs
    return cs if broadcast_shape(cs, full, "Add") == tuple(full) else None


def _lower_matmul(lw, n):
    a = lw.tensor(n.inputs[0])
    b = lw.tensor(n.inputs[1])
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise lw.fail(n, "MatMul takes tensors of rank >= 1")
    a2 = lw.alias(a, (1,) + sa) if len(sa) == 1 else a
    b2 = lw.alias(b, sb + (1,)) if len(sb) == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise lw.fail(n, f"a is {sa} and b is {sb}; inner dimensions {a2.shape[-1]} and "
                         f"{b2.shape[-2]} differ")
    batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2], "MatMul")
    full = tuple(batch) + (a2.shape[-2], b2.shape[-1])
    shape = full
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(sb) == 1:
        shape = shape[:-1]
    name, label = n.outputs[0], n.name
    c, beta = None, 0.0
    # MatMul followed by the Add of a constant bias (a Linear layer): the gemm's c
    user = lw.single_user(name)
    if user is not None and user.op == "Add" and len(user.inputs) == 2:
        other = user.inputs[1] if user.inputs[0] == name else user.inputs[0]
        if lw.is_const(other):
            arr = lw.value(other).array
            cs = _bias_in_full(arr.shape, shape, full, len(sa) == 1, len(sb) == 1)
            if cs is not None and arr.dtype.kind == "f":
                lw.done.add(id(user))
                c = lw.alias(lw.tensor(other), cs)
                beta, name, label = 1.0, user.outputs[0], _label(label, user.name)
    if c is None:
        c = lw.const_tensor(np.zeros(1, np.float32))
    f = lw.fuse_activation(name)
    act = None
    if f is not None:
        act, name, nm = f
        label = _label(label, nm)
    out = lw.new_tensor(full)
    lw.emit(GEMM, [a2, b2, c], out,
            {"beta": beta, "activation": act}, label)
    lw.set(name, lw.alias(out, shape))


# -- elementwise binaries --------------------------------------------------------------------------
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Sum": "add"}


def _fold_binary(n, vals, opset):
    op = _BINARY[n.op]
    out = vals[0]
    for v in vals[1:]:
        if op == "add":
            out = out + v
        elif op == "sub":
            out = out - v
        elif op == "mul":
            out = out * v
        elif out.dtype.kind in "iu" and np.asarray(v).dtype.kind in "iu":
            out = np.trunc(np.true_divide(out, v)).astype(np.result_type(out, v))
        else:
            out = out / v
    return [np.asarray(out)]


def _lower_binary(lw, n):
    names = [x for x in n.inputs if x]
    if len(names) == 1:
        lw.set(n.outputs[0], lw.value(names[0]))
        return
    op = _BINARY[n.op]
    cur = lw.tensor(names[0])
    label = n.name
    for i, nm in enumerate(names[1:]):
        other = lw.tensor(nm)
        shape = broadcast_shape(cur.shape, other.shape, n.op)
        out = lw.new_tensor(shape)
        params = {"op": op}
        last = i == len(names) - 2
        name = n.outputs[0]
        if last:
            f = lw.fuse_activation(name)
            if f is not None:
                params["activation"], name, an = f
                label = _label(label, an)
        lw.emit(BINARY, [cur, other], out, params, label)
        cur = out
    lw.set(name, cur)


# -- normalization, pools, softmax, LRN ------------------------------------------------------------
def _check_bn(n, opset):
    if len([o for o in n.outputs if o]) > 1 or _a(n, "training_mode", 0):
        return "training mode (running statistics as outputs) is not supported"
    if opset < 9 and _a(n, "spatial", 1) != 1:
        return "spatial=0 is not supported"
    return None


def _lower_bn(lw, n):
    x = lw.tensor(n.inputs[0])
    ins = [x] + [lw.tensor(nm) for nm in n.inputs[1:5]]
    params = {"epsilon": float(_a(n, "epsilon", 1e-5))}
    name, label = n.outputs[0], n.name
    f = lw.fuse_activation(name)
    if f is not None:
        params["activation"], name, nm = f
        label = _label(label, nm)
    ins = [ins[0]] + [lw.alias(t, (math.prod(t.shape),)) for t in ins[1:]]
    out = lw.new_tensor(x.shape)
    lw.emit(BATCHNORM, ins, out, params, label)
    lw.set(name, out)


def _check_pool(n, opset):
    if n.op == "MaxPool" and len([o for o in n.outputs if o]) > 1:
        return "the Indices output is not supported"
    ks = _a(n, "kernel_shape")
    if ks is None:
        return "kernel_shape is required"
    if len(ks) not in (1, 2):
        return f"{len(ks)}-D pooling (only 1-D and 2-D)"
    if _a(n, "auto_pad", "NOTSET") not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"auto_pad {_a(n, 'auto_pad')!r}"
    return None


def _lower_pool(lw, n):
    x = lw.tensor(n.inputs[0])
    kernel = list(_a(n, "kernel_shape"))
    strides, pads, dil = _geometry(lw, n, x.shape, kernel)
    if len(kernel) == 1:
        kernel = [1, kernel[0]]
    x4 = lw.alias(x, _to4(x.shape))
    ceil = bool(_a(n, "ceil_mode", 0))
    auto = _a(n, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):  # output ceil(in / stride), as ONNX defines
        oh, ow = (-(-x4.shape[2] // strides[0]), -(-x4.shape[3] // strides[1]))
    else:
        oh = pool_out_size(x4.shape[2], kernel[0], strides[0], pads[0], pads[2], dil[0], ceil)
        ow = pool_out_size(x4.shape[3], kernel[1], strides[1], pads[1], pads[3], dil[1], ceil)
    out4 = (x4.shape[0], x4.shape[1], oh, ow)
    out = lw.new_tensor(out4)
    lw.emit(POOL, [x4], out, {
        "mode": "max" if n.op == "MaxPool" else "avg", "kernel": tuple(kernel),
        "strides": strides, "pads": pads, "dilations": dil,
        "ceil_mode": ceil and auto not in ("SAME_UPPER", "SAME_LOWER"),
        "count_include_pad": bool(_a(n, "count_include_pad", 0))}, n.name)
    shape = out4 if len(x.shape) == 4 else (out4[0], out4[1], out4[3])
    lw.set(n.outputs[0], lw.alias(out, shape))


def _lower_global_pool(lw, n):
    x = lw.tensor(n.inputs[0])
    if len(x.shape) < 3:
        raise lw.fail(n, f"input is {x.shape}; expected (N, C, ...)")
    shape = tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2)
    out = lw.new_tensor(shape)
    lw.emit(GLOBAL_POOL, [x], out, {"mode": "avg" if n.op == "GlobalAveragePool" else "max"},
            n.name)
    lw.set(n.outputs[0], out)


def _lower_softmax(lw, n):
    x = lw.tensor(n.inputs[0])
    old = lw.graph.opset < 13
    axis = int(_a(n, "axis", 1 if old else -1))
    out = lw.new_tensor(x.shape)
    lw.emit(SOFTMAX, [x], out, {"axis": axis, "flatten": old,
                                "log": n.op == "LogSoftmax"}, n.name)
    lw.set(n.outputs[0], out)


def _lower_lrn(lw, n):
    x = lw.tensor(n.inputs[0])
    out = lw.new_tensor(x.shape)
    lw.emit(LRN_K, [x], out, {"size": int(_a(n, "size")), "alpha": float(_a(n, "alpha", 1e-4)),
                              "beta": float(_a(n, "beta", 0.75)),
                              "bias": float(_a(n, "bias", 1.0))}, n.name)
    lw.set(n.outputs[0], out)


def _check_lrn(n, opset):
    return None if _a(n, "size") is not None else "size is required"


# -- layout: views, transpose, concat --------------------------------------------------------------
def _flatten_axis(n, r):
    axis = int(_a(n, "axis", 1))
    if axis < 0:
        axis += r
    if not 0 <= axis <= r:
        raise ValueError(f"axis {_a(n, 'axis')} is out of range for a {r}-D input")
    return axis


def _fold_flatten(n, vals, opset):
    x = vals[0]
    axis = _flatten_axis(n, x.ndim)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def _reshape_target(shape, target, allowzero):
    target = [int(v) for v in np.asarray(target).reshape(-1)]
    out = []
    for i, v in enumerate(target):
        if v == 0 and not allowzero:
            if i >= len(shape):
                raise ValueError(f"shape {target}: a 0 at axis {i} copies an axis the input "
                                 f"{tuple(shape)} lacks")
            out.append(shape[i])
        else:
            out.append(v)
    if out.count(-1) > 1:
        raise ValueError(f"shape {target} has more than one -1")
    if -1 in out:
        rest = math.prod(v for v in out if v != -1)
        total = math.prod(shape)
        if rest == 0 or total % rest:
            raise ValueError(f"cannot reshape {tuple(shape)} to {target}")
        out[out.index(-1)] = total // rest
    if math.prod(out) != math.prod(shape):
        raise ValueError(f"cannot reshape {tuple(shape)} ({math.prod(shape)} elements) to "
                         f"{tuple(out)}")
    return tuple(out)


def _squeeze_axes(n, vals, opset, lw=None):
    if opset >= 13:
        if len(n.inputs) > 1 and n.inputs[1]:
            return [int(v) for v in np.asarray(vals[1]).reshape(-1)]
        return None
    axes = _a(n, "axes")
    return None if axes is None else list(axes)


def _squeeze_shape(shape, axes):
    r = len(shape)
    if axes is None:
        return tuple(d for d in shape if d != 1)
    axes = {a % r for a in axes}
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of {tuple(shape)} (size {shape[a]})")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _unsqueeze_shape(shape, axes):
    r = len(shape) + len(axes)
    axes = sorted(a % r for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


def _view_shape(lw, n, shape):
    """The output shape of a view op (Reshape, Flatten, Squeeze, Unsqueeze) for an input of
    ``shape``, its parameters being constants."""
    opset = lw.graph.opset
    if n.op == "Flatten":
        axis = _flatten_axis(n, len(shape))
        return (math.prod(shape[:axis]), math.prod(shape[axis:]))
    if n.op == "Reshape":
        target = lw.const(n, n.inputs[1], "the shape") if opset >= 5 else _a(n, "shape")
        return _reshape_target(shape, target, _a(n, "allowzero", 0))
    if n.op in ("Squeeze", "Unsqueeze"):
        vals = [None] + [lw.const(n, x, "axes") if x else None for x in n.inputs[1:]]
        axes = _squeeze_axes(n, vals, opset)
        if n.op == "Squeeze":
            return _squeeze_shape(shape, axes)
        if axes is None:
            raise lw.fail(n, "axes are required")
        return _unsqueeze_shape(shape, axes)
    return tuple(shape)


def _lower_view(lw, n):
    x = lw.tensor(n.inputs[0])
    try:
        shape = _view_shape(lw, n, x.shape)
    except ValueError as e:
        raise lw.fail(n, str(e)) from e
    lw.set(n.outputs[0], lw.alias(x, shape))


def _fold_reshape(n, vals, opset):
    x = vals[0]
    target = vals[1] if opset >= 5 else _a(n, "shape")
    return [x.reshape(_reshape_target(x.shape, target, _a(n, "allowzero", 0)))]


def _fold_squeeze(n, vals, opset):
    return [vals[0].reshape(_squeeze_shape(vals[0].shape, _squeeze_axes(n, vals, opset)))]


def _fold_unsqueeze(n, vals, opset):
    axes = _squeeze_axes(n, vals, opset)
    return [vals[0].reshape(_unsqueeze_shape(vals[0].shape, axes))]


def _fold_identity(n, vals, opset):
    if n.op == "Dropout" and len(n.outputs) > 1:
        return [vals[0], np.ones(vals[0].shape, dtype=bool)]
    return [vals[0]]


def _check_dropout(n, opset):
    return None


def _lower_dropout(lw, n):
    if len(n.inputs) > 2 and n.inputs[2]:
        mode = lw.const(n, n.inputs[2], "training_mode")
        if bool(np.asarray(mode).reshape(-1)[0]):
            raise lw.fail(n, "training_mode=True is not supported (inference only)")
    v = lw.value(n.inputs[0])
    lw.set(n.outputs[0], v)
    if len(n.outputs) > 1 and n.outputs[1]:  # inference: nothing is dropped
        shape = v.shape if hasattr(v, "sid") else v.array.shape
        lw.set(n.outputs[1], Const(np.ones(shape, dtype=bool)))


def _lower_identity(lw, n):
    lw.set(n.outputs[0], lw.value(n.inputs[0]))


def _perm(n, r):
    perm = _a(n, "perm")
    return tuple(range(r))[::-1] if perm is None else tuple(int(p) for p in perm)


def _fold_transpose(n, vals, opset):
    return [np.transpose(vals[0], _perm(n, vals[0].ndim))]


def _lower_transpose(lw, n):
    x = lw.tensor(n.inputs[0])
    perm = _perm(n, len(x.shape))
    shape = tuple(x.shape[p] for p in perm)
    out = lw.new_tensor(shape)
    lw.emit(TRANSPOSE, [x], out, {"perm": perm}, n.name)
    lw.set(n.outputs[0], out)


def _fold_concat(n, vals, opset):
    return [np.concatenate([v for v in vals if v is not None], axis=int(_a(n, "axis")))]


def _lower_concat(lw, n):
    ts = [lw.tensor(x) for x in n.inputs if x]
    r = len(ts[0].shape)
    axis = int(_a(n, "axis"))
    if not -r <= axis < r:
        raise lw.fail(n, f"axis {axis} is out of range for {r}-D inputs")
    axis %= r
    for t in ts:
        if len(t.shape) != r or any(t.shape[i] != ts[0].shape[i] for i in range(r)
                                    if i != axis):
            raise lw.fail(n, f"inputs {[t.shape for t in ts]} differ outside axis {axis}")
    total = sum(t.shape[axis] for t in ts)
    shape = tuple(ts[0].shape[:axis]) + (total,) + tuple(ts[0].shape[axis + 1:])
    out = lw.new_tensor(shape)
    inner = math.prod(shape[axis + 1:])
    rows = math.prod(shape[:axis])
    off = 0
    for t in ts:
        if math.prod(t.shape):
            lw.emit(COPY, [t], out, {"rows": rows, "dst_stride": total * inner,
                                     "dst_offset": off * inner}, n.name)
        off += t.shape[axis]
    lw.set(n.outputs[0], out)


# -- constants and shape arithmetic (host only) ----------------------------------------------------
def _fold_constant(n, vals, opset):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in n.attrs:
            v = n.attrs[key]
            if key in ("value_float", "value_floats"):
                return [np.asarray(v, dtype=np.float32)]
            if key in ("value_int", "value_ints"):
                return [np.asarray(v, dtype=np.int64)]
            return [np.asarray(v)]
    raise ValueError("Constant without a supported value attribute")


def _check_constant(n, opset):
    if not any(k in n.attrs for k in ("value", "value_float", "value_floats", "value_int",
                                      "value_ints")):
        return "only tensor, float(s) and int(s) values are supported"
    return None


def _fold_constant_of_shape(n, vals, opset):
    value = n.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    shape = tuple(int(d) for d in np.asarray(vals[0]).reshape(-1))
    return [np.full(shape, value[0], dtype=value.dtype)]


def _shape_of(n, shape):
    r = len(shape)
    start = int(_a(n, "start", 0))
    end = _a(n, "end")
    start = min(max(start + r if start < 0 else start, 0), r)
    end = r if end is None else min(max(int(end) + r if int(end) < 0 else int(end), 0), r)
    return np.asarray(shape[start:end], dtype=np.int64)


def _fold_shape(n, vals, opset):
    return [_shape_of(n, vals[0].shape)]


def _lower_shape(lw, n):
    v = lw.value(n.inputs[0])
    shape = v.shape if hasattr(v, "sid") else v.array.shape
    lw.set(n.outputs[0], Const(_shape_of(n, tuple(shape))))


def _fold_gather(n, vals, opset):
    data, idx = vals[0], np.asarray(vals[1])
    axis = int(_a(n, "axis", 0))
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [np.take(data, idx, axis=axis)]


def _lower_gather(lw, n):
    """Gather of a computed tensor at constant indices: one row copy per index."""
    x = lw.tensor(n.inputs[0])
    idx = np.asarray(lw.const(n, n.inputs[1], "the indices")).astype(np.int64)
    r = len(x.shape)
    axis = int(_a(n, "axis", 0))
    if not -r <= axis < r:
        raise lw.fail(n, f"axis {axis} is out of range for {x.shape}")
    axis %= r
    size = x.shape[axis]
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise lw.fail(n, f"indices out of range for axis {axis} of size {size}")
    flat = np.where(idx < 0, idx + size, idx).reshape(-1)
    shape = tuple(x.shape[:axis]) + idx.shape + tuple(x.shape[axis + 1:])
    out = lw.new_tensor(shape)
    rows, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    for j, k in enumerate(flat):
        if rows and inner:
            lw.emit(COPY, [x], out, {"rows": rows, "cols": inner, "src_stride": size * inner,
                                     "src_offset": int(k) * inner,
                                     "dst_stride": flat.size * inner,
                                     "dst_offset": j * inner}, n.name)
    lw.set(n.outputs[0], out)


def _np_dtype(to: int):
    from onnx import helper

    return helper.tensor_dtype_to_np_dtype(to)


def _fold_cast(n, vals, opset):
    return [np.asarray(vals[0]).astype(_np_dtype(int(_a(n, "to"))))]


def _lower_cast(lw, n):
    if np.dtype(_np_dtype(int(_a(n, "to")))).kind != "f":
        raise lw.fail(n, "a cast of a computed tensor to a non-float type is not supported")
    lw.set(n.outputs[0], lw.value(n.inputs[0]))


def _fold_slice(n, vals, opset):
    x = vals[0]
    if opset < 10:
        starts, ends = _a(n, "starts"), _a(n, "ends")
        axes, steps = _a(n, "axes"), None
    else:
        starts, ends = vals[1], vals[2]
        axes = vals[3] if len(vals) > 3 and vals[3] is not None else None
        steps = vals[4] if len(vals) > 4 and vals[4] is not None else None
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    ends = [int(v) for v in np.asarray(ends).reshape(-1)]
    axes = list(range(len(starts))) if axes is None else [int(a) % x.ndim for a in
                                                          np.asarray(axes).reshape(-1)]
    steps = [1] * len(starts) if steps is None else [int(v) for v in
                                                     np.asarray(steps).reshape(-1)]
    sl = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        sl[a] = slice(s, e, st)
    return [x[tuple(sl)]]


# ONNX elem types a Cast may produce: the float types and the integers (and bool) of shape
# arithmetic. bfloat16, the 8-, 4- and 2-bit types, strings and complex numbers do not exist
# in wgcompute (a cast to one is refused, not approximated).
CAST_TYPES = {1: "FLOAT", 10: "FLOAT16", 11: "DOUBLE", 2: "UINT8", 3: "INT8", 4: "UINT16",
              5: "INT16", 6: "INT32", 7: "INT64", 9: "BOOL", 12: "UINT32", 13: "UINT64"}


def type_name(elem: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(int(elem))
    except ValueError:
        return f"type {elem}"


def _check_cast(n, opset):
    if "to" not in n.attrs:
        return "attribute 'to' is required"
    to = int(n.attrs["to"])
    if to not in CAST_TYPES:
        return (f"a cast to {type_name(to)}: wgcompute has {', '.join(CAST_TYPES.values())} "
                f"only")
    return None


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
