"""ONNX's nn, indexing and shape-making operators in wgcompute's interpreter, node by node:
single-node (and a few two-node) models built with onnx.helper, run through load_onnx on the
GPU and compared with onnxruntime (or onnx's reference implementation where onnxruntime does
not run the operator), over shapes, attributes and dtypes; integer indices also computed at
run time on the GPU. What wgcompute cannot do is refused with a ModelError, asserted here."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime, the reference")
# interpreted models carry int64 (shapes, indices, token ids) and float64 tensors on the
# GPU: on adapters without shader-int64 (wgpu's GL backend) load_onnx refuses them, naming
# the feature (tests/test_onnx_backend.py checks those refusals)
pytestmark = pytest.mark.needs("shader-int64")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.errors import IndexingError, ModelError, WgComputeError  # noqa: E402

_TP = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
       np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64,
       np.int32: TensorProto.INT32, np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8,
       np.int8: TensorProto.INT8, np.int16: TensorProto.INT16, np.uint16: TensorProto.UINT16}
RNG = np.random.default_rng(20261127)


def _dev():
    return wgc.default_device()


def needs(dtype):
    feature = {np.float16: "shader-f16", np.float64: "shader-f64"}.get(dtype)
    return pytest.mark.skipif(feature is not None and not _dev().has(feature),
                              reason=f"the adapter lacks {feature}")


def make(op, feeds, opset=21, inits=None, outs=1, out_types=None, inputs=None, nodes=(),
         **attrs):
    """A model of one ``op`` node (after ``nodes``) on graph inputs ``feeds`` (name -> array)
    and initializers ``inits``; outputs y0.. typed as the first input unless ``out_types``."""
    inits = inits or {}
    first = _TP[next(iter(feeds.values())).dtype.type]
    names = inputs if inputs is not None else [*feeds, *inits]
    node = helper.make_node(op, names, [f"y{i}" for i in range(outs)], **attrs)
    g = helper.make_graph(
        [*nodes, node], "t",
        [helper.make_tensor_value_info(k, _TP[v.dtype.type], v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(f"y{i}", (out_types or {}).get(i, first), None)
         for i in range(outs)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def reference(model, feeds):
    try:
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, feeds)
    except Exception:  # noqa: BLE001 - onnxruntime lacks the operator or version
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds)


def check(model, feeds, rtol=1e-5, atol=1e-6, onnx_reference=False):
    if onnx_reference:
        from onnx.reference import ReferenceEvaluator

        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        want = reference(model, feeds)
    m = wgc.ml.load_onnx(model)
    try:
        got = m.run(list(feeds.values()))
    finally:
        m.free()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)
    return got


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- erf: the op table's row ------------------------------------------------------------------
@pytest.mark.parametrize("dtype,max_ulp", [pytest.param(np.float32, 3, marks=needs(np.float32)),
                                           pytest.param(np.float64, 3, marks=needs(np.float64)),
                                           pytest.param(np.float16, 1, marks=needs(np.float16))])
def test_erf_within_a_few_ulp_of_math_erf(dtype, max_ulp):
    x = np.concatenate([RNG.uniform(-7, 7, 20000), RNG.uniform(-1.3, 1.3, 20000),
                        np.logspace(-30, 1, 300), -np.logspace(-30, 1, 300),
                        [0.84375, 1.0, 2.0, 2.5, 3.5, 4.0, 6.0]]).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    x = np.concatenate([x, specials])
    m = wgc.ml.load_onnx(make("Erf", {"x": x}, opset=13))
    (y,) = m.run([x])
    m.free()
    exact = np.array([math.erf(v) for v in x[:-5].astype(np.float64)])
    ulp = np.spacing(np.abs(exact.astype(dtype))).astype(np.float64)
    err = np.abs(y[:-5].astype(np.float64) - exact) / ulp
    assert err.max() <= max_ulp, (err.max(), x[np.argmax(err)])
    tail = y[-5:]
    assert tail[0] == 0 and not np.signbit(tail[0]) and tail[1] == 0 and np.signbit(tail[1])
    assert tail[2] == 1 and tail[3] == -1 and np.isnan(tail[4])


# -- activations ------------------------------------------------------------------------------
ACTIVATIONS = [("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20), ("Softplus", {}, 18),
               ("Softsign", {}, 18), ("Elu", {"alpha": 0.7}, 18), ("Selu", {}, 18),
               ("Selu", {"alpha": 1.5, "gamma": 2.0}, 18), ("Celu", {"alpha": 2.0}, 18),
               ("ThresholdedRelu", {"alpha": 0.4}, 18), ("Mish", {}, 18),
               ("Shrink", {"lambd": 0.3, "bias": 0.1}, 18), ("Erf", {}, 13)]


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 7)])
def test_activation_matches_onnxruntime(op, attrs, opset, shape):
    x = randn(*shape) * 3
    x.flat[0] = 0.0
    check(make(op, {"x": x}, opset=opset, **attrs), {"x": x}, rtol=2e-6, atol=2e-6)


@needs(np.float16)
@pytest.mark.parametrize("op", ["Gelu", "Softplus", "Elu", "Mish", "Shrink"])
def test_activation_of_float16_computes_in_float32(op):
    x = randn(4, 6, dtype=np.float16)
    check(make(op, {"x": x}, opset=20), {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("slope_shape", [(5,), (1,), (3, 1, 1), (4, 5)])
def test_prelu_broadcasts_its_slope(slope_shape):
    x, s = randn(2, 3, 4, 5), randn(*slope_shape)
    check(make("PRelu", {"x": x, "s": s}, opset=16), {"x": x, "s": s})


def test_prelu_refuses_a_slope_that_does_not_broadcast():
    x, s = randn(2, 3), randn(4)
    with pytest.raises(WgComputeError):
        wgc.ml.load_onnx(make("PRelu", {"x": x, "s": s}, opset=16)).run([x, s])


@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (0, 13), (1, 11), (2, 11)])
def test_hardmax_one_hot_of_the_first_largest(axis, opset):
    x = np.round(randn(2, 3, 4) * 2)  # ties: the first one wins
    check(make("Hardmax", {"x": x}, opset=opset, axis=axis), {"x": x})


# -- normalizations ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((2, 3, 4), -1), ((2, 3, 4), 1), ((3, 3000), -1),
                                        ((4, 7), 0), ((1, 1), -1)])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_one_kernel(shape, axis, bias):
    x = randn(*shape) * 3 + 1
    s, b = randn(*shape[axis:]), randn(*shape[axis:])
    feeds = {"x": x, "s": s, **({"b": b} if bias else {})}
    check(make("LayerNormalization", feeds, opset=17, axis=axis, epsilon=1e-3), feeds,
          rtol=1e-4, atol=1e-5)


def test_layer_norm_mean_and_inverse_std_outputs():
    x, s, b = randn(2, 3, 5), randn(3, 5), randn(3, 5)
    feeds = {"x": x, "s": s, "b": b}
    check(make("LayerNormalization", feeds, opset=17, outs=3, axis=1), feeds, rtol=1e-4,
          atol=1e-5)


def test_layer_norm_broadcasts_scale_and_bias():
    x = randn(2, 3, 5)
    feeds = {"x": x}
    inits = {"s": randn(5), "b": randn(1)}
    check(make("LayerNormalization", feeds, opset=17, inits=inits, axis=1), feeds, rtol=1e-4,
          atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [pytest.param(np.float16, 2e-3, marks=needs(np.float16)),
                                       pytest.param(np.float64, 1e-12, marks=needs(np.float64))])
def test_layer_norm_dtypes(dtype, tol):
    x, s, b = randn(3, 40, dtype=dtype), randn(40, dtype=dtype), randn(40, dtype=dtype)
    feeds = {"x": x, "s": s, "b": b}
    check(make("LayerNormalization", feeds, opset=17), feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm_scale_per_group_then_per_channel(opset):
    x = randn(2, 6, 3, 2)
    c = 3 if opset < 21 else 6
    feeds = {"x": x, "s": randn(c), "b": randn(c)}
    check(make("GroupNormalization", feeds, opset=opset, num_groups=3, epsilon=1e-3), feeds,
          rtol=1e-4, atol=1e-5)


def test_instance_norm_mvn_and_lp_norm():
    x = randn(2, 3, 4, 5)
    feeds = {"x": x, "s": randn(3), "b": randn(3)}
    check(make("InstanceNormalization", feeds, opset=6), feeds, rtol=1e-4, atol=1e-5)
    check(make("MeanVarianceNormalization", {"x": x}, opset=13), {"x": x}, rtol=1e-4,
          atol=1e-5)
    check(make("MeanVarianceNormalization", {"x": x}, opset=13, axes=[1, 3]), {"x": x},
          rtol=1e-4, atol=1e-5)
    for p in (1, 2):
        check(make("LpNormalization", {"x": x}, opset=1, axis=2, p=p), {"x": x})


# -- attention --------------------------------------------------------------------------------
ATTENTION = [
    ("4d", (2, 3, 4, 8), (2, 3, 6, 8), {}),
    ("4d_scaled_causal", (2, 3, 4, 8), (2, 3, 6, 8), {"scale": 0.3, "is_causal": 1}),
    ("4d_gqa", (2, 6, 4, 8), (2, 2, 5, 8), {}),
    ("4d_softcap", (1, 2, 3, 4), (1, 2, 3, 4), {"softcap": 2.0}),
    ("3d_heads", (2, 4, 12), (2, 5, 12), {"q_num_heads": 3, "kv_num_heads": 3}),
    ("3d_gqa_causal", (2, 4, 12), (2, 5, 6), {"q_num_heads": 4, "kv_num_heads": 2,
                                             "is_causal": 1}),
]


@pytest.mark.parametrize("name,qshape,kshape,attrs", ATTENTION, ids=[a[0] for a in ATTENTION])
def test_attention(name, qshape, kshape, attrs):
    q, k, v = randn(*qshape), randn(*kshape), randn(*kshape)
    feeds = {"q": q, "k": k, "v": v}
    check(make("Attention", feeds, opset=23, **attrs), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_dtype", [np.float32, np.bool_])
def test_attention_mask_past_present_and_scores(mask_dtype):
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 3, 4), randn(2, 2, 3, 4)
    pk, pv = randn(2, 2, 2, 4), randn(2, 2, 2, 4)
    mask = RNG.random((3, 4)) > 0.3 if mask_dtype == np.bool_ else randn(3, 4)
    feeds = {"q": q, "k": k, "v": v, "m": mask.astype(mask_dtype), "pk": pk, "pv": pv}
    for mode in (0, 2, 3):
        check(make("Attention", feeds, opset=23, outs=4, qk_matmul_output_mode=mode,
                   is_causal=1), feeds, rtol=1e-4, atol=1e-5)


# -- shape-making ------------------------------------------------------------------------------
def test_expand_tile_split():
    x = randn(2, 1, 4)
    check(make("Expand", {"x": x}, opset=13, inits={"s": np.array([3, 1, 5, 1], np.int64)}),
          {"x": x})
    check(make("Tile", {"x": x}, opset=13, inits={"r": np.array([2, 3, 1], np.int64)}),
          {"x": x})
    y = randn(2, 7, 3)
    check(make("Split", {"x": y}, opset=13, outs=3, axis=1,
               inits={"s": np.array([2, 0, 5], np.int64)}), {"x": y})
    check(make("Split", {"x": y}, opset=11, outs=2, axis=-1, split=[1, 2]), {"x": y})
    check(make("Split", {"x": y}, opset=18, outs=3, axis=1, num_outputs=3), {"x": y})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_range_of_run_time_inputs(dtype):
    feeds = {"a": np.array(2, dtype), "b": np.array(17, dtype), "c": np.array(3, dtype)}
    check(make("Range", feeds, opset=11), feeds)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype,axis", [(np.float32, 1), (np.int64, -1), (np.int32, 0)])
def test_cumsum(exclusive, reverse, dtype, axis):
    x = (randn(3, 4, 5) * 10).astype(dtype)
    check(make("CumSum", {"x": x}, opset=14, exclusive=exclusive, reverse=reverse,
               inits={"a": np.array(axis, np.int64)}), {"x": x}, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 2, 1, 1, 1, 2], [1, -1, 0, 0, 1, -1]])
def test_pad_modes(mode, pads):
    x = randn(2, 3, 4)
    check(make("Pad", {"x": x}, opset=19, mode=mode,
               inits={"p": np.array(pads, np.int64), "v": np.array(1.5, np.float32)}),
          {"x": x})


def test_pad_axes_and_integers():
    x = (randn(2, 3, 4) * 10).astype(np.int64)
    check(make("Pad", {"x": x}, opset=18, mode="constant", inputs=["x", "p", "v", "ax"],
               inits={"p": np.array([1, 2, 0, 1], np.int64), "v": np.array(7, np.int64),
                      "ax": np.array([0, -1], np.int64)}), {"x": x})


# -- sorting and gathers -----------------------------------------------------------------------
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [1, -1])
def test_topk_ties_by_lower_index(largest, axis):
    x = np.round(randn(3, 6, 5) * 2)
    check(make("TopK", {"x": x}, opset=11, outs=2, out_types={1: TensorProto.INT64},
               axis=axis, largest=largest, inits={"k": np.array([3], np.int64)}), {"x": x})


def test_topk_refuses_what_it_cannot_sort():
    x = np.arange(6, dtype=np.uint64)
    m = make("TopK", {"x": np.arange(6.0, dtype=np.float32)}, opset=11, outs=2,
             out_types={1: TensorProto.INT64}, inits={"k": np.array([2], np.int64)})
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.UINT64
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.UINT64
    with pytest.raises(ModelError, match="TopK"):
        wgc.ml.load_onnx(m).run([x])


def _computed(name):
    """A node making ``name`` from ``name + '_in'`` on the GPU (int64 Add of 0)."""
    return helper.make_node("Add", [f"{name}_in", "zero"], [name])


def test_gather_elements_negative_and_run_time_indices():
    x = randn(3, 4, 5)
    i = RNG.integers(-4, 4, (3, 2, 5)).astype(np.int64)
    check(make("GatherElements", {"x": x, "i": i}, opset=13, axis=1), {"x": x, "i": i})
    feeds = {"x": x, "i_in": i}
    check(make("GatherElements", feeds, opset=13, axis=1, inputs=["x", "i"],
               inits={"zero": np.array(0, np.int64)}, nodes=[_computed("i")]), feeds)


@pytest.mark.parametrize("batch_dims,ishape", [(0, (2, 2)), (0, (3, 1, 3)), (1, (3, 2, 1)),
                                               (2, (3, 4, 1))])
def test_gather_nd(batch_dims, ishape):
    x = randn(3, 4, 5)
    dims = x.shape[batch_dims:batch_dims + ishape[-1]]
    i = np.stack([RNG.integers(-d, d, ishape[:-1]) for d in dims], axis=-1).astype(np.int64)
    feeds = {"x": x, "i_in": i}
    check(make("GatherND", feeds, opset=13, batch_dims=batch_dims, inputs=["x", "i"],
               inits={"zero": np.array(0, np.int64)}, nodes=[_computed("i")]), feeds)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions_combine_repeated_indices_in_order(reduction):
    x = randn(4, 3, 2)
    i = np.array([[1], [3], [1]] if reduction != "none" else [[1], [3], [0]], np.int64)
    u = randn(3, 3, 2)
    feeds = {"x": x, "i": i, "u": u}
    check(make("ScatterND", feeds, opset=18, reduction=reduction), feeds)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_elements(reduction, dtype):
    x = (randn(3, 4) * 5).astype(dtype)
    i = np.array([[1, 0, 2, 3], [0, 2, 1, 0]] if reduction == "none" else
                 [[1, 1, 2, -1], [1, 2, 2, 0]], np.int64)
    u = (randn(2, 4) * 5).astype(dtype)
    feeds = {"x": x, "i": i, "u": u}
    check(make("ScatterElements", feeds, opset=18, axis=1, reduction=reduction), feeds)


def test_scatter_refuses_an_index_out_of_range():
    x, u = randn(3, 4), randn(1, 2)
    i = np.array([[0, 9]], np.int64)
    m = wgc.ml.load_onnx(make("ScatterElements", {"x": x, "i": i, "u": u}, opset=18, axis=1,
                              reduction="add"))
    with pytest.raises(IndexingError, match="9"):
        m.run([x, i, u])


# -- masks, one-hots, positions, rearrangements ------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu(upper, k):
    x = randn(2, 4, 5)
    check(make("Trilu", {"x": x}, opset=14, upper=upper, inits={"k": np.array(k, np.int64)}),
          {"x": x})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(axis):
    i = np.array([[1, -2, 4], [0, 3, 7]], np.int64)
    check(make("OneHot", {"i": i}, opset=11, axis=axis, out_types={0: TensorProto.FLOAT},
               inits={"d": np.array(5, np.int64), "v": np.array([0.5, 2], np.float32)}),
          {"i": i})


def test_nonzero_and_compress():
    x = randn(3, 4) > 0.2
    check(make("NonZero", {"x": x}, opset=13, out_types={0: TensorProto.INT64}), {"x": x})
    y = randn(3, 4)
    check(make("Compress", {"y": y}, opset=11, axis=1,
               inits={"c": np.array([1, 0, 1], bool)}), {"y": y})
    c = np.array([0, 1, 1, 0, 1], bool)
    check(make("Compress", {"y": y, "c": c}, opset=11), {"y": y, "c": c})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    x = randn(2, 8, 2, 3)
    check(make("DepthToSpace", {"x": x}, opset=13, blocksize=2, mode=mode), {"x": x})
    y = randn(1, 2, 4, 6)
    check(make("SpaceToDepth", {"x": y}, opset=13, blocksize=2), {"x": y})


EINSUM = [("ij->ji", [(3, 4)]), ("ij->i", [(3, 4)]), ("...ii->...i", [(2, 3, 3)]),
          ("ii", [(4, 4)]), ("i,i", [(5,), (5,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
          ("ij,jk", [(3, 4), (4, 2)]), ("i,j->ij", [(3,), (4,)]),
          ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5),
                                                                            (2, 3, 6, 5)]),
          ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]), ("ijk->", [(2, 3, 4)]),
          ("iij->j", [(3, 3, 2)]), ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 2)])]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(equation, shapes):
    feeds = {f"x{i}": randn(*s) for i, s in enumerate(shapes)}
    check(make("Einsum", feeds, opset=12, equation=equation), feeds, rtol=1e-5, atol=1e-5)


def test_einsum_refuses_what_does_not_fit():
    x = randn(3, 4)
    with pytest.raises(ModelError, match="Einsum"):
        wgc.ml.load_onnx(make("Einsum", {"x": x}, opset=12, equation="ijk->i")).run([x])


# -- resize ------------------------------------------------------------------------------------
RESIZE = [
    ("nearest", {}, "scales", [1, 1, 2.0, 1.5]),
    ("nearest", {"nearest_mode": "floor", "coordinate_transformation_mode": "align_corners"},
     "sizes", [1, 2, 7, 3]),
    ("nearest", {"nearest_mode": "ceil"}, "scales", [1, 1, 0.6, 0.5]),
    ("nearest", {"nearest_mode": "round_prefer_ceil",
                 "coordinate_transformation_mode": "asymmetric"}, "sizes", [1, 2, 9, 9]),
    ("linear", {}, "scales", [1, 1, 2.0, 0.5]),
    ("linear", {"coordinate_transformation_mode": "pytorch_half_pixel"}, "sizes",
     [1, 2, 3, 1]),
    ("linear", {"coordinate_transformation_mode": "half_pixel_symmetric"}, "scales",
     [1, 1, 1.7, 0.6]),
    ("linear", {"antialias": 1}, "scales", [1, 1, 0.4, 0.7]),
    ("cubic", {}, "scales", [1, 1, 1.5, 2.0]),
    ("cubic", {"cubic_coeff_a": -0.5, "exclude_outside": 1}, "scales", [1, 1, 0.8, 1.3]),
    ("cubic", {"antialias": 1, "coordinate_transformation_mode": "align_corners"}, "sizes",
     [1, 2, 3, 2]),
]


@pytest.mark.parametrize("mode,attrs,kind,values", RESIZE,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(RESIZE)])
def test_resize(mode, attrs, kind, values):
    x = randn(1, 2, 5, 6)
    v = np.array(values, np.float32 if kind == "scales" else np.int64)
    names = ["x", "", "v"] if kind == "scales" else ["x", "", "", "v"]
    check(make("Resize", {"x": x}, opset=19, inputs=names, inits={"v": v}, mode=mode,
               **attrs), {"x": x}, rtol=1e-4, atol=1e-5)


def test_resize_axes_aspect_policy_and_crop():
    x = randn(1, 2, 5, 6)
    check(make("Resize", {"x": x}, opset=19, inputs=["x", "", "", "v"], axes=[3, 2],
               keep_aspect_ratio_policy="not_larger", mode="nearest",
               inits={"v": np.array([4, 9], np.int64)}), {"x": x})
    check(make("Resize", {"x": x}, opset=19, inputs=["x", "r", "", "v"], mode="linear",
               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0,
               inits={"r": np.array([0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7], np.float32),
                      "v": np.array([1, 2, 3, 3], np.int64)}), {"x": x})


def test_resize_nearest_of_integers_and_refusals():
    x = (randn(1, 1, 3, 4) * 50).astype(np.uint8)
    check(make("Resize", {"x": x}, opset=19, inputs=["x", "", "v"], mode="nearest",
               inits={"v": np.array([1, 1, 2, 1.5], np.float32)}), {"x": x})
    with pytest.raises(ModelError, match="integer|computes float"):
        wgc.ml.load_onnx(make("Resize", {"x": x}, opset=19, inputs=["x", "", "v"],
                              mode="linear",
                              inits={"v": np.array([1, 1, 2, 2], np.float32)})).run([x])
    y = randn(1, 1, 3, 4)
    with pytest.raises(ModelError, match="antialias"):
        wgc.ml.load_onnx(make("Resize", {"y": y}, opset=19, inputs=["y", "", "v"],
                              mode="nearest", antialias=1,
                              inits={"v": np.array([1, 1, 0.5, 0.5], np.float32)}))


# -- control flow ------------------------------------------------------------------------------
def _branch(name, value):
    out = helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
    node = helper.make_node("Add", ["x", "c_" + name], [name])
    return helper.make_graph([node], name, [], [out], initializer=[
        numpy_helper.from_array(np.float32(value) * np.ones(3, np.float32), "c_" + name)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_host_condition_sees_the_outer_scope(cond):
    x = randn(3)
    c = np.array(cond)
    model = make("If", {"c": c, "x": x}, opset=13, inputs=["c"], out_types={0: TensorProto.FLOAT},
                 then_branch=_branch("t", 1.0), else_branch=_branch("e", -2.0))
    check(model, {"c": c, "x": x})


def test_if_refuses_a_condition_computed_at_run_time():
    # (from a tensor too large to compute again on the host, as small shape values are)
    x, big = randn(3), randn(5000)
    total = helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0)
    gt = helper.make_node("Greater", ["s", "zero"], ["c"])
    model = make("If", {"x": x, "big": big}, opset=13, inputs=["c"], nodes=[total, gt],
                 inits={"zero": np.float32(0)}, then_branch=_branch("t", 1.0),
                 else_branch=_branch("e", -2.0))
    m = wgc.ml.load_onnx(model)
    with pytest.raises(ModelError, match="known when the model is planned"):
        m.run([x, big])


def test_loop_with_a_trip_count_carries_and_scans():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["y_in", "x"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2])])
    feeds = {"m": np.array(4, np.int64), "c": np.array(True), "y": randn(2), "x": randn(2)}
    model = make("Loop", feeds, opset=13, outs=2, inputs=["m", "c", "y"],
                 out_types={0: TensorProto.FLOAT, 1: TensorProto.FLOAT}, body=body)
    check(model, feeds)


@pytest.mark.parametrize("op", ["GatherND", "ScatterND"])
def test_nd_refuses_a_coordinate_out_of_range(op):
    x = randn(3, 4)
    i = np.array([[1, 5]], np.int64)  # (1, 5) would alias the flat position (2, 1)
    feeds = {"x": x, "i": i, **({"u": randn(1)} if op == "ScatterND" else {})}
    m = wgc.ml.load_onnx(make(op, feeds, opset=18))
    with pytest.raises(IndexingError, match="5"):
        m.run(list(feeds.values()))


def test_prelu_of_opset_6_slopes_per_channel():
    x, s = randn(2, 3, 4, 5), randn(3)
    m = wgc.ml.load_onnx(make("PRelu", {"x": x, "s": s}, opset=6))
    (y,) = m.run([x, s])
    np.testing.assert_allclose(y, np.where(x < 0, x * s.reshape(3, 1, 1), x), rtol=1e-6)


@pytest.mark.parametrize("dtype,tol", [pytest.param(np.float32, 1e-4, marks=needs(np.float32)),
                                       pytest.param(np.float16, 3e-3, marks=needs(np.float16))])
def test_instance_and_group_norm_of_long_rows(dtype, tol):
    x = randn(2, 4, 30, 40, dtype=dtype) * 2 + 3
    feeds = {"x": x, "s": randn(4, dtype=dtype), "b": randn(4, dtype=dtype)}
    check(make("InstanceNormalization", feeds, opset=6), feeds, rtol=tol, atol=tol)
    check(make("GroupNormalization", feeds, opset=21, num_groups=2), feeds, rtol=tol,
          atol=tol)


@needs(np.float16)
def test_cumsum_of_float16_sums_in_float32():
    x = randn(3, 50, dtype=np.float16)
    check(make("CumSum", {"x": x}, opset=14, inits={"a": np.array(1, np.int64)}), {"x": x},
          rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("op,opset,mode,scales", [
    ("Upsample", 9, "nearest", [1, 1, 2, 3]), ("Upsample", 9, "linear", [1, 1, 2, 1.5]),
    ("Upsample", 7, "nearest", [1.0, 1.0, 2.0, 2.0]), ("Resize", 10, "nearest", [1, 1, 0.5, 0.7]),
    ("Resize", 10, "nearest", [1, 1, 1.5, 2.5]), ("Resize", 10, "linear", [1, 1, 0.6, 1.7])])
def test_upsample_and_resize_10_take_asymmetric_coordinates(op, opset, mode, scales):
    x = randn(1, 2, 4, 6)
    if opset == 7:
        model = make(op, {"x": x}, opset=opset, mode=mode, scales=scales)
    else:
        model = make(op, {"x": x}, opset=opset, mode=mode,
                     inits={"s": np.array(scales, np.float32)})
    check(model, {"x": x})


# -- beyond the lists: RMS normalization, Swish, SwiGLU, CumProd, RoPE, losses, ... ---------------
def test_rms_norm_swish_swiglu():
    x = randn(2, 3, 40) * 2
    feeds = {"x": x, "s": randn(40)}
    check(make("RMSNormalization", feeds, opset=23, epsilon=1e-3), feeds, rtol=1e-4,
          atol=1e-5)
    check(make("Swish", {"x": x}, opset=24, alpha=0.7), {"x": x}, rtol=1e-5, atol=1e-6)
    feeds = {"a": x, "b": randn(2, 3, 40)}
    check(make("SwiGLU", feeds, opset=28, alpha=1.3), feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod(exclusive, reverse):
    x = randn(3, 5) * 0.5 + 1
    check(make("CumProd", {"x": x}, opset=26, exclusive=exclusive, reverse=reverse,
               inits={"a": np.array(1, np.int64)}), {"x": x})


def test_eye_like_center_crop_pad_reverse_sequence():
    x = randn(3, 5)
    check(make("EyeLike", {"x": x}, opset=22, k=1), {"x": x})
    y = randn(4, 5, 3)
    check(make("CenterCropPad", {"y": y}, opset=18, axes=[0, 1],
               inits={"s": np.array([7, 2], np.int64)}), {"y": y})
    seq = randn(4, 3, 2)
    lens = np.array([4, 1, 3], np.int64)
    check(make("ReverseSequence", {"seq": seq, "lens": lens}, opset=10, batch_axis=1,
               time_axis=0), {"seq": seq, "lens": lens})


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank", [3, 4])
def test_rotary_embedding(interleaved, rank):
    b, h, s, d = 2, 3, 5, 8
    x = randn(b, h, s, d) if rank == 4 else randn(b, s, h * d)
    pos = RNG.integers(0, 10, (b, s)).astype(np.int64)
    feeds = {"x": x, "cos": randn(10, 3), "sin": randn(10, 3), "pos": pos}
    attrs = {"num_heads": h} if rank == 3 else {}
    check(make("RotaryEmbedding", feeds, opset=23, interleaved=interleaved,
               rotary_embedding_dim=6, **attrs), feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted,ignore", [(False, None), (True, None), (True, 2),
                                             (False, 1)])
def test_losses(reduction, weighted, ignore):
    x = randn(3, 4, 5)
    t = RNG.integers(0, 4, (3, 5)).astype(np.int64)
    feeds = {"x": x, "t": t, **({"w": RNG.random(4).astype(np.float32)} if weighted else {})}
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    check(make("NegativeLogLikelihoodLoss", feeds, opset=13, **attrs), feeds, rtol=1e-5,
          atol=1e-6)
    check(make("SoftmaxCrossEntropyLoss", feeds, opset=13, outs=2, **attrs), feeds,
          rtol=1e-5, atol=1e-6)


def test_loss_refuses_a_class_out_of_range():
    x, t = randn(2, 3), np.array([1, 3], np.int64)
    m = wgc.ml.load_onnx(make("NegativeLogLikelihoodLoss", {"x": x, "t": t}, opset=13))
    with pytest.raises(IndexingError):
        m.run([x, t])


@pytest.mark.parametrize("inverse,onesided,last", [(0, 0, 1), (0, 0, 2), (0, 1, 1), (1, 0, 2),
                                                   (1, 1, 2)])
@pytest.mark.parametrize("length", [None, 6, 12])
def test_dft_against_numpy(inverse, onesided, last, length):
    x = randn(2, 9, 3, last)
    inits = {} if length is None else {"n": np.array(length, np.int64)}
    names = ["x"] if length is None else ["x", "n"]
    m = wgc.ml.load_onnx(make("DFT", {"x": x}, opset=19, axis=1, inverse=inverse,
                              onesided=onesided, inputs=names, inits=inits))
    (y,) = m.run([x])
    m.free()
    z = x[..., 0].astype(np.float64) + (1j * x[..., 1] if last == 2 else 0)
    n = length or (2 * (x.shape[1] - 1) if inverse and onesided else x.shape[1])
    if inverse and onesided:
        want = np.fft.irfft(z, n=n, axis=1)[..., None]
    else:
        w = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=1)
        w = w[:, :n // 2 + 1] if onesided else w
        want = np.stack([w.real, w.imag], axis=-1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_of_a_run_time_size(op, periodic):
    size = np.array(10, np.int64)
    check(make(op, {"size": size}, opset=17, periodic=periodic,
               out_types={0: TensorProto.FLOAT}), {"size": size})


def test_scan_carries_states_and_reverses():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "e"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "e"], ["o"])],
        "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])])
    feeds = {"s": randn(2), "x": randn(2, 5)}
    model = make("Scan", feeds, opset=11, outs=2, body=body, num_scan_inputs=1,
                 scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])
    check(model, feeds)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_a_cache(mode):
    cache, upd = randn(2, 3, 6, 4), randn(2, 3, 3, 4)
    feeds = {"c": cache, "u": upd, "w": np.array([1, 4 if mode == "circular" else 3], np.int64)}
    check(make("TensorScatter", feeds, opset=24, mode=mode), feeds)


def test_det():
    x = randn(3, 4, 4)
    check(make("Det", {"x": x}, opset=22), {"x": x}, rtol=1e-4, atol=1e-5)


@needs(np.float16)
def test_loop_stacks_float16_scan_outputs():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["y_in", "y_in"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT16, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT16, [2]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT16, [2])])
    feeds = {"m": np.array(3, np.int64), "c": np.array(True), "y": randn(2, dtype=np.float16)}
    model = make("Loop", feeds, opset=13, outs=2, inputs=["m", "c", "y"],
                 out_types={0: TensorProto.FLOAT16, 1: TensorProto.FLOAT16}, body=body)
    check(model, feeds)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align):
    x = randn(2, 3, 5, 6)
    grid = (RNG.random((2, 4, 7, 2)) * 2.6 - 1.3).astype(np.float32)  # some outside [-1, 1]
    feeds = {"x": x, "g": grid}
    # (onnxruntime clamps only the taps, not the position, of cubic border sampling; ONNX's
    # reference implementation and backend cases clamp the position first, as wgcompute)
    check(make("GridSample", feeds, opset=22, mode=mode, padding_mode=padding,
               align_corners=align), feeds, rtol=1e-4, atol=1e-5,
          onnx_reference=(mode, padding) == ("cubic", "border"))


@pytest.mark.parametrize("src,to,elem", [(np.float32, np.int32, TensorProto.INT32),
                                         (np.int32, np.float32, TensorProto.FLOAT),
                                         (np.bool_, np.uint8, TensorProto.UINT8)])
def test_bitcast_keeps_the_bits(src, to, elem):
    x = (randn(3, 4) * 1e6).astype(src)
    m = wgc.ml.load_onnx(make("BitCast", {"x": x}, opset=26, to=elem,
                              out_types={0: elem}))
    (y,) = m.run([x])
    np.testing.assert_array_equal(y.view(np.uint8), x.view(to).view(np.uint8))
    assert y.dtype == to


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3], "p": 3, "strides": [2], "pads": [1, 0]},
    {"kernel_shape": [2, 3], "p": 2, "strides": [2, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "p": 1, "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 2], "p": 3, "dilations": [2, 1], "pads": [1, 1, 2, 0]},
    {"kernel_shape": [2, 2, 2], "p": 4}])
def test_lp_pool(attrs):
    x = randn(2, 3, *(7, 8, 5)[:len(attrs["kernel_shape"])])
    check(make("LpPool", {"x": x}, opset=18, **attrs), {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_of_elements(sorted_):
    x = np.array([[3, 1, 2], [1, 5, 3], [2, 2, 7]], np.float32)
    check(make("Unique", {"x": x}, opset=11, outs=4, sorted=sorted_,
               out_types={i: TensorProto.INT64 for i in (1, 2, 3)}), {"x": x})


def test_unique_refuses_an_axis():
    x = randn(3, 3)
    with pytest.raises(ModelError, match="axis"):
        wgc.ml.load_onnx(make("Unique", {"x": x}, opset=11, outs=4, axis=0,
                              out_types={i: TensorProto.INT64 for i in (1, 2, 3)}))


@pytest.mark.parametrize("zp_type,axis,scale_shape", [
    (np.uint8, None, ()), (np.int8, 1, (4,)), (np.int16, 0, (3,)), (np.uint16, None, ())])
def test_quantize_and_dequantize(zp_type, axis, scale_shape):
    x = randn(3, 4) * 300
    scale = (RNG.random(scale_shape) * 2 + 0.5).astype(np.float32)
    zp = RNG.integers(-3, 4, scale_shape).astype(zp_type) if np.dtype(zp_type).kind == "i" \
        else RNG.integers(0, 9, scale_shape).astype(zp_type)
    attrs = {} if axis is None else {"axis": axis}
    feeds = {"x": x, "s": scale, "z": zp}
    q = check(make("QuantizeLinear", feeds, opset=21, out_types={0: _TP[zp_type]}, **attrs),
              feeds)[0]
    feeds = {"q": q, "s": scale, "z": zp}
    check(make("DequantizeLinear", feeds, opset=21, out_types={0: TensorProto.FLOAT},
               **attrs), feeds)


def test_quantize_in_blocks():
    x = randn(2, 6) * 20
    feeds = {"x": x, "s": (RNG.random((2, 3)) + 0.5).astype(np.float32)}
    check(make("QuantizeLinear", feeds, opset=21, axis=1, block_size=2, output_dtype=3,
               out_types={0: TensorProto.INT8}), feeds)


def _rnn_feeds(op, dirs, batch=3, seq=4, inp=5, hs=6, layout=0, states=True, peep=False):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    feeds = {"X": randn(*((batch, seq, inp) if layout else (seq, batch, inp))),
             "W": randn(dirs, gates * hs, inp) * 0.5, "R": randn(dirs, gates * hs, hs) * 0.5,
             "B": randn(dirs, 2 * gates * hs) * 0.5,
             "L": np.full(batch, seq, np.int32)}
    if states:
        shape = (batch, dirs, hs) if layout else (dirs, batch, hs)
        feeds["H0"] = randn(*shape)
        if op == "LSTM":
            feeds["C0"] = randn(*shape)
            if peep:
                feeds["P"] = randn(dirs, 3 * hs)
    return feeds


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction,layout", [("forward", 0), ("reverse", 1),
                                              ("bidirectional", 0), ("bidirectional", 1)])
def test_recurrent_layers(op, direction, layout):
    dirs = 2 if direction == "bidirectional" else 1
    feeds = _rnn_feeds(op, dirs, layout=layout, peep=True)
    outs = 3 if op == "LSTM" else 2
    extra = {"linear_before_reset": 1} if op == "GRU" and layout else {}
    if not layout:  # (onnxruntime runs layout 0 only; onnx's reference ignores clip)
        extra["clip"] = 0.7
    check(make(op, feeds, opset=22, outs=outs, hidden_size=6, direction=direction,
               layout=layout, **extra), feeds, rtol=1e-4, atol=1e-5)


def test_recurrent_layer_refuses_shorter_sequences():
    feeds = _rnn_feeds("GRU", 1, states=False)
    feeds["L"] = np.array([4, 2, 4], np.int32)
    m = wgc.ml.load_onnx(make("GRU", feeds, opset=22, outs=2, hidden_size=6))
    with pytest.raises(ModelError, match="sequence_lens"):
        m.run(list(feeds.values()))


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 2)])
def test_affine_grid(align, size):
    k = len(size) - 2
    feeds = {"theta": randn(2, k, k + 1)}
    check(make("AffineGrid", feeds, opset=20, align_corners=align,
               inits={"size": np.array(size, np.int64)}), feeds, rtol=1e-5, atol=1e-6)


def test_max_unpool_puts_values_back():
    v = randn(1, 2, 2, 2)
    i = np.array([[[[0, 3], [9, 14]], [[17, 18], [24, 31]]]], np.int64)  # in (1, 2, 4, 4)
    feeds = {"v": v, "i": i}
    check(make("MaxUnpool", feeds, opset=11, kernel_shape=[2, 2], strides=[2, 2]), feeds)
    # a larger output_shape: the unpooled result at its start, as ONNX's reference and
    # backend case place it (onnxruntime reads the indices in the larger shape instead)
    check(make("MaxUnpool", feeds, opset=11, inputs=["v", "i", "s"], kernel_shape=[2, 2],
               strides=[2, 2], inits={"s": np.array([1, 2, 5, 5], np.int64)}), feeds,
          onnx_reference=True)


@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("state", [False, True])
def test_causal_conv_with_state(activation, state):
    feeds = {"x": randn(2, 3, 5), "w": randn(3, 1, 4), "b": randn(3),
             **({"s": randn(2, 3, 3)} if state else {})}
    check(make("CausalConvWithState", feeds, opset=27, outs=2, activation=activation),
          feeds, rtol=1e-5, atol=1e-6, onnx_reference=True)
