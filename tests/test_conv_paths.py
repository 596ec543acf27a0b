"""The convolution kernels' fast paths against onnxruntime at awkward shapes: the skinny
implicit GEMM (few output columns, long K: split K inside the workgroup) in each of its x
gathers (vec4 pixels, scalar pointwise, general windows), its configs, residual epilogue and
f16; which kernel a layer gets untuned; and the autotuner timing a layer's candidates.

Tolerances as in tests/test_ml_ops.py: f32 1e-5 of the largest output (sums of up to a few
thousand f32 terms in another order), f16 storage 4 · 2^-11."""

import json

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import autotune
from wgcompute.kernels import registry
from wgcompute.kernels.conv import conv_configs
from wgcompute.kernels.conv.conv_configs import ConvProblem, SkinnyConfig
from wgcompute.kernels.matmul.matmul import TileConfig

ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
onnx = pytest.importorskip("onnx")
from test_ml_ops import close, ort_node, rnd  # noqa: E402

# (N, C, H, W, K, KH, KW, stride, pads (t, l, b, r), dilation, group)
SKINNY_CASES = [
    (1, 160, 7, 7, 96, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),   # pointwise, P = 49
    (3, 33, 4, 4, 21, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),    # vec4 pixels, P = 16
    (5, 130, 1, 1, 37, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),   # a classifier: P = 1
    (1, 17, 9, 8, 13, 3, 3, (2, 1), (1, 0, 2, 1), (1, 2), 1),    # a window, odd everything
    (2, 12, 6, 6, 10, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2),    # window in groups
    (2, 12, 5, 5, 10, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 2),    # pointwise in groups
]
SKINNY_CONFIGS = ["sk16x16x1_4", "sk1x64x4_1", "sk8x32x1_4", "sk4x16x2_2", "sk2x1x4_4",
                  "sk16x8x2_1", "sk16x1x16_9", "sk16x1x4_6"]


def conv_ref(x, w, b, stride, pads, dil, g):
    return ort_node("Conv", [x, w, b], dict(strides=list(stride), pads=list(pads),
                                            dilations=list(dil), group=g))


@pytest.mark.parametrize("case", SKINNY_CASES, ids=[f"case{i}" for i in range(len(SKINNY_CASES))])
@pytest.mark.parametrize("cfg", SKINNY_CONFIGS)
def test_skinny_conv_against_onnxruntime(rng, case, cfg):
    """Every config over every gather: columns and rows past the edges of a workgroup's
    block, K not a multiple of the slices or of the 4-deep unroll, one slice (no partial
    sums in workgroup memory)."""
    n, c, h, w_, k, kh, kw, stride, pads, dil, g = case
    x, w, b = rnd(rng, n, c, h, w_), rnd(rng, k, c // g, kh, kw), rnd(rng, k)
    want = conv_ref(x, w, b, stride, pads, dil, g)
    out = wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (x, w, b)], None, {
        "strides": stride, "pads": pads, "dilations": dil, "group": g,
        "_config": SkinnyConfig.parse(cfg)})
    close(out.to_numpy(), want)


@pytest.mark.parametrize("side", [7, 4])
def test_skinny_residual_epilogue(rng, side):
    """act1(act0(conv + bias) + residual) through the skinny kernel (scalar and vec4 pixels)
    against onnxruntime's Conv, Clip, Add, Relu one after another."""
    x, w, b = rnd(rng, 2, 40, side, side), rnd(rng, 24, 40, 1, 1), rnd(rng, 24)
    res = rnd(rng, 2, 24, side, side)
    want = np.maximum(np.clip(ort_node("Conv", [x, w, b]), 0, 6) + res, 0)
    out = wgc.run_kernel("conv2d_residual", [wgc.from_numpy(a) for a in (x, w, b, res)], None,
                         {"activation": ("clip", 0, 6), "post_activation": "relu",
                          "_config": SkinnyConfig(8, 8, 2, 2)})
    close(out.to_numpy(), want)


def test_skinny_f16(rng):
    if "shader-f16" not in wgc.device_info()["features"]:
        pytest.skip("adapter lacks shader-f16")
    x, w, b = rnd(rng, 1, 96, 7, 7), rnd(rng, 50, 96, 1, 1) * 0.2, rnd(rng, 50)
    xh, wh, bh = (a.astype(np.float16) for a in (x, w, b))
    want = ort_node("Conv", [a.astype(np.float32) for a in (xh, wh, bh)])
    got = wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (xh, wh, bh)], None,
                         {"algo": "skinny"})
    assert got.dtype == "f16"
    close(got.to_numpy(), want, rel=4 * 2.0**-11)


def test_skinny_algo_param_and_config_checks(rng):
    x, w, b = rnd(rng, 1, 64, 5, 5), rnd(rng, 30, 64, 1, 1), rnd(rng, 30)
    want = ort_node("Conv", [x, w, b])
    bufs = [wgc.from_numpy(a) for a in (x, w, b)]
    close(wgc.run_kernel("conv2d", bufs, None, {"algo": "skinny"}).to_numpy(), want)
    close(wgc.run_kernel("conv2d", bufs, None, {"algo": "gemm"}).to_numpy(), want)
    with pytest.raises(wgc.ArgumentError, match="TileConfig or a SkinnyConfig"):
        wgc.run_kernel("conv2d", bufs, None, {"_config": "sk16x16x1_4"})
    with pytest.raises(wgc.ArgumentError, match="does not fit"):
        wgc.run_kernel("conv2d", bufs, None, {"_config": SkinnyConfig(16, 64, 4, 4)})
    with pytest.raises(wgc.ArgumentError, match="skCXxSxRY_TR"):
        SkinnyConfig.parse("sk16x16_4x")
    with pytest.raises(wgc.ArgumentError, match="positive int"):
        SkinnyConfig(0, 1, 1, 1)
    assert SkinnyConfig.parse("sk8x32x1_4") == SkinnyConfig(8, 32, 1, 4)
    assert conv_configs.parse_config("64x64x16_4x4") == TileConfig.parse("64x64x16_4x4")


@pytest.mark.parametrize("cfg", [c.name for c in conv_configs.CONV_EXTRA])
def test_conv_only_tiles_against_onnxruntime(rng, cfg):
    """The tiles only the convolutions' tuner times, each on a pointwise layer (vec4 pixels;
    24 output channels: a 32-row block past M) with a residual, and on a strided window with
    pads (scalar gathers, K = 27 past the k slices)."""
    tile = TileConfig.parse(cfg)
    assert tile.name in conv_configs.tiled_choices(wgc.current_device())
    x, w, b = rnd(rng, 2, 40, 8, 8), rnd(rng, 24, 40, 1, 1), rnd(rng, 24)
    res = rnd(rng, 2, 24, 8, 8)
    want = np.maximum(np.clip(ort_node("Conv", [x, w, b]), 0, 6) + res, 0)
    out = wgc.run_kernel("conv2d_residual", [wgc.from_numpy(a) for a in (x, w, b, res)], None,
                         {"activation": ("clip", 0, 6), "post_activation": "relu",
                          "algo": "gemm", "_config": tile})
    close(out.to_numpy(), want)
    x, w, b = rnd(rng, 2, 3, 17, 15), rnd(rng, 37, 3, 3, 3), rnd(rng, 37)
    want = conv_ref(x, w, b, (2, 2), (1, 1, 0, 1), (1, 1), 1)
    out = wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (x, w, b)], None,
                         {"strides": (2, 2), "pads": (1, 1, 0, 1), "algo": "gemm",
                          "_config": tile})
    close(out.to_numpy(), want)


def test_untuned_choice_by_shape():
    """Few workgroups of the tiled kernel over a long K: the skinny kernel (MobileNetV2's
    7×7 layers and classifier at batch 1); many columns or a short K: the tiled one."""
    dev = wgc.current_device()

    def pick(m, n, k, p=49):
        return conv_configs.default_config(ConvProblem("f32", m, n, k, p, (1, 1, 1, 1, 1, 1)),
                                           dev)

    assert isinstance(pick(160, 49, 960), SkinnyConfig)
    assert pick(1000, 1, 1280, 1) == SkinnyConfig(1, 64, 4, 1)
    # a short K over many pixels: one slice, every output channel in one workgroup
    assert pick(96, 401408, 16, 12544) == SkinnyConfig(16, 1, 16, 6)
    assert isinstance(pick(960, 3136, 48, 3136), TileConfig)  # K too short to slice
    window = ConvProblem("f32", 32, 401408, 27, 12544, (3, 3, 2, 2, 1, 1))
    assert isinstance(conv_configs.default_config(window, dev), TileConfig)
    assert "sk16x1x8_4" in conv_configs.candidates(window, dev)
    for m, n, k in [(160, 49, 960), (1000, 1, 1280), (1000, 32, 1280), (24, 3136, 96)]:
        cfg = conv_configs.skinny_default(m, n, k)
        assert cfg.threads <= conv_configs.SKINNY_THREADS and cfg.s <= max(1, k // 8)


def test_autotune_times_a_layer_and_keeps_its_choice(tuning_cache, monkeypatch, rng):
    """Forced on (lavapipe skips tuning by default): a 7×7 layer's candidates (tiled and
    skinny) are timed on the layer itself, the winner is remembered under the layer's shape
    and used, correctly."""
    monkeypatch.setenv("WGCOMPUTE_AUTOTUNE", "1")
    x, w, b = rnd(rng, 1, 96, 7, 7), rnd(rng, 40, 96, 1, 1), rnd(rng, 40)
    want = ort_node("Conv", [x, w, b])
    out = wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (x, w, b)], None,
                         {"activation": "relu"})
    close(out.to_numpy(), np.maximum(want, 0))
    stored = json.loads((tuning_cache / "autotune.json").read_text())
    key = ConvProblem("f32", 40, 49, 96, 49, (1, 1, 1, 1, 1, 1)).key
    chosen = stored[autotune.adapter_key(wgc.current_device())][key]
    problem = ConvProblem("f32", 40, 49, 96, 49, (1, 1, 1, 1, 1, 1))
    assert chosen in conv_configs.candidates(problem, wgc.current_device())
    assert any(n.startswith("sk") for n in conv_configs.candidates(problem,
                                                                   wgc.current_device()))


# (N, C, H, W, multiplier, KH, KW, stride, pads, dilation)
DEPTHWISE_CASES = [
    (1, 8, 14, 14, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),   # MobileNetV2's stride 1
    (3, 12, 9, 9, 1, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),    # ... and stride 2, odd sides
    (2, 5, 7, 7, 1, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),     # rows of 4 past the edge
    (1, 3, 9, 13, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),    # channel multiplier 2
    (2, 4, 11, 6, 1, 5, 3, (2, 1), (2, 0, 1, 2), (1, 2)),    # asymmetric everything
    (1, 6, 1, 9, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # one row: blocks of one row
    (1, 6, 17, 17, 1, 7, 7, (1, 1), (3, 3, 3, 3), (2, 2)),   # too wide: one output each
    # rows of a multiple of 4 (2) values: x in aligned vec4 (vec2) loads, out in vector stores
    (2, 4, 16, 16, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),   # vec4 in and out
    (2, 4, 16, 16, 1, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),   # stride 2: 9 columns, 3 vec4
    (1, 4, 12, 12, 1, 3, 3, (2, 2), (0, 0, 1, 1), (1, 1)),   # no left pad; out rows of 6: vec2
    (1, 2, 8, 20, 1, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1)),    # left pad 2: lanes 2, 3 first
    (1, 3, 12, 12, 1, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)),   # dilation 2
    (1, 3, 8, 8, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # multiplier 2, vec4
    (1, 5, 7, 14, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),    # vec2, a block past the end
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES,
                         ids=[f"dw{i}" for i in range(len(DEPTHWISE_CASES))])
def test_depthwise_against_onnxruntime(rng, case):
    n, c, h, w_, mult, kh, kw, stride, pads, dil = case
    x, w, b = rnd(rng, n, c, h, w_), rnd(rng, c * mult, 1, kh, kw), rnd(rng, c * mult)
    want = ort_node("Conv", [x, w, b], dict(strides=list(stride), pads=list(pads),
                                            dilations=list(dil), group=c))
    got = wgc.ml.conv2d(x, w, b, stride=stride, padding=pads, dilation=dil, groups=c,
                        activation=("clip", -0.5, 0.5))
    close(got, np.clip(want, -0.5, 0.5))


def test_depthwise_block_rows_by_window():
    from wgcompute.kernels.conv.depthwise import dw_rows as _dw_rows

    assert _dw_rows(3, 3, 1, 1, 1, 1, 112) == 2  # 4 input rows × 6 columns per 2×4 block
    assert _dw_rows(3, 3, 2, 2, 1, 1, 56) == 2
    assert _dw_rows(3, 3, 1, 1, 1, 1, 1) == 1
    assert _dw_rows(7, 7, 1, 1, 2, 2, 17) == 0   # a 13×16 window span: one output each


@pytest.mark.parametrize("width", [10, 16, 9, 12], ids=["vec2", "vec4", "scalar", "vec4-12"])
def test_depthwise_residual_and_f16(rng, width):
    """The blocked depthwise kernel with a residual, f32 and f16, for rows of a multiple of 2,
    of 4 and an odd count; the key says which vector widths ran, and that f16 with vec4 rows
    takes blocks of 8 columns (rows of 12: the second vec4 of a row's last block is past its
    end)."""
    x, w, b = rnd(rng, 2, 6, 9, width), rnd(rng, 6, 1, 3, 3), rnd(rng, 6)
    res = rnd(rng, 2, 6, 9, width)
    params = {"pads": (1, 1, 1, 1), "group": 6, "post_activation": "relu"}
    vec = {10: 2, 16: 4, 9: 1, 12: 4}[width]
    dtypes = [np.float32]
    if "shader-f16" in wgc.device_info()["features"]:
        dtypes.append(np.float16)
    for dt in dtypes:
        ins = [a.astype(dt) for a in (x, w, b, res)]
        f = [a.astype(np.float32) for a in ins]
        want = np.maximum(ort_node("Conv", f[:3], dict(pads=[1] * 4, group=6)) + f[3], 0)
        bufs = [wgc.from_numpy(a) for a in ins]
        out = wgc.run_kernel("conv2d_residual", bufs, None, params)
        kern = registry.get("conv2d_residual")
        key = dict(kern.key(bufs, out, kern.resolve_params(dict(params), None)).constants)
        assert (key["dw_rows"], key.get("vin", 1), key.get("vout", 1)) == (2, vec, vec)
        assert key.get("dw_cols", 4) == (8 if dt == np.float16 and vec == 4 else 4)
        close(out.to_numpy().astype(np.float32), want,
              rel=1e-5 if dt == np.float32 else 4 * 2.0**-11)


F16 = pytest.mark.skipif("shader-f16" not in wgc.device_info()["features"],
                         reason="adapter lacks shader-f16")
# (N, C, H, W, K, KH, pads, residual): a pointwise layer (vec4 pixels), a 3×3 window with pads
MIXED_CASES = [(2, 96, 8, 8, 24, 1, 0, False), (1, 19, 9, 7, 40, 3, 1, True)]


@F16
@pytest.mark.parametrize("case", MIXED_CASES, ids=["pointwise", "window-residual"])
@pytest.mark.parametrize("cfg", ["64x64x16_4x4", "64x128x8_8x8_u", "32x32x16_4x4",
                                 "32x128x16_4x8_u"])
def test_mixed_precision_conv_within_its_bound(rng, case, cfg):
    """precision='mixed' on the tiled GEMM: each k slice of BK products summed in f16, the
    slices in f32. Against the exact (f64) convolution of the f16-rounded operands, every
    output is within matmul's mixed bound (γ(2·BK, 2^-11) + γ(⌈K/BK⌉, 2^-24))·(|w|·|x|) plus
    the f16 output's rounding (2^-11·|y|); and the f32-precision run of the same layer is
    within its own, 16x tighter, bound. The key says which path ran."""
    n, c, h, w_, k, kh, pad, residual = case
    tile = TileConfig.parse(cfg)
    xh = rnd(rng, n, c, h, w_).astype(np.float16)
    wh = (rnd(rng, k, c, kh, kh) / np.sqrt(c * kh * kh)).astype(np.float16)
    bh = rnd(rng, k).astype(np.float16)
    pads = (pad,) * 4
    conv = np.float64
    want = ort_node("Conv", [a.astype(np.float32) for a in (xh, wh, bh)],
                    dict(pads=list(pads))).astype(conv)
    mag = ort_node("Conv", [np.abs(a).astype(np.float32) for a in (xh, wh, bh)],
                   dict(pads=list(pads))).astype(conv)
    ins = [xh, wh, bh]
    kernel = "conv2d"
    if residual:
        rh = rnd(rng, *want.shape).astype(np.float16)
        want, mag = want + rh, mag + np.abs(rh)
        ins.append(rh)
        kernel = "conv2d_residual"
    bufs = [wgc.from_numpy(a) for a in ins]
    kdim = c * kh * kh

    def gamma(m, u):
        return m * u / (1 - m * u)

    for precision, bound in (
            ("mixed", gamma(2 * tile.bk, 2.0**-11) + gamma(-(-kdim // tile.bk), 2.0**-24)),
            ("f32", gamma(kdim, 2.0**-24))):
        params = {"pads": pads, "algo": "gemm", "_config": tile, "precision": precision}
        out = wgc.run_kernel(kernel, bufs, None, params)
        kern = registry.get(kernel)
        key = dict(kern.key(bufs[:len(kern.inputs)], out,
                            kern.resolve_params(dict(params), None)).constants)
        assert key.get("mixed", False) == (precision == "mixed")
        got = out.to_numpy().astype(conv)
        # the f32 accumulator's error and the f16 output's rounding (plus f16 subnormals)
        allowed = bound * mag + 2.0**-11 * np.abs(want) + 2 * kdim * 2.0**-14
        assert (np.abs(got - want) <= allowed).all(), (precision, float(
            (np.abs(got - want) / allowed).max()))


@F16
def test_mixed_precision_is_refused_for_f32_and_checked():
    x, w, b = (wgc.from_numpy(np.ones(s, np.float32)) for s in ((1, 4, 4, 4), (4, 4, 1, 1), (4,)))
    with pytest.raises(wgc.ArgumentError, match="precision.*needs f16"):
        wgc.run_kernel("conv2d", [x, w, b], None, {"precision": "mixed"})
    with pytest.raises(wgc.ArgumentError, match="precision"):
        wgc.run_kernel("conv2d", [x, w, b], None, {"precision": "f8"})



def test_a_choice_tuned_during_binding_keeps_shader_and_grid_of_one_tile(rng, monkeypatch):
    """Background tuning may remember another tile between a binding's key (the shader) and
    its launches (the grid): conv2d and gemm look their choice up once a binding. Here it
    alternates between two tiles at every lookup; a grid of one over the shader of the other
    would leave outputs unwritten."""
    from wgcompute.kernels.conv import gemm as gemm_mod

    dev = wgc.device()
    fits = conv_configs.tiled_choices(dev)
    small, big = (fits[nm] for nm in ("32x32x16_4x4", "128x128x8_8x8"))
    picks = iter([small, big] * 8)
    monkeypatch.setattr(conv_configs, "choose", lambda *a, **k: next(picks))
    x, w, b = rnd(rng, 1, 24, 20, 20), rnd(rng, 40, 24, 3, 3), rnd(rng, 40)
    out = wgc.empty((1, 40, 20, 20), "f32")
    out.write(np.full(out.shape, np.nan, np.float32))
    wgc.run_kernel("conv2d", [wgc.from_numpy(a) for a in (x, w, b)], out,
                   {"pads": (1, 1, 1, 1), "algo": "gemm"})
    close(out.to_numpy(), conv_ref(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1))
    names = iter(["32x32x16_4x4", "128x128x8_8x8"] * 8)
    monkeypatch.setattr(gemm_mod.tuning, "choice", lambda device, problem: next(names))
    a, bm, c = (rng.standard_normal(s).astype(np.float32) for s in ((150, 70), (70, 130),
                                                                     (130,)))
    got = wgc.empty((150, 130), "f32")
    got.write(np.full(got.shape, np.nan, np.float32))
    wgc.run_kernel("gemm", [wgc.from_numpy(v) for v in (a, bm, c)], got, None)
    close(got.to_numpy(), a.astype(np.float64) @ bm + c)
