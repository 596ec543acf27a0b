"""The layer_norm kernel against numpy: plain layer and RMS normalization of rows (in f64 on
the host), through both of its programs: rows held in registers by several invocations
(layer_norm_rows.wgsl: f32 and f16 rows of a multiple of 4 elements, up to 8,192) and a
workgroup per row (layer_norm.wgsl: every other case, and the same cases with the rows
program turned off)."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute._lazy import enqueue
from wgcompute.kernels.nn import layer_norm as ln


def _reference(x, scale, bias, eps, center):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True) if center else 0.0
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps) * scale.astype(np.float64)
    return y + bias.astype(np.float64) if bias is not None else y


def _run(x, scale, bias, eps, center):
    bx, bs = wgc.from_numpy(x), wgc.from_numpy(scale)
    bb = wgc.from_numpy(bias) if bias is not None else bs
    out = wgc.empty(x.shape, bx.dtype)
    return enqueue(ln.LAYER_NORM, [bx, bs, bb], out, {
        "n": x.shape[1], "eps": eps, "bias": bias is not None, "center": center}).to_numpy()


@pytest.mark.parametrize("rows_variant", [True, False])
@pytest.mark.parametrize("rows,n", [(1, 4), (7, 12), (300, 64), (33, 768), (5, 1000),
                                    (9, 1028), (3, 4096), (2, 8192), (2, 8196), (1, 1)])
@pytest.mark.parametrize("center,with_bias", [(True, True), (False, False)])
def test_rows_match_numpy(monkeypatch, rows_variant, rows, n, center, with_bias):
    monkeypatch.setattr(ln, "rows_variant", rows_variant)
    rng = np.random.default_rng(rows * 10007 + n)
    x = (rng.standard_normal((rows, n)) * 3 + 5).astype(np.float32)  # (a large mean)
    scale = rng.standard_normal(n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    got = _run(x, scale, bias, 1e-5, center)
    want = _reference(x, scale, bias, 1e-5, center)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_which_program_runs():
    """The rows program takes plain f32 / f16 rows of a multiple of 4 elements up to 8,192;
    the rest (f64, n not a multiple of 4, longer rows, group norms) runs a workgroup a row;
    a few rows are spread over at least FILL workgroups."""
    def plan(n, dtype="f32", rows=100_000, **kw):
        return ln._rows_plan({"n": n, "cpg": 0, "groups": 1, "spatial": 1, **kw}, dtype, rows)

    assert plan(768) == (32, 6, 8) and plan(4) == (4, 1, 64) and plan(8192) == (256, 8, 1)
    assert plan(768, "f16") == (32, 6, 8)
    # fewer rows a workgroup where the rows would fill fewer than FILL workgroups
    assert plan(768, rows=ln.FILL * 8) == (32, 6, 8)
    assert plan(768, rows=ln.FILL * 2) == (32, 6, 2) and plan(768, rows=128) == (32, 6, 1)
    for none in (plan(770), plan(8196), plan(768, "f64"), plan(768, cpg=4, groups=2),
                 plan(768, spatial=4)):
        assert none is None


@pytest.mark.needs("shader-f16")
def test_f16_rows_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 768)).astype(np.float16)
    scale, bias = (rng.standard_normal(768).astype(np.float16) for _ in range(2))
    got = _run(x, scale, bias, 1e-5, True).astype(np.float64)
    want = _reference(x, scale, bias, 1e-5, True)
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3)
