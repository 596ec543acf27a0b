"""The fused attention kernel (kernels/nn/attention.py) against numpy float64: head sizes on
and off the vec4 path, query and key counts on and off its tiles, bias broadcasts with -inf
masks, bad rows ("nan" and "zero"), strided views (a packed QKV buffer, a (B, S, H, D)
output), grouped-query attention, f16 storage, and the refusals."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute._lazy import enqueue
from wgcompute.errors import ArgumentError, DtypeError, ShapeError, WgComputeError
from wgcompute.kernels.nn import attention
from wgcompute.kernels.nn.attention import (
    ATTENTION,
    MAX_HEAD,
    attention_fits,
    attention_params,
)

RTOL = 2e-5  # of the largest |reference|


def reference(q, k, v, scale, bias=None, group=1, empty="nan"):
    """softmax(scale · q kᵀ + bias) v in float64, numpy's nan for bad rows (or 0)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = scale * q @ k.swapaxes(-1, -2)
    if bias is not None:
        s = s + bias
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        w = e / e.sum(-1, keepdims=True)
    if empty == "zero":
        w = np.where(np.isnan(w), 0.0, w)
    if empty == "masked":  # a row with no key to attend gives 0, a nan or +inf still nan
        w = np.where((s == -np.inf).all(-1, keepdims=True), 0.0, w)
    return w @ v


def close(got, want, rtol=RTOL):
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    scale = max(np.abs(want[fin]).max(initial=0.0), 1e-30)
    assert np.abs(got[fin] - want[fin]).max(initial=0.0) <= rtol * scale


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def run(q, k, v, params, bias=None, out=None):
    """The kernel on these arrays (q the bias placeholder without one): out as numpy."""
    bq, bk, bv = (wgc.buffer(x) for x in (q, k, v))
    bb = wgc.buffer(bias) if bias is not None else bq
    if out is None:
        shape = (params["B"], params["H"], params["Sq"], params["Dv"])
        ob = wgc.empty(shape, bq.dtype)
    else:
        ob = wgc.buffer(out)
    return enqueue(ATTENTION, [bq, bk, bv, bb], ob, params).to_numpy()


SIZES = [(1, 1, 64, 64), (5, 5, 64, 64), (64, 64, 64, 64), (65, 65, 64, 64),
         (130, 130, 64, 64), (5, 130, 64, 64), (130, 7, 64, 64), (33, 40, 32, 32),
         (20, 70, 40, 40), (17, 19, 13, 13), (40, 33, 128, 128), (9, 21, 40, 24),
         (12, 16, 13, 20), (8, 70, 64, 128)]


@pytest.mark.parametrize("Sq,Skv,D,Dv", SIZES)
def test_random_no_bias(Sq, Skv, D, Dv):
    rng = np.random.default_rng(Sq * 1000 + Skv + D)
    B, H = 2, 3
    q, k, v = randn(rng, B, H, Sq, D), randn(rng, B, H, Skv, D), randn(rng, B, H, Skv, Dv)
    scale = D ** -0.5
    got = run(q, k, v, attention_params(B, H, Sq, Skv, D, Dv, scale))
    close(got, reference(q, k, v, scale))


def test_vit_like_shape():
    rng = np.random.default_rng(197)
    B, H, S, D = 1, 2, 197, 64
    q, k, v = (randn(rng, B, H, S, D) * 2 for _ in range(3))
    got = run(q, k, v, attention_params(B, H, S, S, D, D, 0.125))
    close(got, reference(q, k, v, 0.125))


@pytest.mark.parametrize("B,H", [(1, 2), (40, 8)])
def test_query_blocks_fill_the_gpu(B, H):
    """Few heads (one image): blocks of fewer query rows, down to MIN_BQ, so the launch has
    FILL workgroups where Sq allows; many heads keep the largest blocks. Same results."""
    from wgcompute.kernels.core.bind import bind

    rng = np.random.default_rng(B)
    S, D = 197, 64
    q, k, v = (randn(rng, B, H, S, D) for _ in range(3))
    params = attention_params(B, H, S, S, D, D, 0.125)
    bufs = [wgc.buffer(x) for x in (q, k, v)]
    out = wgc.empty((B, H, S, D), "f32")
    d = bind(ATTENTION, [*bufs, bufs[0]], out, params)
    (launch,) = d.launches
    blocks = launch.uniform["nqb"]
    bq = dict(d.compiled.key.constants)["tiles"][0]
    widest = attention._tiles(out.device, D, D)[0]
    if B * H * -(-S // widest) >= attention.FILL:
        assert blocks == -(-S // widest)
    else:
        assert blocks == min(-(-attention.FILL // (B * H)), -(-S // attention.MIN_BQ))
    assert bq * blocks >= S > bq * (blocks - 1)
    close(run(q, k, v, params), reference(q, k, v, 0.125))


def _bias_params(B, H, Sq, Skv, D, shape, **kw):
    """attention_params for a bias stored as ``shape``, broadcast by 0 strides."""
    full = (B, H, Sq, Skv)
    dense = [int(np.prod(shape[i + 1:])) for i in range(4)]
    strides = tuple(0 if n == 1 and m > 1 else s for n, m, s in zip(shape, full, dense))
    return attention_params(B, H, Sq, Skv, D, D, D ** -0.5, has_bias=True,
                            bias=(strides, 0), **kw)


@pytest.mark.parametrize("form", ["(1,1,Sq,Skv)", "(B,1,1,Skv)", "(B,1,Sq,Skv)",
                                  "(B,H,Sq,Skv) causal"])
def test_bias_broadcasts(form):
    rng = np.random.default_rng(len(form))
    B, H, Sq, Skv, D = 2, 3, 37, 45, 32
    shape = {"(1,1,Sq,Skv)": (1, 1, Sq, Skv), "(B,1,1,Skv)": (B, 1, 1, Skv),
             "(B,1,Sq,Skv)": (B, 1, Sq, Skv), "(B,H,Sq,Skv) causal": (B, H, Sq, Skv)}[form]
    bias = randn(rng, *shape)
    if form == "(B,1,1,Skv)":  # a padding mask: the last keys of each sample masked
        bias[0, ..., 40:] = -np.inf
        bias[1, ..., 30:] = -np.inf
    if "causal" in form:
        bias = bias + np.triu(np.full((Sq, Skv), -np.inf, np.float32), 1 + Skv - Sq)
    q, k, v = randn(rng, B, H, Sq, D), randn(rng, B, H, Skv, D), randn(rng, B, H, Skv, D)
    got = run(q, k, v, _bias_params(B, H, Sq, Skv, D, shape), bias)
    close(got, reference(q, k, v, D ** -0.5, bias))


@pytest.mark.parametrize("empty", ["nan", "zero", "masked"])
def test_bad_rows(empty):
    """Rows all -inf, with a +inf, or with a nan score (from q or bias) give nan or 0; rows
    with some -inf are ordinary."""
    rng = np.random.default_rng(7)
    B, H, Sq, Skv, D = 1, 2, 70, 75, 16
    q, k, v = randn(rng, B, H, Sq, D), randn(rng, B, H, Skv, D), randn(rng, B, H, Skv, D)
    bias = randn(rng, B, H, Sq, Skv)
    bias[0, 0, 3, :] = -np.inf  # fully masked
    bias[0, 1, 69, :] = -np.inf  # in the last query block
    bias[0, 0, 5, :74] = -np.inf  # one key left
    bias[0, 1, 8, 70] = np.inf
    bias[0, 1, 9, 2] = np.nan
    q[0, 0, 66, 3] = np.nan
    got = run(q, k, v, _bias_params(B, H, Sq, Skv, D, bias.shape, empty=empty), bias)
    want = reference(q, k, v, D ** -0.5, bias, empty=empty)
    bad = [(0, 3), (1, 69), (1, 8), (1, 9), (0, 66)]
    for h, i in bad:
        zero = empty == "zero" or (empty == "masked" and (h, i) in ((0, 3), (1, 69)))
        assert (want[0, h, i] == 0).all() if zero else np.isnan(want[0, h, i]).all()
    assert np.isfinite(want[0, 0, 5]).all()
    close(got, want)


def test_nan_in_q_without_bias():
    rng = np.random.default_rng(8)
    q, k, v = randn(rng, 1, 1, 9, 8), randn(rng, 1, 1, 9, 8), randn(rng, 1, 1, 9, 8)
    q[0, 0, 4, 0] = np.nan
    for empty in ("nan", "zero", "masked"):
        got = run(q, k, v, attention_params(1, 1, 9, 9, 8, 8, 0.5, empty=empty))
        close(got, reference(q, k, v, 0.5, empty=empty))


@pytest.mark.parametrize("D,offset", [(64, 0), (40, 0), (13, 0), (64, 3)])
def test_packed_qkv_views(D, offset):
    """q, k, v read from one (B, S, 3, H, D) buffer (after ``offset`` elements), out written
    into (B, Sq, H, Dv) through its strides, the rest of out untouched."""
    rng = np.random.default_rng(D + offset)
    B, S, H = 2, 50, 3
    qkv = randn(rng, B, S, 3, H, D)
    flat = np.concatenate([np.zeros(offset, np.float32), qkv.ravel()])
    view = ((S * 3 * H * D, D, 3 * H * D),)
    p = attention_params(B, H, S, S, D, D, D ** -0.5, q=(*view, offset),
                         k=(*view, offset + H * D), v=(*view, offset + 2 * H * D),
                         out=((S * H * D, D, H * D), 1))
    store = np.full(1 + B * S * H * D + 5, 7.0, np.float32)
    got = run(flat, flat, flat, p, out=store)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    want = reference(q, k, v, D ** -0.5).transpose(0, 2, 1, 3)
    close(got[1:1 + want.size].reshape(want.shape), want)
    assert got[0] == 7.0 and (got[1 + want.size:] == 7.0).all()


@pytest.mark.parametrize("Sq,Skv,D", [(33, 47, 64), (6, 6, 13)])
def test_grouped_query(Sq, Skv, D):
    rng = np.random.default_rng(Sq)
    B, H, g = 2, 4, 2
    q = randn(rng, B, H, Sq, D)
    k, v = randn(rng, B, H // g, Skv, D), randn(rng, B, H // g, Skv, D)
    bias = randn(rng, B, H, Sq, Skv)
    p = attention_params(B, H, Sq, Skv, D, D, 0.3, group=g, has_bias=True)
    got = run(q, k, v, p, bias)
    close(got, reference(q, k, v, 0.3, bias, group=g))


def test_group_views_bshd():
    """(B, S, H, D) layouts for q, and for k, v of H / group heads, read in place."""
    rng = np.random.default_rng(3)
    B, Sq, Skv, H, g, D = 1, 20, 30, 6, 3, 32
    q, k, v = randn(rng, B, Sq, H, D), randn(rng, B, Skv, H // g, D), randn(rng, B, Skv,
                                                                            H // g, D)
    p = attention_params(B, H, Sq, Skv, D, D, 1.0, group=g, q=((Sq * H * D, D, H * D), 0),
                         k=((Skv * H // g * D, D, H // g * D), 0),
                         v=((Skv * H // g * D, D, H // g * D), 0))
    got = run(q, k, v, p)
    t = (0, 2, 1, 3)
    close(got, reference(q.transpose(t), k.transpose(t), v.transpose(t), 1.0, group=g))


@pytest.mark.needs("shader-f16")
def test_f16_storage():
    rng = np.random.default_rng(16)
    B, H, Sq, Skv, D = 2, 2, 37, 70, 64
    q, k, v = (randn(rng, B, H, s, D, dtype=np.float16) for s in (Sq, Skv, Skv))
    bias = randn(rng, 1, 1, Sq, Skv, dtype=np.float16)
    got = run(q, k, v, _bias_params(B, H, Sq, Skv, D, bias.shape), bias)
    assert got.dtype == np.float16
    close(got.astype(np.float64), reference(q, k, v, D ** -0.5, bias), rtol=2e-3)


def test_unrolled_loops(monkeypatch):
    """The S and P·V loops written out (what GPUs compile; lavapipe runs the loops)."""
    monkeypatch.setattr(attention, "UNROLL", True)
    rng = np.random.default_rng(11)
    B, H, Sq, Skv, D = 1, 2, 37, 45, 40
    q, k, v = randn(rng, B, H, Sq, D), randn(rng, B, H, Skv, D), randn(rng, B, H, Skv, D)
    bias = randn(rng, 1, 1, Sq, Skv)
    bias[0, 0, 4] = -np.inf
    got = run(q, k, v, _bias_params(B, H, Sq, Skv, D, bias.shape), bias)
    close(got, reference(q, k, v, D ** -0.5, bias))


def test_no_query_rows_and_fits():
    dev = wgc.default_device()
    assert attention_fits(dev, 64, 64) and attention_fits(dev, 128, 13)
    assert not attention_fits(dev, MAX_HEAD + 1, 64) and not attention_fits(dev, 64, 0)
    k = np.ones((1, 1, 4, 8), np.float32)
    got = run(k, k, k, attention_params(1, 1, 0, 4, 8, 8, 1.0), out=np.ones(8, np.float32))
    assert (got == 1).all()  # no query rows: nothing written
    got = run(k, k[:, :, :0], k, attention_params(1, 1, 4, 0, 8, 8, 1.0, empty="zero"))
    assert (got == 0).all()  # no keys: every row is empty
    with pytest.raises(ArgumentError, match="out must be"):
        attention_params(1, 1, 4, 4, 8, 8, 1.0, out=((1, 2), 0))


def _refused(params, q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), dtypes=("f32",) * 4,
             out_size=None):
    bufs = [wgc.empty(s, d) for s, d in zip((q_shape, k_shape, k_shape, q_shape), dtypes)]
    out = wgc.empty(out_size or int(np.prod(q_shape)), dtypes[0])
    return lambda: enqueue(ATTENTION, bufs, out, params)


@pytest.mark.parametrize("case,error,names", [
    ("D", ShapeError, r"D=129 .*1\.\.128"),
    ("Dv", ShapeError, r"Dv=200"),
    ("past", ShapeError, r"k's view"),
    ("out past", ShapeError, r"out's view"),
    ("negative", ShapeError, r"q_strides .*negative"),
    ("negative offset", ShapeError, r"v_offset"),
    ("last stride", ShapeError, r"q_strides .*last .*contiguous"),
    ("dtype", DtypeError, r"\bv is f16, q is f32"),
    ("group", ShapeError, r"H=2 .*group=3"),
    ("empty", ArgumentError, r"'empty'"),
])
def test_refusals(case, error, names):
    base = attention_params(1, 2, 4, 4, 8, 8, 1.0)
    kw = {}
    if case == "D":
        base.update(D=129)
    elif case == "Dv":
        base.update(Dv=200)
    elif case == "past":
        base.update(Skv=5)
    elif case == "out past":
        kw["out_size"] = 63
    elif case == "negative":
        base.update(q_strides=(64, -32, 8))
    elif case == "negative offset":
        base.update(v_offset=-1)
    elif case == "last stride":
        base.update(q_strides=(64, 32, 8, 2))
    elif case == "dtype":
        if not wgc.default_device().has("shader-f16"):
            pytest.skip("the adapter lacks shader-f16")
        kw["dtypes"] = ("f32", "f32", "f16", "f32")
    elif case == "group":
        base.update(group=3)
    elif case == "empty":
        base.update(empty="inf")
    with pytest.raises(error, match=names) as e:
        _refused(base, **kw)()
    assert isinstance(e.value, WgComputeError)


def test_bias_view_past_its_buffer_is_refused():
    p = _bias_params(1, 2, 4, 4, 8, (1, 2, 4, 4))
    q = wgc.empty((1, 2, 4, 8))
    with pytest.raises(ShapeError, match="bias's view"):
        enqueue(ATTENTION, [q, q, q, wgc.empty((1, 2, 4, 3))], wgc.empty((1, 2, 4, 8)), p)


def test_in_place_is_refused():
    q = wgc.buffer(np.ones((1, 1, 4, 8), np.float32))
    with pytest.raises(ArgumentError, match="in place|also input"):
        enqueue(ATTENTION, [q, q, q, q], q, attention_params(1, 1, 4, 4, 8, 8, 1.0))
