"""The ONNX convolutions, Gemm and MatMul: what each refuses at load and how it lowers to
the conv and gemm kernels."""

from __future__ import annotations

import math

import numpy as np

from ..kernels.conv.conv import CONV2D, CONV2D_RESIDUAL, CONV_TRANSPOSE2D, GEMM
from ..kernels.nn.nn import broadcast_shape
from .operators_common import (
    _a,
    _geometry,
    _label,
    _to4,
)


# -- convolutions ----------------------------------------------------------------------------------
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
