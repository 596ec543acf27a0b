"""The interpreter's Resize and GridSample. Resize is separable, one axis at a time: per axis
the taps' indices and weights of every output position are computed on the host (every
coordinate transformation, nearest mode, cubic coefficient, exclude_outside and antialias),
then applied on the GPU (a gather for nearest, kernels/image/resize_axis for linear and
cubic). GridSample's positions come from a tensor: its taps are computed on the GPU. LpPool
gathers its windows' taps (positions computed on the host) and sums |x|^p; MaxUnpool scatters
values back to their indices; AffineGrid maps a base grid by each sample's matrix."""

from __future__ import annotations

import math

import numpy as np

from .. import array_api as xp
from .._lazy import enqueue
from ..array import astype
from ..buffer import Buffer
from ..kernels.image.resize_axis import DTYPE_NAMES, RESIZE_AXIS
from .eager import eager
from .eager_args import back, const, empty, floats, work

_CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(ctm: str, m: int, n: int, scale: float, roi) -> tuple[np.ndarray, np.ndarray]:
    """Each output position's coordinate in the input (float64), and where it is outside
    the input (tf_crop_and_resize extrapolates there)."""
    j = np.arange(m, dtype=np.float64)
    width = scale * n  # the output's length before rounding
    outside = np.zeros(m, dtype=bool)
    if ctm == "align_corners":
        x = np.zeros(m) if width == 1 else j * (n - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = j / scale
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(m, (hi - lo) * (n - 1) / 2) if width == 1 else \
            j * (hi - lo) * (n - 1) / (width - 1)
        x = x + lo * (n - 1)
        outside = (x < 0) | (x > n - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(m, -0.5) if width == 1 else (j + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        x = n / 2 * (1 - m / width) + (j + 0.5) / scale - 0.5
    else:  # half_pixel
        x = (j + 0.5) / scale - 0.5
    return x, outside


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel (Keys') at distances |d|."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _weights(mode: str, r: np.ndarray, scale: float, a: float, antialias: bool,
             nearest: str) -> np.ndarray:
    """(m, taps) weights of the taps left of and around each position of fraction ``r``
    (in (0, 1]: a whole coordinate counts as 1 past the tap on its left)."""
    r = r[:, None]
    if mode == "nearest":
        whole = r == 1
        up = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5,
              "floor": np.zeros_like(whole), "ceil": np.ones_like(whole)}[nearest]
        up = up | whole
        return np.concatenate([~up, up], axis=1).astype(np.float64)
    reach = 1 if mode == "linear" else 2
    s = min(scale, 1.0) if antialias else 1.0
    first = math.floor(-reach / s) + 1
    t = np.arange(first, 2 - first if mode == "cubic" else first + 2 - 2 * first)
    d = (t[None, :] - r) * s
    w = np.clip(1 - np.abs(d), 0, 1) if mode == "linear" else _cubic(d, a)
    return w / w.sum(axis=1, keepdims=True) if antialias else w


def axis_table(mode: str, n: int, m: int, scale: float, ctm: str, roi, a: float,
               exclude: bool, antialias: bool, nearest: str):
    """(taps' indices (m, T) in range, weights (m, T), extrapolated (m,)) of one axis."""
    x, outside = _source(ctm, m, n, scale, roi)
    fl = np.floor(x)
    r = np.where(x == fl, 1.0, x - fl)
    w = _weights(mode, r, scale, a, antialias, nearest)
    taps = w.shape[1]
    pad = -(-taps // 2)
    xp_ = x + pad
    p = np.floor(xp_)
    frac = xp_ - p
    if taps % 2 == 0:
        off = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    idx = (p + off).astype(np.int64)[:, None] + np.arange(taps)[None, :] - pad
    if exclude:
        w = np.where((idx < 0) | (idx >= n), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n - 1), w, outside


def _plan(ctx, node, ins, shape):
    """[(axis, output length, scale, roi pair)] of the axes that change, in the order the
    node names them."""
    r = len(shape)
    axes = [a % r for a in ctx.attr(node, "axes", list(range(r)))]
    roi = ins[1] if len(ins) > 1 else None
    roi = None if roi is None else np.asarray(ctx.host(node, roi, "roi"), dtype=np.float64)
    scales = ins[2] if len(ins) > 2 else None
    scales = None if scales is None else np.asarray(ctx.host(node, scales, "scales"),
                                                    dtype=np.float64).reshape(-1)
    sizes = ins[3] if len(ins) > 3 else None
    sizes = None if sizes is None else [int(v) for v in np.asarray(
        ctx.host(node, sizes, "sizes")).reshape(-1)]
    if sizes:
        if len(sizes) != len(axes):
            raise ctx.fail(node, f"sizes {sizes} must give one length per axis {axes}")
        sc = [sizes[i] / shape[a] for i, a in enumerate(axes)]
        policy = ctx.attr(node, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            one = min(sc) if policy == "not_larger" else max(sc)
            sc = [one] * len(axes)
            sizes = [int(one * shape[a] + 0.5) for a in axes]
    elif scales is not None and scales.size:
        if scales.size != len(axes) or (scales <= 0).any():
            raise ctx.fail(node, f"scales {scales.tolist()} must be one positive number per "
                                 f"axis {axes}")
        sc = list(scales)
        sizes = [int(s * shape[a]) for s, a in zip(sc, axes, strict=True)]
    else:
        raise ctx.fail(node, "neither scales nor sizes is given")
    pairs = [(0.0, 1.0)] * len(axes)
    if roi is not None and roi.size:
        if roi.size != 2 * len(axes):
            raise ctx.fail(node, f"roi has {roi.size} values; expected {2 * len(axes)}")
        pairs = [(roi[i], roi[i + len(axes)]) for i in range(len(axes))]
    return [(a, m, s, pr) for a, m, s, pr in zip(axes, sizes, sc, pairs, strict=True)
            if not (math.isclose(s, 1.0) and m == shape[a] and math.isclose(pr[0], 0.0)
                    and math.isclose(pr[1], 1.0))]


def _legacy(node, opset) -> bool:
    """Upsample, and Resize before opset 11: (X, scales), asymmetric coordinates."""
    return node.op == "Upsample" or opset < 11


def _check_resize(node, opset):
    a = node.attrs
    modes = ("nearest", "linear") if _legacy(node, opset) else ("nearest", "linear", "cubic")
    checks = (("mode", a.get("mode", "nearest"), modes),
              ("coordinate_transformation_mode",
               a.get("coordinate_transformation_mode", "half_pixel"), _CTM),
              ("nearest_mode", a.get("nearest_mode", "round_prefer_floor"), _NEAREST),
              ("keep_aspect_ratio_policy", a.get("keep_aspect_ratio_policy", "stretch"),
               ("stretch", "not_larger", "not_smaller")))
    for key, value, allowed in checks:
        if value not in allowed:
            return f"{key} is {value!r}; expected one of {', '.join(allowed)}"
    if a.get("antialias", 0) and a.get("mode", "nearest") == "nearest":
        return "antialias with mode 'nearest' (ONNX defines it for linear and cubic)"
    return None


@eager("Resize", "Upsample", check=_check_resize)
def _resize(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    legacy = _legacy(node, ctx.opset)
    if legacy:  # ins as Resize 11's: (X, roi, scales)
        scales = ctx.attr(node, "scales")
        ins = [ins[0], None, np.asarray(scales, np.float32) if scales is not None else ins[1]]
    mode = ctx.attr(node, "mode", "nearest")
    if mode != "nearest" and x.dtype.name not in DTYPE_NAMES:
        raise ctx.fail(node, f"X is {x.dtype}; {mode} Resize computes float tensors "
                             f"({', '.join(DTYPE_NAMES)}); nearest takes every type")
    value = float(ctx.attr(node, "extrapolation_value", 0.0))
    ctm = "asymmetric" if legacy else ctx.attr(node, "coordinate_transformation_mode",
                                               "half_pixel")
    opts = dict(ctm=ctm,
                a=float(ctx.attr(node, "cubic_coeff_a", -0.75)),
                exclude=bool(ctx.attr(node, "exclude_outside", 0)),
                antialias=bool(ctx.attr(node, "antialias", 0)),
                nearest=ctx.attr(node, "nearest_mode", "round_prefer_floor"))
    for axis, m, scale, roi in _plan(ctx, node, ins, x.shape):
        if x.shape[axis] == 0 or m == 0:
            raise ctx.fail(node, f"axis {axis} resizes {x.shape[axis]} to {m}; both must be "
                                 f"positive")
        if legacy:  # the nearest position below when enlarging, above when shrinking
            opts["nearest"] = "floor" if scale >= 1 else "ceil"
        idx, w, outside = axis_table(mode, x.shape[axis], m, scale, roi=roi, **opts)
        x = _nearest(ctx, x, axis, idx, w, outside, value) if mode == "nearest" else \
            _weighted(ctx, x, axis, idx, w, outside, value)
    return [x]


def _nearest(ctx, x, axis: int, idx, w, outside, value: float):
    pick = idx[np.arange(len(idx)), np.argmax(w, axis=1)].astype(np.int32)
    y = xp.take(x, ctx.buffer(pick), axis=axis)
    if outside.any():
        mask = ctx.buffer(outside.reshape((-1,) + (1,) * (x.ndim - axis - 1)))
        fill = const(ctx, value if x.dtype.kind == "f" else int(value), x.dtype)
        y = xp.where(mask, fill, y)
    return y


def _weighted(ctx, x, axis: int, idx, w, outside, value: float):
    work = np.float64 if x.dtype == "f64" else np.float32
    table = np.concatenate([w, outside[:, None].astype(np.float64)], axis=1).astype(work)
    shape = x.shape[:axis] + (len(idx),) + x.shape[axis + 1:]
    out = empty(shape, x.dtype, x.device)
    return enqueue(RESIZE_AXIS, [x, ctx.buffer(idx.astype(np.int32)), ctx.buffer(table)],
                      out, {"outer": math.prod(x.shape[:axis]),
                            "inner": math.prod(x.shape[axis + 1:]), "value": value})


# -- GridSample --------------------------------------------------------------------------------
def _reflect(x: Buffer, lo: float, hi: float) -> Buffer:
    """x reflected by the borders [lo, hi] until it lies between them."""
    span = hi - lo
    below, above = x < lo, x > hi
    dx = xp.where(below, lo - x, x - hi)
    turns = xp.floor(dx * (1 / span)) if span > 0 else xp.zeros_like(dx)
    r = dx - turns * span
    even = xp.remainder(turns, 2.0) == 0.0
    inside = xp.where(even, lo + r, hi - r)  # reflected from below
    from_above = xp.where(even, hi - r, lo + r)
    return xp.where(below, inside, xp.where(above, from_above, x))


def _keys(f: Buffer) -> list[Buffer]:
    """The 4 cubic convolution weights (Keys, a = -0.75) of taps -1, 0, 1, 2 at fraction f."""
    a = -0.75

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(f + 1.0), near(f), near(1.0 - f), far(2.0 - f)]


def _grid_taps(g: Buffer, n: int, mode: str, padding: str, align: bool):
    """[(index (int32, in range), weight)] of one spatial axis of length n at the normalized
    coordinates g."""
    x = (g + 1.0) * (0.5 * (n - 1)) if align else ((g + 1.0) * n - 1.0) * 0.5
    lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
    if mode == "nearest":
        x = xp.round(x)
    outside = xp.logical_or(x < lo, x > hi)
    if padding == "border":
        x = xp.where(outside, xp.clip(x, 0.0, n - 1.0), x)
    elif padding == "reflection":
        x = xp.where(outside, _reflect(x, lo, hi), x)
    base = x if mode == "nearest" else xp.floor(x)
    f = x - base
    offsets, weights = {"nearest": ([0], [None]), "linear": ([0, 1], [1.0 - f, f]),
                        "cubic": ([-1, 0, 1, 2], None)}[mode]
    weights = weights if weights is not None else _keys(f)
    taps = []
    for off, w in zip(offsets, weights, strict=True):
        i = base + float(off)
        if padding == "zeros":
            valid = xp.astype(xp.logical_and(i >= 0.0, i <= n - 1.0), x.dtype)
            w = valid if w is None else w * valid
        elif padding == "reflection":
            i = xp.trunc(_reflect(i, lo, hi))
        idx = astype(xp.clip(i, 0.0, n - 1.0), "s32", rounding="trunc", casting="unsafe")
        taps.append((idx, w))
    return taps


def _check_grid_sample(node, opset):
    a = node.attrs
    mode = a.get("mode", "linear" if opset >= 20 else "bilinear")
    if mode not in ("nearest", "linear", "cubic", "bilinear", "bicubic"):
        return f"mode is {mode!r}; expected nearest, linear or cubic"
    padding = a.get("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        return f"padding_mode is {padding!r}; expected zeros, border or reflection"
    return None


@eager("GridSample", check=_check_grid_sample)
def _grid_sample(ctx, node, ins):
    x0, g0 = floats(ctx, node, ins[0]), floats(ctx, node, ins[1], "grid")
    dims = x0.shape[2:]
    if x0.ndim < 3 or g0.ndim != x0.ndim or g0.shape[0] != x0.shape[0] or \
            g0.shape[-1] != len(dims):
        raise ctx.fail(node, f"X is {x0.shape} and grid {g0.shape}; expected (N, C, D1..Dk) "
                             f"and (N, O1..Ok, k)")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(
        ctx.attr(node, "mode", "linear" if ctx.opset >= 20 else "bilinear"),
        ctx.attr(node, "mode", "linear"))
    padding = ctx.attr(node, "padding_mode", "zeros")
    align = bool(ctx.attr(node, "align_corners", 0))
    x, g = work(x0), work(g0)
    n, c, out = x.shape[0], x.shape[1], g.shape[1:-1]
    points = math.prod(out)
    flat = xp.reshape(x, (n, c, math.prod(dims)))
    k = len(dims)
    per_axis = []  # grid component k - 1 - d is axis d's coordinate
    for d, size in enumerate(dims):
        comp = xp.reshape(xp.asarray(g[..., k - 1 - d], copy=True), (n, 1, points))
        per_axis.append(_grid_taps(comp, size, mode, padding, align))
    strides = [math.prod(dims[d + 1:]) for d in range(k)]
    y = None
    for combo in _products(per_axis):
        idx, w = None, None
        for (i, wt), st in zip(combo, strides, strict=True):
            term = i * st if st != 1 else i
            idx = term if idx is None else idx + term
            if wt is not None:  # (nearest's taps in range weigh 1)
                w = wt if w is None else w * wt
        v = xp.take_along_axis(flat, idx, axis=2)
        v = v if w is None else v * w
        y = v if y is None else y + v
    return [back(xp.reshape(y, (n, c) + out), x0)]


def _products(per_axis: list) -> list:
    """Every combination of one tap per axis."""
    combos = [[]]
    for taps in per_axis:
        combos = [c + [t] for c in combos for t in taps]
    return combos


# -- LpPool ------------------------------------------------------------------------------------
def _pool_axis(n: int, k: int, s: int, d: int, pads: tuple, ceil: bool):
    """(positions (out, k) in the input, inside (out, k)) of one pooled axis."""
    pb, pe = pads
    span = (k - 1) * d + 1
    room = n + pb + pe - span
    out = (-(-room // s) if ceil else room // s) + 1
    if ceil and (out - 1) * s >= n + pb:  # a window must start inside the input or its pad
        out -= 1
    pos = np.arange(out)[:, None] * s - pb + np.arange(k)[None, :] * d
    return pos, (pos >= 0) & (pos < n)


def _pool_pads(ctx, node, dims, kernel, strides, dil):
    auto = ctx.attr(node, "auto_pad", "NOTSET")
    m = len(dims)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for n, k, s, d in zip(dims, kernel, strides, dil, strict=True):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else
                        (total - small, small))
        return pads
    if auto == "VALID":
        return [(0, 0)] * m
    flat = list(ctx.attr(node, "pads", [0] * (2 * m)))
    if len(flat) != 2 * m:
        raise ctx.fail(node, f"pads {flat} must hold 2 values for each of {m} axes")
    return [(flat[i], flat[i + m]) for i in range(m)]


@eager("LpPool")
def _lp_pool(ctx, node, ins):
    x0 = floats(ctx, node, ins[0])
    dims = x0.shape[2:]
    kernel = [int(k) for k in ctx.attr(node, "kernel_shape", [])]
    m = len(dims)
    strides = [int(v) for v in ctx.attr(node, "strides", [1] * m)]
    dil = [int(v) for v in ctx.attr(node, "dilations", [1] * m)]
    if x0.ndim < 3 or not len(kernel) == len(strides) == len(dil) == m:
        raise ctx.fail(node, f"X is {x0.shape}, kernel_shape {kernel}, strides {strides}, "
                             f"dilations {dil}; expected one of each per spatial axis")
    pads = _pool_pads(ctx, node, dims, kernel, strides, dil)
    ceil = bool(ctx.attr(node, "ceil_mode", 0))
    axes = [_pool_axis(n, k, s, d, pp, ceil) for n, k, s, d, pp in
            zip(dims, kernel, strides, dil, pads, strict=True)]
    # every (output position, tap) pair: its flat input position and whether it is inside
    idx, inside = np.zeros((1, 1), np.int64), np.ones((1, 1), bool)
    for (pos, ok), n in zip(axes, dims, strict=True):
        idx = (idx[:, None, :, None] * n + np.clip(pos, 0, n - 1)[None, :, None, :])
        inside = inside[:, None, :, None] & ok[None, :, None, :]
        idx = idx.reshape(idx.shape[0] * idx.shape[1], -1)
        inside = inside.reshape(idx.shape)
    out_shape = tuple(pos.shape[0] for pos, _ in axes)
    x = work(x0)
    n_, c = x.shape[:2]
    flat = xp.reshape(x, (n_, c, math.prod(dims)))
    taps = xp.take(flat, ctx.buffer(idx.reshape(-1).astype(np.int32)), axis=2)
    taps = xp.reshape(xp.abs(taps), (n_, c) + idx.shape)
    p = float(ctx.attr(node, "p", 2))
    powered = taps * taps if p == 2 else xp.pow(taps, p)
    total = xp.sum(powered * ctx.buffer(inside.astype(x.dtype.numpy)), axis=-1)
    y = xp.sqrt(total) if p == 2 else xp.pow(total, 1 / p)
    return [back(xp.reshape(y, (n_, c) + out_shape), x0)]


@eager("MaxUnpool")
def _max_unpool(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    idx = ctx.buffer(ins[1], "I")
    dims = x.shape[2:]
    m = len(dims)
    kernel = [int(k) for k in ctx.attr(node, "kernel_shape", [])]
    strides = [int(v) for v in ctx.attr(node, "strides", [1] * m)]
    flat_pads = list(ctx.attr(node, "pads", [0] * (2 * m)))
    if x.ndim < 3 or idx.shape != x.shape or len(kernel) != m or len(flat_pads) != 2 * m:
        raise ctx.fail(node, f"X {x.shape}, I {idx.shape}, kernel_shape {kernel}, pads "
                             f"{flat_pads}: expected I of X's shape and one kernel size and "
                             f"two pads per spatial axis")
    shape = x.shape[:2] + tuple((n - 1) * s + k - flat_pads[i] - flat_pads[i + m] for i, (
        n, k, s) in enumerate(zip(dims, kernel, strides, strict=True)))
    out = xp.asarray(xp.broadcast_to(const(ctx, 0, x.dtype), (math.prod(shape),)), copy=True)
    if x.size:
        out[xp.reshape(idx, (idx.size,))] = xp.reshape(x, (x.size,))  # (indices checked)
    out = xp.reshape(out, shape)
    if len(ins) > 2 and ins[2] is not None:  # a larger output: the result at its start
        from .eager_args import ints

        want = tuple(ints(ctx, node, ins[2], "output_shape"))
        if len(want) != len(shape) or any(w < n for w, n in zip(want, shape, strict=True)):
            raise ctx.fail(node, f"output_shape {list(want)} is smaller than the unpooled "
                                 f"shape {list(shape)}")
        full = xp.asarray(xp.broadcast_to(const(ctx, 0, x.dtype), want), copy=True)
        full[tuple(slice(0, n) for n in shape)] = out
        out = full
    return [out]


@eager("AffineGrid")
def _affine_grid(ctx, node, ins):
    from .eager_args import ints

    theta0 = floats(ctx, node, ins[0], "theta")
    size = ints(ctx, node, ins[1], "size")
    spatial = size[2:]
    k = len(spatial)
    if k not in (2, 3) or theta0.shape != (size[0], k, k + 1):
        raise ctx.fail(node, f"theta is {theta0.shape} and size {size}; expected (N, 2, 3) "
                             f"with (N, C, H, W) or (N, 3, 4) with (N, C, D, H, W)")
    align = bool(ctx.attr(node, "align_corners", 0))
    axes = [np.linspace(-1.0, 1.0, n) if align else (2 * np.arange(n) + 1) / n - 1.0
            for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)])
    theta = work(theta0)
    grid = xp.matmul(theta, ctx.buffer(base.astype(theta.dtype.numpy)))  # (N, k, P)
    grid = xp.reshape(xp.permute_dims(grid, (0, 2, 1)), (size[0], *spatial, k))
    return [back(grid, theta0)]

