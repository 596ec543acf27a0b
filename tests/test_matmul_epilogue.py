"""The matmul kernel with an epilogue (kernels/matmul/epilogue.py: out = act(a · b + bias) in
the write-back) against numpy's f64 at awkward shapes, each activation, f16, b read transposed
and tile configurations with and without split-K; its refusals; and the linear layers of interpreted
ONNX models fused into it (ml/fuse_linear.py, and Gemm's bias in ml/eager_shape.py), checked
against onnxruntime, with the patterns that must not fuse.

Tolerances: Matmul's bound for the product, K·2^-24·(|a|·|b|) (tests/test_matmul.py), widened
by the f32 add and activation (a few ulp of the result: 2^-20 relative, plus erf's few ulp in
GELU) and, for f16 results, f16's rounding (2^-11 relative)."""

import math

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.matmul import epilogue
from wgcompute.kernels.matmul.epilogue import MATMUL_BIAS
from wgcompute.kernels.matmul.matmul import CANDIDATES, Matmul, TileConfig
from wgcompute.kernels.matmul.tiling import render_tiled
from wgcompute.ml.eager_shape import matmul_bias
from wgcompute.runtime import current_device

_erf = np.vectorize(math.erf, otypes=[np.float64])
ACTS = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0.0),
        "gelu": lambda v: 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))}


def need_f16():
    if "shader-f16" not in wgc.device_info()["features"]:
        pytest.skip("adapter lacks shader-f16")


def run_case(rng, m, n, k, dt="f32", act="none", has_bias=True, tb=False, config=None,
             precision=None):
    npd = wgc.DTYPES[dt].numpy
    a = rng.uniform(-1, 1, (m, k)).astype(npd)
    b = rng.uniform(-1, 1, (k, n)).astype(npd)
    bias = rng.uniform(-1, 1, n).astype(npd)
    params = {"activation": act, "has_bias": has_bias}
    if tb:
        params["_tb"] = True
    if config is not None:
        params["_config"] = config
    if precision is not None:
        params["precision"] = precision
    ga = wgc.from_numpy(a)
    bufs = [ga, wgc.from_numpy(np.ascontiguousarray(b.T) if tb else b),
            wgc.from_numpy(bias) if has_bias else ga]
    got = wgc.run_kernel(MATMUL_BIAS, bufs, None, params).to_numpy()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    z = a64 @ b64 + (bias.astype(np.float64) if has_bias else 0.0)
    want = ACTS[act](z)
    mixed = precision == "mixed"
    eps = 2.0**-11 * 16 if mixed else max(k, 1) * 2.0**-24 * 2
    bound = eps * (np.abs(a64) @ np.abs(b64)) + 2.0**-20 * (np.abs(z) + 1)
    if dt == "f16":
        bound = bound + 2.0**-11 * np.abs(want) + 2.0**-14
    assert got.shape == (m, n) and got.dtype == npd
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound), f"{m}x{n}x{k} {dt} {act}: max err {err.max():.3g}"


SHAPES = [(1, 1, 1), (5, 7, 3), (33, 64, 17), (130, 36, 70), (67, 129, 45), (64, 128, 32),
          (3, 8, 0)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("act", list(ACTS))
def test_f32_against_numpy(m, n, k, act, rng):
    run_case(rng, m, n, k, "f32", act)


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("m,n,k", [(5, 7, 3), (70, 36, 33)])
def test_without_bias(m, n, k, act, rng):
    run_case(rng, m, n, k, "f32", act, has_bias=False)


@pytest.mark.parametrize("m,n,k", [(5, 7, 3), (67, 129, 45), (40, 64, 36)])
@pytest.mark.parametrize("act", list(ACTS))
def test_b_read_transposed(m, n, k, act, rng):
    run_case(rng, m, n, k, "f32", act, tb=True)


@pytest.mark.parametrize("precision", ["f32", "mixed"])
@pytest.mark.parametrize("m,n,k", [(5, 7, 3), (67, 129, 45), (64, 96, 64)])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_f16(m, n, k, act, precision, rng):
    need_f16()
    run_case(rng, m, n, k, "f16", act, precision=precision)
    run_case(rng, m, n, k, "f16", act, tb=True, precision=precision)


def _whole_k_configs():
    device = current_device()
    names = ("32x32x16_4x4", "64x64x16_4x4", "128x128x8_8x8_u", "64x128x8_8x8_u_e",
             "128x128x16_8x8_u_sb", "128x128x8_8x8_u_g8")
    return [c for c in Matmul.candidates("f32", device) if c.name in names]


@pytest.mark.parametrize("act", list(ACTS))
def test_special_values(act):
    """act of each value (a (M, 1) of ones times b (1, N) of the values, no bias): nan stays
    nan, ±inf, and GELU's erf at the edges of its pieces (1, 2.5 and 4: times √2). GELU's
    1 + erf cancels for x < 0: f32's rounding of erf near -1 (2^-24) is 0.5·|x|·2^-24."""
    edges = [e * math.sqrt(2) * f for e in (1.0, 2.5, 4.0) for f in (1 - 1e-6, 1.0, 1 + 1e-6)]
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.3, -0.7, 1e30, -1e30,
                  -5.0, -9.0, 9.0, *edges, *(-e for e in edges)], np.float32)
    a = wgc.from_numpy(np.ones((3, 1), np.float32))
    got = wgc.run_kernel(MATMUL_BIAS, [a, wgc.from_numpy(v[None, :]), a], None,
                         {"activation": act, "has_bias": False}).to_numpy()
    with np.errstate(all="ignore"):
        want = ACTS[act](v.astype(np.float64))
    bound = 4e-7 * np.abs(want) + 2.0**-24 * np.abs(v) + 1e-37
    for row in got.astype(np.float64):
        assert np.array_equal(np.isnan(row), np.isnan(want))
        with np.errstate(invalid="ignore"):  # (inf - inf)
            ok = np.isnan(want) | (row == want) | (np.abs(row - want) <= bound)
        assert ok.all(), (v[~ok], row[~ok], want[~ok])


def test_tile_configurations(rng):
    configs = _whole_k_configs()
    assert len(configs) >= 4
    for cfg in configs:
        run_case(rng, 131, 70, 37, "f32", "gelu", config=cfg)


SPLITS = ("32x32x16_4x4_s4", "64x64x16_4x4_s8", "32x64x16_4x4_s2")


@pytest.mark.parametrize("name", SPLITS)
@pytest.mark.parametrize("act", list(ACTS))
def test_split_k_configs(name, act, rng):
    """A split-K tile: k slices added into an f32 temporary, then act(temporary + bias) in a
    second step; the result is within the same bound as whole K, with and without a bias,
    b read transposed, and at a K that is no multiple of the slices."""
    cfg = TileConfig.parse(name)
    run_case(rng, 70, 52, 300, "f32", act, config=cfg)
    run_case(rng, 33, 64, 257, "f32", act, has_bias=False, config=cfg)
    run_case(rng, 67, 20, 130, "f32", act, tb=True, config=cfg)


@pytest.mark.parametrize("act", ["none", "gelu"])
def test_split_k_f16(act, rng):
    need_f16()
    cfg = TileConfig.parse("32x32x16_4x4_s4")
    run_case(rng, 70, 52, 300, "f16", act, config=cfg, precision="f32")
    run_case(rng, 40, 36, 200, "f16", act, tb=True, config=cfg, precision="f32")


def test_a_tuned_split_k_choice_runs_in_two_steps(monkeypatch, rng):
    """The plain matmul's tuned choice that splits K is taken where its tile with whole K
    would launch fewer than BUSY workgroups: it binds the split-K matmul into a temporary,
    then matmul_bias_act into out."""
    from wgcompute.kernels import bind

    split = TileConfig.parse("32x64x16_4x4_s8")
    monkeypatch.setattr(epilogue._MATMUL, "config_for", lambda *a, **k: split)
    assert MATMUL_BIAS.config_for(128, 768, 3072, "f32", current_device()) == split
    a, b, c = _bufs(m=70, n=20, k=300)
    d = bind(MATMUL_BIAS, [a, b, c], wgc.empty((70, 20), "f32"), {"activation": "relu"})
    assert [part.kernel.name for part in d.parts] == ["matmul", "matmul_bias_act"]
    run_case(rng, 70, 20, 300, "f32", "relu")


def test_a_split_k_choice_where_whole_k_fills_the_gpu_is_taken_whole(monkeypatch, rng):
    """Where the tile with whole K launches BUSY workgroups or more, the product runs whole
    K: the class's default where that does not split, else the same tile with split 1."""
    split = TileConfig.parse("32x64x16_4x4_s8")
    monkeypatch.setattr(epilogue._MATMUL, "config_for", lambda *a, **k: split)
    cfg = MATMUL_BIAS.config_for(4096, 768, 768, "f32", current_device())
    assert cfg.split == 1
    monkeypatch.setattr(epilogue._MATMUL, "tune_problem", lambda *a, **k: None)
    assert MATMUL_BIAS.config_for(4096, 768, 64, "f32", current_device()) == \
        TileConfig.parse("32x64x16_4x4")


def test_the_helper_queues_it(rng):
    a = rng.standard_normal((9, 12)).astype(np.float32)
    b = rng.standard_normal((12, 6)).astype(np.float32)
    c = rng.standard_normal(6).astype(np.float32)
    y = matmul_bias(wgc.from_numpy(a), wgc.from_numpy(b), wgc.from_numpy(c), "relu")
    np.testing.assert_allclose(y.to_numpy(), np.maximum(a @ b + c, 0), rtol=1e-5, atol=1e-5)
    y = matmul_bias(wgc.from_numpy(a), wgc.from_numpy(np.ascontiguousarray(b.T)), None,
                    transpose_b=True)
    np.testing.assert_allclose(y.to_numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_the_plain_matmul_shader_has_no_epilogue():
    cfg = TileConfig.parse("64x64x16_4x4")
    src, fields = render_tiled(cfg, "f32", True, True)
    assert "bias" not in src and "act4" not in src
    assert "@binding(3) var<uniform> p: Params;" in src
    src, _ = render_tiled(cfg, "f32", True, True, epilogue=(True, epilogue.act_wgsl("relu")))
    assert "@binding(4) var<uniform> p: Params;" in src and "act4(c0_0 + e0)" in src
    assert any(c.split > 1 for c in CANDIDATES)


# -- refusals ------------------------------------------------------------------------------
def _bufs(m=4, n=8, k=5, dt="f32", bias_n=None, bias_dt=None):
    npd = wgc.DTYPES[dt].numpy
    return [wgc.from_numpy(np.ones((m, k), npd)), wgc.from_numpy(np.ones((k, n), npd)),
            wgc.from_numpy(np.ones(bias_n or n, wgc.DTYPES[bias_dt or dt].numpy))]


def test_a_bias_of_another_size_is_refused():
    with pytest.raises(wgc.ShapeError, match=r"matmul_bias: bias is \(7,\); expected \(8,\)"):
        wgc.run_kernel(MATMUL_BIAS, _bufs(bias_n=7))


def test_a_bias_of_another_dtype_is_refused():
    need_f16()
    with pytest.raises(wgc.DtypeError, match="matmul_bias: bias is f16, out is f32"):
        wgc.run_kernel(MATMUL_BIAS, _bufs(bias_dt="f16"))


def test_operands_of_another_dtype_are_refused():
    need_f16()
    a, b, c = _bufs()
    with pytest.raises(wgc.DtypeError, match="dtypes must match"):
        wgc.run_kernel(MATMUL_BIAS, [a, wgc.from_numpy(np.ones((5, 8), np.float16)), c])


def test_f64_is_refused():
    with pytest.raises(wgc.DtypeError, match="matmul_bias: dtype f64 is not supported"):
        wgc.run_kernel(MATMUL_BIAS, _bufs(dt="f64"))


def test_batched_and_vector_operands_are_refused():
    a, b, c = _bufs()
    with pytest.raises(wgc.ShapeError, match="matmul_bias: a is .*the epilogue takes 2-D"):
        wgc.run_kernel(MATMUL_BIAS, [wgc.from_numpy(np.ones((2, 4, 5), np.float32)), b, c])
    with pytest.raises(wgc.ShapeError, match="matmul_bias: b is"):
        wgc.run_kernel(MATMUL_BIAS, [a, wgc.from_numpy(np.ones(5, np.float32)), c])


@pytest.mark.parametrize("params, message", [
    ({"activation": "tanh"}, "param 'activation' must be one of"),
    ({"_ta": True}, r"param '_ta' \(a read transposed\) is not taken"),
    ({"_lb": ((5, 8), (8, 1), 0)}, r"param '_lb' .* is not taken"),
    ({"_f32_out": True}, r"param '_f32_out' \(a split-K temporary\) is not taken"),
    ({"has_bias": "no"}, "is a flag"),
])
def test_params_it_does_not_take_are_refused(params, message):
    with pytest.raises(wgc.ArgumentError, match=message):
        wgc.run_kernel(MATMUL_BIAS, _bufs(), None, params)


# -- linear layers of ONNX models --------------------------------------------------------------
try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper
except ImportError:  # the kernel's tests above still run
    onnx = None
needs_onnx = pytest.mark.skipif(onnx is None, reason="onnx and onnxruntime (the reference): "
                                                     "pip install 'wgcompute[ml]'")

from wgcompute.ml import eager_shape  # noqa: E402
from wgcompute.ml.fuse_linear import fuse_linear  # noqa: E402

K, N = 64, 72  # x·W's K and N; W alone is more than the 4096 elements folded on the host


class _Graph:
    """Nodes and initializers of a model being built, with fresh value names."""

    def __init__(self, seed=0):
        self.rng, self.nodes, self.inits, self.k = np.random.default_rng(seed), [], [], 0

    def const(self, value, name=None):
        self.k += 1
        name = name or f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def op(self, op, *ins, name=None, **attrs):
        self.k += 1
        out = f"v{self.k}"
        self.nodes.append(helper.make_node(op, list(ins), [out], name=name or f"{op}_{self.k}",
                                           **attrs))
        return out

    def linear(self, x, bias_shape=(N,), bias_first=False):
        w = self.const(self.rng.standard_normal((K, N)) / 8)
        b = self.const(self.rng.standard_normal(bias_shape))
        y = self.op("MatMul", x, w, name="mm")
        return self.op("Add", *((b, y) if bias_first else (y, b)), name="add")

    def model(self, outs, x_shape=(2, 5, K), opset=18):
        graph = helper.make_graph(
            self.nodes, "linear",
            [helper.make_tensor_value_info("x", T.FLOAT, [f"d{i}" for i in range(len(x_shape) - 1)]
                                           + [x_shape[-1]])],
            [helper.make_tensor_value_info(o, T.FLOAT, [f"d{i}" for i in range(len(x_shape))])
             for o in outs], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def _gelu(g, y, order, scale):
    """0.5 · y · (1 + erf(y / √2)) as exporters write it: the scaling by Div or Mul, and the
    two Muls in the order given."""
    if scale == "div":
        s = g.op("Div", y, g.const(math.sqrt(2.0)))
    else:
        s = g.op("Mul", g.const(1 / math.sqrt(2.0)), y)
    h = g.op("Add", g.const(1.0), g.op("Erf", s))
    if order == "torch":  # (y · h) · 0.5
        return g.op("Mul", g.op("Mul", y, h), g.const(0.5))
    if order == "half_h":  # y · (h · 0.5)
        return g.op("Mul", y, g.op("Mul", h, g.const(0.5)))
    return g.op("Mul", g.op("Mul", g.const(0.5), y), h)  # (0.5 · y) · h: transformers'


def _run(m, x, dtype="f32"):
    """The model's nodes after the fusion; its outputs for input x, and for a second input of
    x's shape (a replayed call), are onnxruntime's (within 1e-5, f16: 1e-2, of the largest)."""
    model = wgc.ml.load_onnx(m, dtype=dtype)
    assert model.path == "interpreted"
    fuse_linear(model.graph)  # (also run by load_onnx once graph.py calls it: it is idempotent)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for xv in (x, (x * 0.5 - 0.25).astype(x.dtype)):
        for got, ref in zip(model.run({"x": xv}), sess.run(None, {"x": xv}), strict=True):
            _close(got, ref, 1e-2 if dtype == "f16" else 1e-5)
    return list(model.graph.nodes)


@pytest.fixture
def kernel_calls(monkeypatch):
    """The activations the fused kernel ran with (eager_shape's calls of it)."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(args[3] if len(args) > 3 else kwargs.get("activation", "none"))
        return matmul_bias(*args, **kwargs)

    monkeypatch.setattr(eager_shape, "matmul_bias", spy)
    return calls


def _close(got, ref, rtol=1e-5):
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


@needs_onnx
@pytest.mark.parametrize("bias_shape, bias_first", [((N,), False), ((1, N), True),
                                                    ((1,), False)])
def test_matmul_add_fuses(bias_shape, bias_first, kernel_calls):
    g = _Graph()
    z = g.linear("x", bias_shape, bias_first)
    out = g.op("Neg", z, name="neg")  # (Neg runs in the interpreter only)
    x = np.random.default_rng(1).standard_normal((2, 5, K)).astype(np.float32)
    nodes = _run(g.model([out]), x)
    assert [(n.op, n.name) for n in nodes] == [("FusedMatMul", "mm+add"), ("Neg", "neg")]
    assert nodes[0].attrs["activation"] == "none" and nodes[0].domain == "wgcompute"
    assert kernel_calls == ["none"]  # (the second call replays the first's dispatches)


@needs_onnx
@pytest.mark.parametrize("order", ["torch", "half_h", "half_y"])
@pytest.mark.parametrize("scale", ["div", "mul"])
def test_matmul_add_gelu_fuses(order, scale, kernel_calls):
    g = _Graph(1)
    out = _gelu(g, g.linear("x"), order, scale)
    x = np.random.default_rng(2).standard_normal((3, 7, K)).astype(np.float32)
    nodes = _run(g.model([out]), x)
    assert [n.op for n in nodes] == ["FusedMatMul"]
    assert nodes[0].attrs["activation"] == "gelu" and nodes[0].name.startswith("mm+add+")
    assert len(nodes[0].name.split("+")) == 7
    assert kernel_calls == ["gelu"]


@needs_onnx
@pytest.mark.parametrize("act", ["Relu", "Gelu"])
def test_matmul_add_activation_node_fuses(act, kernel_calls):
    g = _Graph(2)
    out = g.op("Neg", g.op(act, g.linear("x"), name="act"), name="neg")
    x = np.random.default_rng(3).standard_normal((4, K)).astype(np.float32)
    nodes = _run(g.model([out], (4, K), opset=20), x)
    assert [(n.op, n.name) for n in nodes] == [("FusedMatMul", "mm+add+act"), ("Neg", "neg")]
    assert set(kernel_calls) == {act.lower()}


@needs_onnx
def test_f16_model_fuses(kernel_calls):
    need_f16()
    g = _Graph(3)
    out = _gelu(g, g.linear("x"), "torch", "div")
    x = np.random.default_rng(4).standard_normal((2, 9, K)).astype(np.float32)
    nodes = _run(g.model([out]), x, dtype="f16")
    assert [n.op for n in nodes] == ["FusedMatMul"] and set(kernel_calls) == {"gelu"}


@needs_onnx
@pytest.mark.parametrize("dtype, trans_b, bias_shape", [("f32", 1, (N,)), ("f32", 0, (1, N)),
                                                        ("f16", 1, (N,))])
def test_gemm_adds_its_bias_in_the_product(dtype, trans_b, bias_shape, kernel_calls):
    if dtype == "f16":
        need_f16()
    g = _Graph(4)
    w = g.const(g.rng.standard_normal((N, K) if trans_b else (K, N)) / 8)
    b = g.const(g.rng.standard_normal(bias_shape))
    out = g.op("Neg", g.op("Gemm", "x", w, b, transB=trans_b))
    x = np.random.default_rng(5).standard_normal((6, K)).astype(np.float32)
    nodes = _run(g.model([out], (6, K)), x, dtype)
    assert [n.op for n in nodes] == ["Gemm", "Neg"] and set(kernel_calls) == {"none"}


@needs_onnx
@pytest.mark.parametrize("n, bias_shape", [(N, (6, 1)), (N, ()), (1, ()), (1, (6, 1))])
def test_gemm_with_another_bias_adds_it_after(n, bias_shape, kernel_calls):
    g = _Graph(4)
    w = g.const(g.rng.standard_normal((K, n)) / 8)
    out = g.op("Neg", g.op("Gemm", "x", w, g.const(g.rng.standard_normal(bias_shape))))
    x = np.random.default_rng(5).standard_normal((6, K)).astype(np.float32)
    _run(g.model([out], (6, K)), x)
    assert kernel_calls == []


def _second_reader(g):
    z = g.linear("x")
    return [g.op("Relu", z), g.op("Neg", z)]  # z read twice: Relu does not fuse


def _product_read_twice(g):
    y = g.op("MatMul", "x", g.const(g.rng.standard_normal((K, N)) / 8), name="mm")
    return [g.op("Add", y, g.const(g.rng.standard_normal(N))), g.op("Erf", y)]


def _product_is_an_output(g):
    z = g.linear("x")
    return [g.nodes[-2].output[0], g.op("Erf", z)]


def _gelu_half_read_twice(g):
    out = _gelu(g, g.linear("x"), "torch", "div")
    return [out, g.nodes[-2].output[0]]  # y · (1 + erf) is an output too


@needs_onnx
@pytest.mark.parametrize("build, fused", [(_second_reader, ("mm+add", "none")),
                                          (_product_read_twice, None),
                                          (_product_is_an_output, None),
                                          (_gelu_half_read_twice, ("mm+add", "none"))])
def test_shared_intermediates_stop_the_fusion(build, fused, kernel_calls):
    g = _Graph(5)
    outs = build(g)
    x = np.random.default_rng(6).standard_normal((3, K)).astype(np.float32)
    nodes = _run(g.model(outs, (3, K)), x)
    got = [n for n in nodes if n.op == "FusedMatMul"]
    assert [(n.name, n.attrs["activation"]) for n in got] == ([fused] if fused else [])


@needs_onnx
def test_operands_the_kernel_does_not_take_run_the_original_nodes(kernel_calls):
    """A 1-D x (a vector times W), and an x known on the host (here from the input's shape):
    the nodes the fusion replaced run, on the host where they fold (a small product) or not."""
    for n in (0, 8, 2100):  # 0: x is 1-D; 8: 24 values fold on the host; 2100: 4202 do not
        g = _Graph(6)
        x = "x"
        if n:
            x = g.op("Reshape", g.op("Cast", g.op("Shape", "x"), to=T.FLOAT),
                     _int64(g, [1, 2]))
        w = g.const(g.rng.standard_normal((2, n) if n else (K, N)))
        z = g.op("Add", g.op("MatMul", x, w), g.const(g.rng.standard_normal(n or N)))
        out = g.op("Neg", g.op("Relu", z))
        shape = (3, 5) if n else (K,)
        xv = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        assert "FusedMatMul" in [nd.op for nd in _run(g.model([out], shape), xv)]
    assert kernel_calls == []


def _int64(g, value):
    g.k += 1
    g.inits.append(numpy_helper.from_array(np.asarray(value, np.int64), f"i{g.k}"))
    return f"i{g.k}"


@needs_onnx
def test_a_planned_model_is_left_as_it_is():
    g = _Graph(7)
    out = g.op("Relu", g.linear("x"))
    model = wgc.ml.load_onnx(g.model([out], (3, K)))
    assert model.path == "planned"
    before = [n.op for n in model.graph.nodes]
    assert fuse_linear(model.graph) == 0 and [n.op for n in model.graph.nodes] == before
