"""The operator kernels (wgcompute.kernels.nn.nn / conv, and their wgc.ml functions) against
onnxruntime's CPU operators at awkward shapes: each case is a one-node ONNX model run by
onnxruntime as the reference.

Tolerance (f32): max |ours - reference| <= 1e-5 · max |reference| (plus 1e-6 absolute for
all-zero results): each output is a dot product or a window of at most a few thousand f32
terms, summed in another order (error ~ K · 2^-24 relative to the terms' magnitude). f16
storage: the inputs, weights and outputs are rounded to f16 (2^-11 relative each) and sums
run in f32, so the bound is 4 · 2^-11 · max |reference| for these single layers."""

import math

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.matmul.matmul import TileConfig

ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def ort_node(op, inputs, attrs=None, opset=17, n_out=1):
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, [f"y{k}" for k in range(n_out)], **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in zip(names, inputs, strict=True)],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in range(n_out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs, strict=True)))[0]


def close(got, want, rel=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1e-30)
    err = float(np.abs(got - want).max()) if want.size else 0.0
    assert err <= rel * scale + 1e-6, f"max error {err:.3g} > {rel:.1g} · {scale:.3g}"


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# (N, C, H, W, K, KH, KW, stride, pads (t, l, b, r), dilation, group)
CONVS = [
    (1, 3, 17, 13, 8, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),   # a first layer
    (2, 16, 7, 9, 24, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),   # pointwise, P = 63
    (1, 5, 11, 10, 7, 5, 3, (1, 2), (2, 0, 1, 2), (1, 1), 1),   # odd kernel, asymmetric pads
    (2, 4, 12, 12, 6, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 2),   # dilation, groups
    (3, 12, 9, 9, 12, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 12),  # depthwise, stride 2
    (1, 6, 8, 7, 12, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 6),    # depthwise, multiplier 2
    (1, 9, 6, 5, 6, 2, 2, (1, 1), (0, 0, 0, 0), (1, 1), 3),     # groups of 3 channels
    (2, 33, 5, 5, 70, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),   # K % 4 != 0 weights
    (3, 20, 6, 6, 13, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),   # pointwise, vec4 pixels
    (2, 12, 4, 4, 10, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 2),   # ... in groups
]


@pytest.mark.parametrize("case", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_conv2d_against_onnxruntime(rng, case):
    n, c, h, w_, k, kh, kw, stride, pads, dil, g = case
    x, w, b = rnd(rng, n, c, h, w_), rnd(rng, k, c // g, kh, kw), rnd(rng, k)
    want = ort_node("Conv", [x, w, b], dict(strides=list(stride), pads=list(pads),
                                            dilations=list(dil), group=g))
    got = wgc.ml.conv2d(x, w, b, stride=stride, padding=pads, dilation=dil, groups=g)
    close(got, want)
    if g > 1 and c == g:  # the depthwise kernel's result again through the implicit GEMM
        xs = [wgc.from_numpy(a) for a in (x, w, b)]
        out = wgc.run_kernel("conv2d", xs, None, {
            "strides": stride, "pads": pads, "dilations": dil, "group": g, "algo": "gemm"})
        close(out.to_numpy(), want)


@pytest.mark.parametrize("cfg", ["32x32x16_4x4", "64x64x16_4x4", "64x128x8_8x8_u",
                                 "128x64x16_8x4"])
def test_conv2d_every_tile_config(rng, cfg):
    """The implicit GEMM with tile configs other than the default (edges in M, N and K)."""
    config = TileConfig.parse(cfg)
    if not config.fits(wgc.current_device(), 4):
        pytest.skip(f"{cfg} does not fit this adapter")
    x, w, b = rnd(rng, 2, 19, 10, 11), rnd(rng, 37, 19, 3, 3), rnd(rng, 37)
    want = ort_node("Conv", [x, w, b], dict(pads=[1, 1, 1, 1]))
    out = wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (x, w, b)], None,
                         {"pads": (1, 1, 1, 1), "_config": config})
    close(out.to_numpy(), want)


@pytest.mark.parametrize("k,pad,side", [(3, 1, 9), (1, 0, 8)])
def test_conv2d_fused_epilogue_matches_the_separate_ops(rng, k, pad, side):
    """act1(act0(conv + bias) + residual): conv2d_residual against onnxruntime's Conv,
    Clip, Add and Relu run one after another (3×3, and 1×1 on vec4 pixels)."""
    x, w, b = rnd(rng, 2, 8, side, side), rnd(rng, 8, 8, k, k), rnd(rng, 8)
    res = rnd(rng, 2, 8, side, side)
    y = ort_node("Conv", [x, w, b], dict(pads=[pad] * 4))
    y = np.clip(y, 0, 6) + res
    want = np.maximum(y, 0)
    out = wgc.run_kernel("conv2d_residual", [wgc.from_numpy(a) for a in (x, w, b, res)], None,
                         {"pads": (pad,) * 4, "activation": ("clip", 0, 6),
                          "post_activation": "relu"})
    close(out.to_numpy(), want)


def test_conv2d_f16(rng):
    if "shader-f16" not in wgc.device_info()["features"]:
        pytest.skip("adapter lacks shader-f16")
    x, w, b = rnd(rng, 1, 16, 14, 14), rnd(rng, 32, 16, 3, 3) * 0.2, rnd(rng, 32)
    xh, wh, bh = (a.astype(np.float16) for a in (x, w, b))
    want = ort_node("Conv", [a.astype(np.float32) for a in (xh, wh, bh)],
                    dict(pads=[1, 1, 1, 1]))
    got = wgc.ml.conv2d(*(wgc.from_numpy(a) for a in (xh, wh, bh)), padding=1)
    assert got.dtype == "f16"
    close(got.to_numpy(), want, rel=4 * 2.0**-11)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[2, 1], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1, ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[3, 3], ceil_mode=1)),
])
def test_pools_against_onnxruntime(rng, op, attrs):
    x = rnd(rng, 2, 3, 11, 8)
    want = ort_node(op, [x], attrs)
    mode = "max" if op == "MaxPool" else "avg"
    got = wgc.run_kernel("nn_pool", [wgc.from_numpy(x)], None, {
        "mode": mode, "kernel": tuple(attrs["kernel_shape"]),
        "strides": tuple(attrs["strides"]), "pads": tuple(attrs.get("pads", (0,) * 4)),
        "dilations": tuple(attrs.get("dilations", (1, 1))),
        "ceil_mode": bool(attrs.get("ceil_mode")),
        "count_include_pad": bool(attrs.get("count_include_pad"))})
    close(got.to_numpy(), want)


@pytest.mark.parametrize("hw", [(13, 11), (7, 7), (16, 16), (17, 17)])
def test_global_pools(rng, hw):
    """Planes of up to 256 values summed by one invocation each, larger ones by a
    workgroup each (17×17)."""
    x = rnd(rng, 3, 5, *hw)
    close(wgc.ml.global_avg_pool(x), x.mean((2, 3), keepdims=True))
    close(wgc.ml.global_max_pool(x), x.max((2, 3), keepdims=True))


@pytest.mark.parametrize("name,op,attrs", [
    ("relu", "Relu", {}), ("sigmoid", "Sigmoid", {}), ("hard_swish", "HardSwish", {}),
    ("hard_sigmoid", "HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("leaky_relu", "LeakyRelu", {"alpha": 0.2}), ("tanh", "Tanh", {}),
])
def test_activations_against_onnxruntime(rng, name, op, attrs):
    x = rnd(rng, 3, 7, 5) * 4
    want = ort_node(op, [x], attrs)
    got = wgc.ml.activation(x, name, *attrs.values())
    close(got, want)


def test_relu6_and_clip(rng):
    x = rnd(rng, 1001) * 8
    close(wgc.ml.relu6(x), np.clip(x, 0, 6))
    close(wgc.ml.clip(x, -1.5, 2.0), np.clip(x, -1.5, 2.0))


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4, 5), (3, 1, 1)), ((5,), (4, 1)),
                                             ((2, 1, 6), (1, 7, 1)), ((3, 3), ())])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_broadcasting(rng, a_shape, b_shape, op):
    a, b = rnd(rng, *a_shape), rnd(rng, *b_shape) + 3
    want = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[op]
    close(getattr(wgc.ml, op)(a, b), want)


def test_binary_refuses_shapes_that_do_not_broadcast(rng):
    with pytest.raises(wgc.ShapeError, match=r"\(2, 3\).*\(4,\).*do not broadcast"):
        wgc.ml.add(rnd(rng, 2, 3), rnd(rng, 4))


def test_batch_norm_against_onnxruntime(rng):
    x = rnd(rng, 2, 6, 5, 4)
    scale, bias, mean = rnd(rng, 6), rnd(rng, 6), rnd(rng, 6)
    var = rng.uniform(0.5, 2, 6).astype(np.float32)
    want = ort_node("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3})
    close(wgc.ml.batch_norm(x, scale, bias, mean, var, epsilon=1e-3), want)


@pytest.mark.parametrize("shape,trans_a,trans_b,c_shape", [
    ((37, 19), False, False, (23,)), ((19, 37), True, True, (37, 1)),
    ((4, 37, 19), False, False, ()), ((1, 5, 33), False, True, (5, 23)),
])
def test_gemm_against_numpy(rng, shape, trans_a, trans_b, c_shape):
    a = rnd(rng, *shape)
    k = shape[-2] if trans_a else shape[-1]
    b = rnd(rng, 23, k) if trans_b else rnd(rng, k, 23)
    c = rnd(rng, *c_shape)
    opa = np.swapaxes(a, -1, -2) if trans_a else a
    opb = b.T if trans_b else b
    want = 0.5 * (opa.astype(np.float64) @ opb) + 2.0 * c
    got = wgc.ml.gemm(a, b, c, alpha=0.5, beta=2.0, trans_a=trans_a, trans_b=trans_b)
    close(got, want)


def test_batched_matmul_broadcasts_like_numpy(rng):
    a, b = rnd(rng, 2, 1, 9, 6), rnd(rng, 3, 6, 5)
    close(wgc.ml.matmul(a, b), np.matmul(a, b))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_and_log_softmax(rng, axis):
    x = rnd(rng, 4, 70, 3) * 5
    close(wgc.ml.softmax(x, axis), ort_node("Softmax", [x], {"axis": axis}, opset=13))
    close(wgc.ml.log_softmax(x, axis), ort_node("LogSoftmax", [x], {"axis": axis}, opset=13))


def test_transpose_concat_reshape(rng):
    x = rnd(rng, 2, 3, 4, 5)
    close(wgc.ml.transpose(x, (0, 2, 3, 1)), x.transpose(0, 2, 3, 1))
    close(wgc.ml.transpose(x), x.T)
    y = rnd(rng, 2, 5, 4, 5)
    close(wgc.ml.concat([x, y], axis=1), np.concatenate([x, y], 1))
    buf = wgc.from_numpy(x)
    flat = wgc.ml.flatten(buf)
    assert flat.shape == (2, 60)
    close(flat.to_numpy(), x.reshape(2, 60))


def test_lrn_against_onnxruntime(rng):
    x = rnd(rng, 2, 7, 4, 3)
    want = ort_node("LRN", [x], dict(size=3, alpha=2e-4, beta=0.7, bias=1.5))
    close(wgc.ml.lrn(x, 3, 2e-4, 0.7, 1.5), want)


@pytest.mark.parametrize("stride,pad,outpad,group", [(2, 1, 1, 1), (1, 0, 0, 2), (3, 2, 0, 1)])
def test_conv_transpose_against_onnxruntime(rng, stride, pad, outpad, group):
    x, w, b = rnd(rng, 2, 4, 5, 6), rnd(rng, 4, 3, 3, 3), rnd(rng, 3 * group)
    want = ort_node("ConvTranspose", [x, w, b], dict(strides=[stride] * 2, pads=[pad] * 4,
                                                     output_padding=[outpad] * 2, group=group))
    got = wgc.ml.conv_transpose2d(x, w, b, stride=stride, padding=pad, output_padding=outpad,
                                  groups=group)
    close(got, want)


def test_kernels_check_their_shapes_and_name_the_argument(rng):
    x, w = wgc.from_numpy(rnd(rng, 1, 4, 5, 5)), wgc.from_numpy(rnd(rng, 6, 3, 3, 3))
    b = wgc.from_numpy(rnd(rng, 6))
    with pytest.raises(wgc.ShapeError, match="w is.*axis 1 must be 4"):
        wgc.run_kernel("conv2d", [x, w, b])
    with pytest.raises(wgc.ArgumentError, match="param 'activation'"):
        wgc.run_kernel("nn_activation", [x], None, {"activation": "swishy"})
    out = wgc.empty((1, 4, 2, 2))
    with pytest.raises(wgc.ShapeError, match="out is"):
        wgc.run_kernel("nn_pool", [x], out, {"kernel": (3, 3)})
    with pytest.raises(wgc.ShapeError, match="inner dimensions"):
        wgc.ml.gemm(rnd(rng, 3, 4), rnd(rng, 5, 2))


def test_logical_shapes_run_on_flat_storage(rng):
    """A model's layers run on flat scratch buffers, shapes given by the 'shapes' param."""
    x = rnd(rng, 2, 3, 4, 4)
    flat_in = wgc.from_numpy(np.concatenate([x.reshape(-1), np.zeros(7, np.float32)]))
    flat_out = wgc.empty((200,))
    wgc.run_kernel("nn_pool", [flat_in], flat_out, {
        "kernel": (2, 2), "strides": (2, 2), "mode": "avg",
        "shapes": ((2, 3, 4, 4), (2, 3, 2, 2))})
    got = flat_out.to_numpy()[:24].reshape(2, 3, 2, 2)
    close(got, x.reshape(2, 3, 2, 2, 2, 2).mean((3, 5)))
    with pytest.raises(wgc.ShapeError, match="must hold"):
        wgc.run_kernel("nn_pool", [wgc.empty((10,))], flat_out, {
            "kernel": (2, 2), "shapes": ((2, 3, 4, 4), (2, 3, 3, 3))})
    assert math.prod((2, 3, 2, 2)) == 24
