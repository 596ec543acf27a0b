"""What the ONNX operator lowerings share: the nn kernel instances they emit, helpers for node
attributes and step labels, and the stride/pad/dilation geometry of convolutions and pools."""

from __future__ import annotations

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
)

ACT = Activation()
BINARY = Binary()
BATCHNORM = BatchNorm()
POOL = Pool()
GLOBAL_POOL = GlobalPool()
SOFTMAX = Softmax()
TRANSPOSE = Transpose()
LRN_K = LRN()
COPY = CopyRows()


def _a(n, key, default=None):
    return n.attrs.get(key, default)


def _label(*names) -> str:
    return "+".join(x for x in names if x)


# -- the geometry of convolutions and pools --------------------------------------------------------
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
