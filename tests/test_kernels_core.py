"""Every built-in kernel against numpy, for every dtype it supports, at odd sizes (0, 1, 3,
255, 257, 1_000_003 and one past 65,535 workgroups of 256), plus matmul and a 64M-element add."""

import numpy as np
import pytest

import wgcompute as wgc

pytestmark = pytest.mark.computes("dt")  # kernels on f16/f64/s64 need adapter features

BINARY = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_multiply": np.multiply,
    "elementwise_divide": None,  # reference below: floats divide, integers truncate
}
SMALL = [0, 1, 3, 255, 257]
MEDIUM = 1_000_003
PAST_GRID = 65_535 * 256 + 3  # one 1-D dispatch of 256-wide workgroups cannot cover this
PAST_GRID_MARKS = (pytest.mark.slow, pytest.mark.bigmem)  # 16.7M elements: seconds, 0.5 GB
BIG_DTYPES = ("f32", "u8")  # the sizes past the grid limit run for these only (time budget)

# Relative tolerance per float dtype for + - * (WGSL: correctly rounded, half an ULP) and
# / (WGSL allows 2.5 ULP; an ULP is 2**-10, 2**-23, 2**-52 relative for f16, f32, f64).
RTOL = {"f16": (1e-3, 2.5e-3), "f32": (1.2e-7, 3e-7), "f64": (2.3e-16, 6e-16)}


def _np(dt):
    return wgc.DTYPES[dt].numpy


def make(dt, n, rng, nonzero=False):
    """Random data covering the dtype's whole range (integers) or normal floats."""
    npd = _np(dt)
    if npd.kind == "f":
        a = rng.standard_normal(n, dtype=np.float32 if dt != "f64" else np.float64).astype(npd)
        # keep clear of subnormals (whether a GPU flushes them is its own business), also in
        # differences: f16 values >= 2**-2 differ by at least 2**-12, still a normal f16
        a[np.abs(a) < (2.0**-2 if dt == "f16" else 2.0**-8)] = 1
    else:
        info = np.iinfo(npd)
        a = rng.integers(info.min, info.max, n, dtype=npd, endpoint=True)
    if nonzero:
        a[a == 0] = 1
    return a


def trunc_divide(a, b):
    """Integer division rounding toward zero (WGSL), exact for every int width."""
    with np.errstate(all="ignore"):
        q = a // b
        fix = (a % b != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(a.dtype)


def reference(name, a, b):
    with np.errstate(all="ignore"):
        if name != "elementwise_divide":
            return BINARY[name](a, b)
        if a.dtype.kind == "f":  # exact quotient rounded once to the dtype (may be inf)
            return (a.astype(np.float64) / b.astype(np.float64)).astype(a.dtype)
        return trunc_divide(a, b)


def assert_matches(got, want, dt, divide=False):
    assert got.dtype == _np(dt)
    assert got.shape == want.shape
    if _np(dt).kind == "f":
        rtol = RTOL[dt][1 if divide else 0]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=0)
    else:
        np.testing.assert_array_equal(got, want)


def binary_cases():
    for name in BINARY:
        for dt in wgc.kernel_info(name).dtypes:
            for n in SMALL + [MEDIUM]:
                yield name, dt, n
            if dt in BIG_DTYPES:
                yield pytest.param(name, dt, PAST_GRID, marks=PAST_GRID_MARKS)


@pytest.mark.parametrize("name,dt,n", list(binary_cases()))
def test_binary_elementwise(name, dt, n, rng):
    a = make(dt, n, rng)
    b = make(dt, n, rng, nonzero=name == "elementwise_divide")
    with wgc.from_numpy(a) as ga, wgc.from_numpy(b) as gb, wgc.empty((n,), dt) as out:
        assert wgc.run_kernel(name, [ga, gb], out) is out
        assert_matches(out.to_numpy(), reference(name, a, b), dt,
                       divide=name == "elementwise_divide")


def test_every_builtin_kernel_is_listed():
    names = set(wgc.kernels())
    assert {"elementwise_add", "elementwise_sub", "elementwise_multiply",
            "elementwise_divide", "scale", "relu", "matmul"} <= names
    assert wgc.kernel_info("multiply") is wgc.kernel_info("elementwise_multiply")
    # every dtype but bool (no arithmetic on truth values) and c64, c128 (complex_binary's)
    assert set(wgc.kernel_info("elementwise_add").dtypes) == \
        set(wgc.DTYPES) - {"bool", "c64", "c128"}
    assert set(wgc.kernel_info("matmul").dtypes) == {"f32", "f64", "f16"}


@pytest.mark.parametrize("dt", ["s32", "s64", "u32", "u8"])
def test_integer_wraparound_like_numpy(dt):
    info = np.iinfo(_np(dt))
    edge = [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]
    edge = np.array([v for v in edge if info.min <= v <= info.max], dtype=_np(dt))
    a = np.repeat(edge, len(edge))
    b = np.tile(edge, len(edge))
    ga, gb = wgc.from_numpy(a), wgc.from_numpy(b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(wgc.add(ga, gb).to_numpy(), a + b)
        np.testing.assert_array_equal(wgc.sub(ga, gb).to_numpy(), a - b)
        np.testing.assert_array_equal(wgc.multiply(ga, gb).to_numpy(), a * b)
        np.testing.assert_array_equal(wgc.scale(ga, int(info.max)).to_numpy(),
                                      a * _np(dt).type(info.max))


@pytest.mark.parametrize("dt", ["s32", "s64", "u32", "u8"])
def test_integer_divide_truncates_and_x_over_zero_is_x(dt):
    """Documented semantics (WGSL's): integers round toward zero; x / 0 gives x;
    the most negative value / -1 gives itself (numpy's wraparound gives the same)."""
    info = np.iinfo(_np(dt))
    if info.min < 0:
        a = np.array([7, -7, 7, -7, 5, 0, info.min, info.max, -9], dtype=_np(dt))
        b = np.array([2, 2, -2, -2, 0, 0, -1, 0, 0], dtype=_np(dt))
        want = [3, -3, -3, 3, 5, 0, info.min, info.max, -9]
    else:
        a = np.array([7, 6, 200, 0, info.max, 9], dtype=_np(dt))
        b = np.array([2, 3, 0, 0, 0, 10], dtype=_np(dt))
        want = [3, 2, 200, 0, info.max, 0]
    # the kernel's semantics (wgc.divide is the array namespace's true division)
    got = wgc.run_kernel("elementwise_divide", [wgc.from_numpy(a), wgc.from_numpy(b)]).tolist()
    assert got == want


def scale_cases():
    for dt in wgc.kernel_info("scale").dtypes:
        for n in SMALL + [MEDIUM]:
            yield dt, n
        if dt in BIG_DTYPES:
            yield pytest.param(dt, PAST_GRID, marks=PAST_GRID_MARKS)


@pytest.mark.parametrize("dt,n", list(scale_cases()))
def test_scale(dt, n, rng):
    a = make(dt, n, rng)
    npd = _np(dt)
    scalar = {"f": 1.5, "i": -7, "u": 200}[npd.kind]  # 200 wraps u8, as numpy does
    with np.errstate(all="ignore"):
        want = a.astype(np.float64) * scalar if npd.kind == "f" else a * npd.type(scalar)
    assert_matches(wgc.scale(wgc.from_numpy(a), scalar).to_numpy(), want, dt)


def relu_cases():
    for dt in wgc.kernel_info("relu").dtypes:
        for n in SMALL + [MEDIUM]:
            yield dt, n, 0.0
            if _np(dt).kind == "f":
                yield dt, n, 0.1
    yield pytest.param("f32", PAST_GRID, 0.0, marks=PAST_GRID_MARKS)
    yield pytest.param("f32", PAST_GRID, 0.25, marks=PAST_GRID_MARKS)


@pytest.mark.parametrize("dt,n,slope", list(relu_cases()))
def test_relu(dt, n, slope, rng):
    a = make(dt, n, rng)
    npd = _np(dt)
    if npd.kind == "f":
        # the kernel multiplies in the dtype by the slope rounded to it, as numpy does here
        want = np.where(a > 0, a, a * npd.type(slope) if slope else npd.type(0))
        got = wgc.relu(wgc.from_numpy(a), slope=slope).to_numpy()
    else:
        want = np.maximum(a, 0)
        got = wgc.relu(wgc.from_numpy(a)).to_numpy()
    assert_matches(got, want, dt)


def test_relu_leaky_values():
    got = wgc.relu(wgc.buffer([-2.0, -0.5, 0.0, 1.5]), slope=0.5).tolist()
    assert got == [-1.0, -0.25, 0.0, 1.5]


def test_a_param_converted_before_keeps_its_sign_and_its_refusal():
    """Params are converted once per (dtype, value) and then looked up: -0.0 and 0.0 stay
    two values, and a value that does not fit the dtype is refused at every call."""
    x = wgc.buffer([1.0, -2.0])
    for scalar, signs in [(0.0, [False, True]), (-0.0, [True, False]), (0.0, [False, True])]:
        assert np.signbit(wgc.scale(x, scalar).to_numpy()).tolist() == signs
    ints = wgc.from_numpy(np.array([1, 2], np.int32))
    for _ in range(2):
        with pytest.raises(wgc.ArgumentError, match="scalar"):
            wgc.scale(ints, 2.5)
    assert wgc.scale(ints, 3).to_numpy().tolist() == [3, 6]


# matmul: |C - A·B| <= gamma_K · (|A|·|B|) + u_out·|A·B| elementwise, the textbook bound of
# a K-term dot product; u is the unit roundoff of the accumulator (f16 accumulates in f32)
# and of the output type.
MATMUL_U = {"f32": (2.0**-24, 2.0**-24), "f64": (2.0**-53, 2.0**-53),
            "f16": (2.0**-24, 2.0**-11)}


@pytest.mark.parametrize("dt", ["f32", "f64", "f16"])
@pytest.mark.parametrize("mkn", [(1, 1, 1), (3, 5, 7), (129, 67, 255), (512, 512, 512)])
def test_matmul_against_float64(mkn, dt, rng):
    m, k, n = mkn
    a = rng.standard_normal((m, k)).astype(_np(dt))
    b = rng.standard_normal((k, n)).astype(_np(dt))
    got = wgc.matmul(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
    assert got.shape == (m, n) and got.dtype == _np(dt)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    u_acc, u_out = MATMUL_U[dt]
    gamma = k * u_acc / (1 - k * u_acc)
    bound = gamma * (np.abs(a64) @ np.abs(b64)) + u_out * np.abs(want)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound * 1.01 + 1e-300), f"max excess {np.max(err - bound):.3g}"


def test_matmul_empty_dimensions():
    a = wgc.buffer_zeros((0, 4), "f32")
    b = wgc.buffer_zeros((4, 3), "f32")
    assert wgc.matmul(a, b).shape == (0, 3)
    a = wgc.from_numpy(np.ones((2, 0), np.float32))
    b = wgc.from_numpy(np.ones((0, 3), np.float32))
    out = wgc.from_numpy(np.full((2, 3), 7, np.float32))
    assert wgc.matmul(a, b, out).to_numpy().tolist() == [[0.0] * 3] * 2  # empty sum is 0


@pytest.mark.slow
@pytest.mark.bigmem
def test_add_64m_f32_past_the_binding_limit():
    """64M f32 = 256 MiB per buffer: more than lavapipe's 128 MiB max binding, so the add
    runs over chunked bind ranges. Values differ per element so a wrong chunk offset shows."""
    n = 64 * 1024 * 1024
    limit = wgc.device_info()["limits"]["max-storage-buffer-binding-size"]
    idx = np.arange(n, dtype=np.int64)
    a = (idx % 1_000_003).astype(np.float32)
    b = (idx // 1_000_003).astype(np.float32)
    with wgc.from_numpy(a) as ga, wgc.from_numpy(b) as gb, wgc.empty((n,), "f32") as out:
        del idx
        wgc.add(ga, gb, out)
        got = out.to_numpy()
    np.testing.assert_array_equal(got, a + b)
    print(f"64M f32 add ran with max-storage-buffer-binding-size={limit}")
