"""The ONNX layout operators (views, transpose, concat) and the host-side ones (constants,
shape arithmetic, gather, cast, slice): what each refuses, how it folds and lowers."""

from __future__ import annotations

import math

import numpy as np

from .ir import Const
from .operators_common import (
    COPY,
    TRANSPOSE,
    _a,
)


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
