"""The fft extension against numpy.fft: complex64 and complex128 transforms of power-of-two
lengths (Stockham passes, several of them past a workgroup's memory) and other lengths
(Bluestein), along any axis, cropped or padded, in the three norms; the real and Hermitian
transforms, the n-dimensional ones, frequencies and shifts; and what is refused. Errors are
measured against the largest magnitude of numpy's result (complex128, from complex128 data):
within 1e-4 for complex64 (f32 arithmetic), within c128_bound(n) for complex128."""

import math

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.kernels.fft.fft import (
    Fft,
    plan_radices,
    single_pass_params,
    storage_elements,
    workgroup_elements,
)

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

RTOL = 1e-4
DTS = ["c64", "c128"]  # complex128 where the adapter has shader-f64 (else skipped, saying why)
rng = np.random.default_rng(7)


def c128_bound(n: int) -> float:
    """complex128's bound for a transform whose longest axis (or Bluestein's length, < 4n) is
    n: 2e-15 · log2(4n), float64's rounding (1.1e-16) times a few per pass. Measured on
    lavapipe: 1.4e-16 to 9e-16 up to 2^20 points and Bluestein's 4099 (16384 long)."""
    return 2e-15 * math.log2(4 * max(n, 2))


def cplx(shape, dt="c64"):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return np.asarray(z).astype(np.complex128 if dt == "c128" else np.complex64)


def real(shape, dt="c64"):
    return rng.standard_normal(shape).astype(np.float64 if dt == "c128" else np.float32)


def close(got, ref, dtype):
    assert isinstance(got, wgc.Buffer)
    g = got.to_numpy()
    assert g.dtype == dtype and g.shape == ref.shape, (g.dtype, g.shape, ref.shape)
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)
    err = float(np.abs(g - ref).max()) / scale if ref.size else 0.0
    wide = np.dtype(dtype) in (np.complex128, np.float64)
    assert err < (c128_bound(max(ref.shape, default=1)) if wide else RTOL), err


def out_dtypes(dt):
    """The complex and real dtypes of dt's transforms' results."""
    return (np.complex128, np.float64) if dt == "c128" else (np.complex64, np.float32)


@pytest.mark.parametrize("shape,axis", [
    ((1,), 0), ((2,), 0), ((8,), -1), ((64,), 0), ((4096,), 0), ((8192,), 0),
    ((2, 1 << 15), 1), ((3,), 0), ((5,), 0), ((12,), 0), ((1000,), 0), ((257,), 0),
    ((7, 3), 0), ((3, 64, 5), 1), ((4, 6, 5), -3), ((0, 8), 1), ((2, 3, 20), 2),
    ((2, 2048, 3), 1), ((4096, 4), 0)])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("dt", DTS)
def test_fft_and_ifft_match_numpy(shape, axis, inverse, dt):
    a = cplx(shape, dt)
    f, ref = (xp.fft.ifft, np.fft.ifft) if inverse else (xp.fft.fft, np.fft.fft)
    close(f(wgc.from_numpy(a), axis=axis), ref(a, axis=axis), a.dtype)


@pytest.mark.parametrize("n", [1, 6, 16, 40])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dt", DTS)
def test_fft_crops_pads_and_normalizes(n, norm, dt):
    a = cplx((3, 16), dt)
    x = wgc.from_numpy(a)
    close(xp.fft.fft(x, n=n, norm=norm), np.fft.fft(a, n=n, norm=norm), a.dtype)
    close(xp.fft.ifft(x, n=n, axis=0, norm=norm), np.fft.ifft(a, n=n, axis=0, norm=norm),
          a.dtype)


def test_numpy_ints_as_lengths():
    a = cplx((3, 16))
    close(xp.fft.fft(wgc.from_numpy(a), n=np.int64(12), axis=np.int32(0)),
          np.fft.fft(a, n=12, axis=0), np.complex64)
    close(xp.fft.fftn(wgc.from_numpy(a), s=(np.int64(4), 8), axes=(0, 1)),
          np.fft.fftn(a, s=(4, 8), axes=(0, 1)), np.complex64)


def test_ifft_inverts_fft():
    a = cplx((5, 96))
    back = xp.fft.ifft(xp.fft.fft(wgc.from_numpy(a), norm="ortho"), norm="ortho")
    close(back, a, np.complex64)


@pytest.mark.parametrize("shape,axis", [((3,), 0), ((6,), 0), ((9, 4), 0), ((7, 100), 1),
                                        ((1000,), 0), ((4, 360), 1), ((3, 1536), 1),
                                        ((729,), 0), ((2, 3000), 1), ((100, 3, 5), 0)])
@pytest.mark.parametrize("dt", DTS)
def test_mixed_radix_lengths_take_one_pass(shape, axis, dt):
    """Products of 2s, 3s and 5s that fit a workgroup: one pass of radix-2/3/4/5 steps
    (complex128's values are twice as large: 3000 of them take Bluestein's algorithm)."""
    dev = wgc.current_device()
    size = 16 if dt == "c128" else 8
    one = single_pass_params(shape, axis, -1, 1.0, workgroup_elements(dev, size),
                             storage_elements(dev, size))
    assert (one is None) == (dt == "c128" and shape[axis] == 3000)
    a = cplx(shape, dt)
    close(xp.fft.fft(wgc.from_numpy(a), axis=axis), np.fft.fft(a, axis=axis), a.dtype)
    close(xp.fft.ifft(wgc.from_numpy(a), axis=axis, norm="ortho"),
          np.fft.ifft(a, axis=axis, norm="ortho"), a.dtype)


@pytest.mark.parametrize("n", [7, 11, 1009, 3 * 4096, 14])
@pytest.mark.parametrize("dt", DTS)
def test_other_lengths_take_bluestein(n, dt):
    dev = wgc.current_device()
    assert single_pass_params((n,), 0, -1, 1.0, workgroup_elements(dev),
                              storage_elements(dev)) is None
    a = cplx((2, n), dt)
    close(xp.fft.fft(wgc.from_numpy(a)), np.fft.fft(a), a.dtype)
    close(xp.fft.ifft(wgc.from_numpy(a), norm="forward"), np.fft.ifft(a, norm="forward"),
          a.dtype)


def test_plans():
    """One pass where a contiguous axis fits a workgroup; a strided one keeps 4 columns side
    by side in a workgroup, so it splits sooner."""
    assert plan_radices(4096, 4096) == [4096]
    assert plan_radices(4096, 4096, contiguous=False) == [64, 64]
    assert plan_radices(1024, 4096, contiguous=False) == [1024]
    assert plan_radices(1 << 24, 4096) == [256, 256, 256]
    assert plan_radices(1 << 11, 2048) == [2048]


@pytest.mark.parametrize("capacity,n", [(16, 1024), (64, 4096), (8, 128)])
def test_multi_pass_plans_match_numpy(capacity, n):
    """Lengths past a workgroup's capacity run as several passes (3 to 5 here)."""
    assert len(plan_radices(n, capacity)) >= 3
    a = cplx((3, n, 2))
    out = wgc.run_kernel(Fft(), [wgc.from_numpy(a)], None, {"axis": 1, "capacity": capacity})
    close(out, np.fft.fft(a, axis=1), np.complex64)


@pytest.mark.parametrize("shape,axis,n", [((8,), 0, None), ((9,), 0, None), ((4, 6), 0, None),
                                          ((10,), 0, 7), ((3, 33), 1, 64), ((1,), 0, None),
                                          ((3, 20), 1, 64), ((3, 20), 1, 16),
                                          ((5, 4, 3), 1, 8), ((2, 4096), 1, None)])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dt", DTS)
def test_real_and_hermitian_transforms(shape, axis, n, norm, dt):
    a, b = real(shape, dt), cplx(shape, dt)
    xa, xb = wgc.from_numpy(a), wgc.from_numpy(b)
    kw = {"n": n, "axis": axis, "norm": norm}
    c, r = out_dtypes(dt)
    close(xp.fft.rfft(xa, **kw), np.fft.rfft(a, **kw), c)
    close(xp.fft.ihfft(xa, **kw), np.fft.ihfft(a, **kw), c)
    if shape[axis] > 1 or n is not None:
        close(xp.fft.irfft(xb, **kw), np.fft.irfft(b, **kw), r)
        close(xp.fft.hfft(xb, **kw), np.fft.hfft(b, **kw), r)


def test_irfft_inverts_rfft_odd_length():
    a = real((4, 11))
    close(xp.fft.irfft(xp.fft.rfft(wgc.from_numpy(a)), n=11), a, np.float32)


@pytest.mark.parametrize("s,axes", [(None, None), (None, (0, 2)), ((3, 8), (0, 2)),
                                    ((5, -1), (-1, 0)), (None, (1,))])
@pytest.mark.parametrize("dt", DTS)
def test_n_dimensional_transforms(s, axes, dt):
    a, r = cplx((4, 6, 5), dt), real((4, 6, 5), dt)
    xa, xr = wgc.from_numpy(a), wgc.from_numpy(r)
    np_s = None if s is None else [a.shape[ax] if v == -1 else v for v, ax in zip(s, axes)]
    kw, np_kw = {"s": s, "axes": axes}, {"s": np_s, "axes": axes}
    c, f = out_dtypes(dt)
    close(xp.fft.fftn(xa, **kw), np.fft.fftn(a, **np_kw), c)
    close(xp.fft.ifftn(xa, **kw, norm="ortho"), np.fft.ifftn(a, **np_kw, norm="ortho"), c)
    close(xp.fft.rfftn(xr, **kw), np.fft.rfftn(r, **np_kw), c)
    close(xp.fft.irfftn(xa, **kw), np.fft.irfftn(a, **np_kw), f)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 1001])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies(n, d):
    close(xp.fft.fftfreq(n, d=d), np.fft.fftfreq(n, d).astype(np.float32), np.float32)
    close(xp.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d).astype(np.float32), np.float32)
    if "shader-f64" in wgc.device_info()["features"]:
        f64 = xp.fft.fftfreq(n, d=d, dtype=xp.float64).to_numpy()
        np.testing.assert_allclose(f64, np.fft.fftfreq(n, d), rtol=1e-15)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (4, 5), (3, 0), (2, 3, 5)])
@pytest.mark.parametrize("dt", [np.float32, np.complex64, np.int32, np.float64])
def test_shifts(shape, dt):
    a = np.asarray((np.arange(int(np.prod(shape))).reshape(shape) * 3 - 5).astype(dt))
    x = wgc.from_numpy(a)
    want = (a, a) if a.ndim == 0 else (np.fft.fftshift(a), np.fft.ifftshift(a))  # no axes
    np.testing.assert_array_equal(xp.fft.fftshift(x).to_numpy(), want[0])
    np.testing.assert_array_equal(xp.fft.ifftshift(x).to_numpy(), want[1])
    if len(shape) >= 2:
        for axes in (0, (-1,), (1, 0)):
            np.testing.assert_array_equal(xp.fft.fftshift(x, axes=axes).to_numpy(),
                                          np.fft.fftshift(a, axes=axes))
            np.testing.assert_array_equal(xp.fft.ifftshift(x, axes=axes).to_numpy(),
                                          np.fft.ifftshift(a, axes=axes))


def test_refusals_name_the_argument():
    c = wgc.from_numpy(cplx((4,)))
    f = wgc.from_numpy(real((4,)))
    with pytest.raises(wgc.DtypeError, match="fft: x is float32"):
        xp.fft.fft(f)
    with pytest.raises(wgc.DtypeError, match="rfft: x is complex64"):
        xp.fft.rfft(c)
    with pytest.raises(wgc.DtypeError, match="rfft: x is int32; expected a float32 or float64"):
        xp.fft.rfft(wgc.from_numpy(np.ones(4, np.int32)))
    with pytest.raises(wgc.ArgumentError, match="norm: 'none'"):
        xp.fft.fft(c, norm="none")
    with pytest.raises(wgc.ArgumentError, match="n: expected a positive int, got 0"):
        xp.fft.fft(c, n=0)
    with pytest.raises(wgc.ArgumentError, match="axis: 1 is out of range"):
        xp.fft.fft(c, axis=1)
    with pytest.raises(wgc.ShapeError, match="0-dimensional"):
        xp.fft.fft(wgc.from_numpy(np.array(1j, np.complex64)))
    with pytest.raises(wgc.ShapeError, match="pass a positive n"):
        xp.fft.irfft(wgc.from_numpy(cplx((1,))))
    with pytest.raises(wgc.ArgumentError, match="s: expected a sequence of 1 ints"):
        xp.fft.fftn(c, s=(4, 4), axes=(0,))
    with pytest.raises(wgc.ArgumentError, match="d: expected a finite non-zero"):
        xp.fft.fftfreq(4, d=0.0)
    with pytest.raises(wgc.DtypeError, match="dtype: expected a real floating-point dtype"):
        xp.fft.rfftfreq(4, dtype=xp.int32)
    with pytest.raises(wgc.DtypeError, match="fftshift: u8 arrays"):
        xp.fft.fftshift(wgc.from_numpy(np.zeros(4, np.uint8)))
    with pytest.raises(wgc.ArgumentError, match="axis: expected an int"):
        xp.fft.fft(c, axis="a")
    with pytest.raises(wgc.ShapeError, match="axis 1 of \\(3, 0\\) has no elements"):
        xp.fft.fft(wgc.from_numpy(cplx((3, 0))))


@pytest.mark.parametrize("dt", DTS)
def test_views_as_input(dt):
    """Views starting inside another buffer's memory (not at a bindable offset) transform."""
    a = cplx((5, 48), dt)
    x = wgc.from_numpy(a)
    close(xp.fft.fft(x[1]), np.fft.fft(a[1]), a.dtype)
    close(xp.fft.fft(x[1:4], axis=0), np.fft.fft(a[1:4], axis=0), a.dtype)
    close(xp.fft.ifft(x[:, ::3]), np.fft.ifft(a[:, ::3]), a.dtype)
    r = real((3, 64), dt)
    close(xp.fft.rfft(wgc.from_numpy(r)[2]), np.fft.rfft(r[2]), a.dtype)


def test_kernel_refusals():
    from wgcompute.kernels.fft.complex import ComplexAxis
    from wgcompute.kernels.fft.fft import FftPass

    c6 = wgc.from_numpy(cplx((6,)))
    with pytest.raises(wgc.ShapeError, match="length 6: expected a power of two"):
        wgc.run_kernel(Fft(), [c6])
    with pytest.raises(wgc.DtypeError, match="dtype f32 is not supported"):
        wgc.run_kernel(Fft(), [wgc.from_numpy(real((8,)))])
    big = wgc.from_numpy(cplx((1 << 14,)))
    with pytest.raises(wgc.ArgumentError, match="radix 16384 after 1 with 1 columns"):
        wgc.run_kernel(FftPass(), [big], None, {"outer": 1, "n": 1 << 14, "inner": 1,
                                                "radix": 1 << 14})
    with pytest.raises(wgc.ArgumentError, match="param 'radix': expected a product of 2s"):
        wgc.run_kernel(FftPass(), [big], None, {"outer": 1, "n": 1 << 14, "inner": 1,
                                                "radix": 7})
    with pytest.raises(wgc.ArgumentError, match="radix 3 of n 16384: lengths other than"):
        wgc.run_kernel(FftPass(), [big], None, {"outer": 1, "n": 1 << 14, "inner": 1,
                                                "radix": 3})
    with pytest.raises(wgc.ArgumentError, match="param 'mode': expected one of"):
        wgc.run_kernel(ComplexAxis(), [c6], None, {"mode": "sideways"})
    with pytest.raises(wgc.DtypeError, match="mode 'pack' takes x of f32"):
        wgc.run_kernel(ComplexAxis(), [c6], None, {"mode": "pack"})


@pytest.mark.parametrize("most,n,steps", [
    (16, 256, ((16, 1), (16, 16))), (16, 512, ((2, 1), (16, 2), (16, 32))),
    (16, 4096, ((16, 1), (16, 16), (16, 256))), (16, 8, ((8, 1),)), (16, 2, ((2, 1),)),
    (8, 256, ((4, 1), (8, 4), (8, 32))), (4, 256, ((4, 1), (4, 4), (4, 16), (4, 64))),
    (16, 48, ((4, 1), (4, 4), (3, 16))), (16, 40, ((2, 1), (4, 2), (5, 8)))])
def test_sub_steps_take_the_largest_radix(monkeypatch, most, n, steps):
    """Powers of two take radix-FFT_MAX_RADIX steps in a pass (other lengths radix 2 to 5)."""
    from wgcompute.kernels.fft import fft as fft_module

    monkeypatch.setattr(fft_module, "FFT_MAX_RADIX", most)
    assert fft_module.sub_steps(n) == steps


def test_sub_steps_refuse_other_radices(monkeypatch):
    from wgcompute.kernels.fft import fft as fft_module

    monkeypatch.setattr(fft_module, "FFT_MAX_RADIX", 32)
    with pytest.raises(wgc.ArgumentError, match="FFT_MAX_RADIX is 32; expected 4, 8 or 16"):
        xp.fft.fft(wgc.from_numpy(cplx((64,))))


def _pow2_cases():
    cases = [(16, (1 << k,), 0) for k in range(1, 23)]
    cases += [(most, shape, axis) for most in (4, 8) for shape, axis in
              [((1 << 10,), 0), ((1 << 13,), 0), ((3, 1 << 17), 1), ((1 << 22,), 0)]]
    cases += [(most, shape, axis) for most in (4, 8, 16) for shape, axis in
              [((5, 1 << 9), 1), ((2, 1 << 11, 3), 1), ((1 << 12, 4), 0), ((6, 32), 1)]]
    return cases


@pytest.mark.parametrize("most,shape,axis", _pow2_cases())
def test_power_of_two_lengths_for_each_largest_radix(monkeypatch, most, shape, axis):
    """2^1 .. 2^22 (one to three passes here), batched and along strided axes, forward and
    inverse, against numpy's float64 transform, with radix-4, -8 and -16 steps."""
    from wgcompute.kernels.fft import fft as fft_module

    monkeypatch.setattr(fft_module, "FFT_MAX_RADIX", most)
    a = cplx(shape)
    x = wgc.from_numpy(a)
    ref = a.astype(np.complex128)
    close(xp.fft.fft(x, axis=axis), np.fft.fft(ref, axis=axis).astype(np.complex64),
          np.complex64)
    if shape[axis] <= 1 << 17:
        close(xp.fft.ifft(x, axis=axis, norm="ortho"),
              np.fft.ifft(ref, axis=axis, norm="ortho").astype(np.complex64), np.complex64)


@pytest.mark.parametrize("most", [8, 16])
@pytest.mark.parametrize("capacity,n", [(16, 1024), (64, 4096), (256, 1 << 16)])
def test_multi_pass_plans_with_large_radices(monkeypatch, most, capacity, n):
    from wgcompute.kernels.fft import fft as fft_module

    monkeypatch.setattr(fft_module, "FFT_MAX_RADIX", most)
    a = cplx((3, n, 2))
    for sign, ref in ((-1, np.fft.fft), (1, np.fft.ifft)):
        out = wgc.run_kernel(Fft(), [wgc.from_numpy(a)], None,
                             {"axis": 1, "capacity": capacity, "sign": sign,
                              "scale": 1.0 if sign < 0 else 1.0 / n})
        close(out, ref(a.astype(np.complex128), axis=1).astype(np.complex64), np.complex64)


def _all_functions(a, r, norm):
    """(name, got, want) of the extension's ten transforms of complex a and real r (2-D: the
    n-dimensional ones over both axes, the others along the last)."""
    xa, xr = wgc.from_numpy(a), wgc.from_numpy(r)
    n = a.shape[-1]
    for name in ("fft", "ifft", "hfft"):
        kw = {"norm": norm} if name != "hfft" else {"norm": norm, "n": n}
        yield name, getattr(xp.fft, name)(xa, **kw), getattr(np.fft, name)(a, **kw)
    yield "irfft", xp.fft.irfft(xa, n=n, norm=norm), np.fft.irfft(a, n=n, norm=norm)
    for name in ("rfft", "ihfft"):
        yield name, getattr(xp.fft, name)(xr, norm=norm), getattr(np.fft, name)(r, norm=norm)
    for name, x, ref in (("fftn", xa, a), ("ifftn", xa, a), ("rfftn", xr, r)):
        yield name, getattr(xp.fft, name)(x, norm=norm), getattr(np.fft, name)(ref, norm=norm)
    kw = {"s": a.shape, "axes": (0, 1), "norm": norm}
    yield "irfftn", xp.fft.irfftn(xa, **kw), np.fft.irfftn(a, **kw)


@pytest.mark.parametrize("n", [1 << k for k in range(1, 17)] +
                         [6, 360, 1000, 1536, 3000, 997, 4099])
@pytest.mark.parametrize("dt", ["c128"])
def test_complex128_accuracy_of_every_function(n, dt):
    """complex128 over powers of two to 2^16, products of 2s, 3s and 5s (one pass, or
    Bluestein's past a workgroup: 3000), primes (Bluestein's), every norm, every function,
    within c128_bound of numpy's complex128 transform."""
    rows = 3 if n <= 4096 else 2
    a, r = cplx((rows, n), dt), real((rows, n), dt)
    for norm in ("backward", "ortho", "forward"):
        for name, got, want in _all_functions(a, r, norm):
            assert got.dtype in ("c128", "f64"), name
            g = got.to_numpy()
            err = float(np.abs(g - want).max()) / float(np.abs(want).max())
            assert g.shape == want.shape and err < c128_bound(n), (name, norm, err)


@pytest.mark.parametrize("dt", ["c128"])
def test_complex128_repeated_transform_uploads_nothing(dt):
    """complex128's twiddles and chirps are made once per length and kept on the device: a
    repeated transform (a power of two, a mixed radix, Bluestein's) creates no buffer."""
    dev = wgc.current_device()
    for n in (1024, 360, 997):
        x = wgc.from_numpy(cplx((2, n), dt))
        want = np.fft.ifft(x.to_numpy(), norm="ortho")
        xp.fft.ifft(x, norm="ortho")
        wgc.synchronize()  # (the first one's temporaries back in the pool)
        before = dev.stats["buffers_created"]
        close(xp.fft.ifft(x, norm="ortho"), want, np.complex128)
        assert dev.stats["buffers_created"] == before, n


@pytest.mark.parametrize("dt", ["c128"])
def test_complex128_table_cache_is_bounded(monkeypatch, dt):
    from wgcompute.kernels.fft import tables

    monkeypatch.setattr(tables, "CACHE_BYTES", 300_000)
    dev = wgc.current_device()
    dev.extras.pop("fft_tables", None)  # (what earlier tests kept, under the usual bound)
    for n in (4099, 2048, 997, 4099, 1 << 16):
        a = cplx((n,), dt)
        close(xp.fft.fft(wgc.from_numpy(a)), np.fft.fft(a), np.complex128)
        cache = dev.extras["fft_tables"]
        assert len(cache) == 1 or sum(b.nbytes for b in cache.values()) <= 300_000


@pytest.mark.parametrize("dt", ["c128"])
def test_complex128_pass_refuses_a_wrong_table(dt):
    from wgcompute.kernels.fft.fft import FFT_PASS_C128

    x = wgc.from_numpy(cplx((64,), dt))
    w = wgc.from_numpy(cplx((9,), dt))
    with pytest.raises(wgc.ShapeError, match="w has 9 elements; the twiddle table of n 64 "
                                             "has 16"):
        wgc.run_kernel(FFT_PASS_C128, [x, w], None, {"outer": 1, "n": 64, "inner": 1,
                                                     "radix": 64})


@pytest.mark.parametrize("dt", ["c128"])
def test_complex128_real_transform_steps_refuse_what_they_cannot_do(dt):
    """complex_axis_c128 takes the real transforms' steps only, with the table of 2M."""
    from wgcompute.kernels.fft.complex import COMPLEX_AXIS_C128
    from wgcompute.kernels.fft.tables import twiddles

    signal = real((16,), dt)  # its DFT from that of its even and odd samples as one
    z = wgc.from_numpy(np.fft.fft(signal[0::2] + 1j * signal[1::2]))  # complex signal
    good, bad = wgc.from_numpy(twiddles(16)), wgc.from_numpy(twiddles(8))
    out = wgc.run_kernel(COMPLEX_AXIS_C128, [z, good], wgc.empty((9,), "c128"),
                         {"mode": "r2c_post"})
    close(out, np.fft.rfft(signal), np.complex128)
    with pytest.raises(wgc.ShapeError, match="w has 6 elements; the twiddle table of 2M = "
                                             "16 has 8"):
        wgc.run_kernel(COMPLEX_AXIS_C128, [z, bad], wgc.empty((9,), "c128"),
                       {"mode": "r2c_post"})
    with pytest.raises(wgc.ArgumentError, match="mode 'chirp_in'; expected r2c_post"):
        wgc.run_kernel(COMPLEX_AXIS_C128, [z, good], None, {"mode": "chirp_in"})


def test_a_transform_queues_its_passes_and_returns():
    """fft and ifft queue their passes on the device's open batch like any operator (nothing
    waits until a read); their temporaries stay alive until the queued passes are done."""
    dev = wgc.current_device()
    a = cplx((3, 1 << 14), "c64")  # two passes or more a transform
    x = wgc.from_numpy(a)
    wgc.synchronize()
    y = xp.fft.ifft(xp.fft.fft(x))
    assert dev.lazy is not None and len(dev.lazy.ops) == 2  # a power of two: one op each
    close(y, a.astype(np.complex128), np.complex64)
    assert len(dev.lazy.ops) == 0


def test_queued_transforms_bind_nothing_new_once_seen():
    """Transforms queued back to back (their results and temporaries not yet back in the
    pool) bind nothing new the second time: the passes' temporary is the device's shared
    scratch, not memory each binding takes from the pool."""
    dev = wgc.current_device()
    x = wgc.from_numpy(cplx((2, 1 << 14), "c64"))
    for _ in range(2):
        before = dict(dev.stats)
        ys = [xp.fft.fft(x) for _ in range(6)]
        wgc.synchronize()
        del ys
    assert dev.stats["bind_groups_created"] == before["bind_groups_created"]
    assert dev.stats["buffers_created"] == before["buffers_created"]
