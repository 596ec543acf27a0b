"""astype between every pair of dtypes against numpy: exact conversions (checked on the GPU
where a pair can lose information, refused naming the first value that would change),
rounding modes, casting='unsafe' (numpy's wraparound, made definite where numpy is not),
u8 outputs packed four to a word, and no check (nothing read back) where none is needed."""

import numpy as np
import pytest
from conftest import lacks

import wgcompute as wgc
from wgcompute import array
from wgcompute.kernels.elementwise.cast import exact_by_type

ALL = ["f32", "f64", "f16", "s32", "s64", "u32", "u8"]
SIZES = [0, 1, 3, 5, 1027, 70_001]


def _exact(x, dtype, **kw):
    """wgc.astype with casting="exact" (its default is the array namespace's numpy-like
    conversion): the conversions these tests check refuse any change of value."""
    kw.setdefault("casting", "exact")
    return wgc.astype(x, dtype, **kw)


def need(*dts):
    for dt in dts:
        feature = wgc.DTYPES[dt].feature
        if feature and feature not in wgc.device_info()["features"]:
            pytest.skip(f"adapter lacks {feature} for {dt}")


def npd(dt):
    return wgc.DTYPES[dt].numpy


def exact_values(src, dst, n, rng):
    """n values of src that dst holds exactly (so casting='exact' must accept them)."""
    lo, hi = -100, 100
    if "u8" in (src, dst):
        lo, hi = 0, 255
    elif npd(src).kind == "u" or npd(dst).kind == "u":
        lo = 0
    vals = rng.integers(lo, hi + 1, n)
    if npd(src).kind == "f" and npd(dst).kind == "f":
        vals = vals / 8  # eighths are exact in every float type
    return vals.astype(npd(src))


@pytest.mark.parametrize("dst", ALL)
@pytest.mark.parametrize("src", ALL)
def test_exact_conversions_match_numpy(src, dst, rng):
    need(src, dst)
    for n in SIZES:
        a = exact_values(src, dst, n, rng)
        got = _exact(wgc.from_numpy(a), dst)
        assert got.dtype == dst and got.shape == a.shape
        np.testing.assert_array_equal(got.to_numpy(), a.astype(npd(dst)))


# (src, dst, a value that changes, what the message says)
REFUSED = [
    ("f32", "s32", 2.5, "2.5 .* is not an integer; pass rounding="),
    ("f64", "u8", 256.0, "out of range for u8 .0..255.; pass casting='unsafe' to saturate"),
    ("f32", "u32", -1.0, "out of range for u32"),
    ("f16", "s32", np.inf, "inf .* has no s32 value"),
    ("f32", "s64", np.nan, "nan .* has no s64 value"),
    ("s64", "s32", 2**31, "out of range for s32 .*; pass casting='unsafe' to wrap around"),
    ("s32", "u32", -5, "out of range for u32"),
    ("u32", "s32", 2**31, "out of range for s32"),
    ("s32", "u8", 300, "out of range for u8"),
    ("s32", "f32", 2**24 + 1, "cannot be stored exactly as f32"),
    ("u32", "f16", 2049, "cannot be stored exactly as f16"),
    ("s32", "f16", 70000, "cannot be stored exactly as f16"),
    ("s64", "f64", 2**53 + 1, "cannot be stored exactly as f64"),
    ("f64", "f32", 1e39, "out of range for f32"),
    ("f32", "f16", 65520.0, "out of range for f16 .max 65504.; pass casting='unsafe' to get inf"),
]


@pytest.mark.parametrize("src,dst,bad,message", REFUSED)
def test_lossy_values_are_refused_naming_the_first(src, dst, bad, message, rng):
    need(src, dst)
    a = exact_values(src, dst, 70_001, rng)
    a[[40_000, 60_000]] = np.array(bad).astype(npd(src))  # the first of two is named
    with pytest.raises(wgc.DtypeError, match=f"astype\\('{dst}'\\): .*{message}"):
        _exact(wgc.from_numpy(a), dst)
    with pytest.raises(wgc.DtypeError, match="element 40000 of x"):
        _exact(wgc.from_numpy(a), dst)


@pytest.mark.needs("f64", "f16")
def test_float_narrowing_rounds_without_complaint():
    a = np.array([0.1, 1 / 3, 1e-3, -2.7], np.float64)
    np.testing.assert_array_equal(_exact(wgc.from_numpy(a), "f32").to_numpy(),
                                  a.astype(np.float32))
    np.testing.assert_array_equal(_exact(wgc.from_numpy(a), "f16").to_numpy(),
                                  a.astype(np.float16))


@pytest.mark.parametrize("rounding,ref", [("trunc", np.trunc), ("round", np.rint),
                                          ("floor", np.floor), ("ceil", np.ceil)])
@pytest.mark.parametrize("src", ["f32", "f64", "f16"])
@pytest.mark.parametrize("dst", ["s32", "s64", "u32", "u8"])
def test_rounding_modes(src, dst, rounding, ref, rng):
    need(src, dst)
    lo = 0 if npd(dst).kind == "u" else -100
    a = np.concatenate([np.array([0.5, 1.5, 2.5, 3.5, 2.25, 99.75], npd(src)),
                        rng.uniform(lo + 1, 100, 1027).astype(npd(src))])
    if lo < 0:
        a = np.concatenate([a, -a[:6]])
    got = _exact(wgc.from_numpy(a), dst, rounding=rounding).to_numpy()
    np.testing.assert_array_equal(got, ref(a.astype(np.float64)).astype(npd(dst)))


@pytest.mark.parametrize("dst", ALL)
@pytest.mark.parametrize("src", ALL)
def test_unsafe_is_numpys_cast_made_definite(src, dst, rng):
    """Integers wrap as numpy's do; floats going to integers truncate and saturate (numpy
    leaves out-of-range values undefined), nan -> 0; floats overflow to inf."""
    need(src, dst)
    if npd(src).kind == "f":
        a = np.concatenate([rng.standard_normal(1000) * 1e3,
                            [np.nan, np.inf, -np.inf, 1e30, -1e30, 300.7, -2.5]])
        with np.errstate(over="ignore"):  # 1e30 is inf in f16
            a = a.astype(npd(src))
    else:
        info = np.iinfo(npd(src))
        a = rng.integers(info.min, info.max, 1000, dtype=npd(src), endpoint=True)
        a = np.concatenate([a, np.array([info.min, info.max, 0], npd(src))])
    got = _exact(wgc.from_numpy(a), dst, casting="unsafe").to_numpy()
    a64 = a.astype(np.float64)
    if npd(src).kind == "f" and npd(dst).kind != "f":
        info = np.iinfo(npd(dst))
        t = np.nan_to_num(np.trunc(a64), nan=0.0, posinf=2.0**64, neginf=-(2.0**64))
        want = np.array([info.max if v >= float(info.max) + 1 else
                         info.min if v < float(info.min) else int(v) for v in t],
                        dtype=npd(dst))
    else:
        with np.errstate(all="ignore"):
            want = a.astype(npd(dst))
    np.testing.assert_array_equal(got, want)


def test_same_dtype_is_a_copy():
    a = wgc.buffer([1.5, 2.5])
    b = _exact(a, "f32")
    assert b is not a and b.tolist() == [1.5, 2.5]


def test_pairs_that_cannot_lose_read_nothing_back(monkeypatch, rng):
    """Without a check there is no round trip: the checked path is never taken."""
    def boom(*a, **k):
        raise AssertionError("the check ran")

    monkeypatch.setattr(array, "read_element", boom)
    monkeypatch.setattr(array, "Pipeline", boom)
    for src in ALL:
        for dst in ALL:
            if exact_by_type(src, dst):
                need(src, dst)
                _exact(wgc.from_numpy(exact_values(src, dst, 9, rng)), dst)
    _exact(wgc.buffer([1e9, 2.5]), "s32", casting="unsafe")


def test_kernel_form_needs_unsafe_for_lossy_pairs(adapter_lacks):
    x = wgc.buffer([1.5, 2.5])
    out = wgc.empty((2,), "s32")
    with pytest.raises(wgc.DtypeError, match="can change values.*casting='unsafe'"):
        wgc.run_kernel("astype", [x], out)
    wgc.run_kernel("astype", [x], out, {"casting": "unsafe", "rounding": "round"})
    assert out.tolist() == [2, 2]
    if adapter_lacks("f64") is None:
        ok = wgc.empty((2,), "f64")
        assert wgc.run_kernel("astype", [x], ok).tolist() == [1.5, 2.5]  # f32 -> f64: exact


def test_options_are_checked():
    x = wgc.buffer([1.0])
    with pytest.raises(wgc.ArgumentError, match="rounding must be one of"):
        _exact(x, "s32", rounding="nearest")
    with pytest.raises(wgc.ArgumentError, match="applies to float -> integer"):
        _exact(x, "f64", rounding="round")
    with pytest.raises(wgc.ArgumentError, match="casting must be"):
        _exact(x, "s32", casting="same_kind")
    with pytest.raises(wgc.DtypeError, match="unknown dtype"):
        _exact(x, "f128")
    with pytest.raises(wgc.ShapeError, match="out is"):
        _exact(x, "f64", out=wgc.empty((2,), "f64"))
    with pytest.raises(wgc.DtypeError, match="out is f32, expected f64"):
        _exact(x, "f64", out=wgc.empty((1,), "f32"))


def test_wgc_astype_is_the_namespaces_conversion_and_exact_on_request():
    """wgc.astype means what the array namespace's astype means (numpy's conversion); the
    exact conversion is asked for by name, and Buffer.astype is exact by default."""
    import wgcompute.array_api as xp

    a = np.array([2.5, -1.5, 1e10, np.nan], np.float32)
    x = wgc.from_numpy(a)
    got = wgc.astype(x, "s32").to_numpy()
    np.testing.assert_array_equal(got, xp.astype(x, xp.int32).to_numpy())
    np.testing.assert_array_equal(got[:2], a[:2].astype(np.int32))
    with pytest.raises(wgc.DtypeError, match="not an integer"):
        wgc.astype(x, "s32", casting="exact")
    with pytest.raises(wgc.DtypeError, match="not an integer"):
        x.astype("s32")
    if lacks("f16") is None:  # f16 is outside the standard: the Buffer's own conversion
        np.testing.assert_array_equal(wgc.astype(x[:2], "f16").to_numpy(),
                                      a[:2].astype(np.float16))
