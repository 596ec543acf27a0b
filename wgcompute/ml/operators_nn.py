"""The ONNX activations, elementwise binaries, batch norm, pools, softmax and LRN: what each
refuses at load, how it folds on the host and how it lowers to the nn kernels."""

from __future__ import annotations

import math

import numpy as np

from ..kernels.nn.nn import broadcast_shape, pool_out_size
from .operators_common import (
    ACT,
    BATCHNORM,
    BINARY,
    GLOBAL_POOL,
    LRN_K,
    POOL,
    SOFTMAX,
    _a,
    _geometry,
    _label,
    _to4,
)


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
