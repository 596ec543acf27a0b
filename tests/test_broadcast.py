"""Binary elementwise kernels broadcast as numpy does: every dtype, odd shapes (0-size, 0-d,
1-d against 3-d, u8 words spanning rows), launches split over the binding limit, errors."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.runtime import current_device


# The elementwise kernels themselves (wgc.add and the others are the array namespace's, with
# its promotion and true division; these files test the kernels under them)
def _kernel(name):
    def run(a, b, out=None):
        return wgc.run_kernel(f"elementwise_{name}", [a, b], out)
    return run


_kernel_add, _kernel_multiply, _kernel_divide = (_kernel(n) for n in ("add", "multiply",
                                                                      "divide"))


ALL = ["f32", "f16", "f64", "s32", "s64", "u32", "u8"]
OPS = {"add": (_kernel_add, np.add), "sub": (wgc.sub, np.subtract),
       "multiply": (_kernel_multiply, np.multiply), "divide": (_kernel_divide, None)}
PAIRS = [
    ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 5), (3, 1)), ((), (7,)), ((5,), ()), ((), ()),
    ((1, 3), (3,)), ((0, 3), (3,)), ((3,), (0, 1)), ((4, 1, 1), (1, 5, 6)), ((9,), (1,)),
    ((2, 3, 4, 5), (3, 1, 5)), ((257,), (1,)), ((7, 1), (1, 9)), ((3, 1, 7), (1, 6, 1)),
    ((2, 1, 3, 1, 5), (1, 4, 1, 6, 1)),
    # rows a multiple of 4 long: four elements per item, as vec4 (2- and 4-byte dtypes)
    ((5, 8), (8,)), ((5, 8), (5, 1)), ((2, 3, 8), (3, 8)), ((6, 4), (1, 4)),
    ((3, 1, 12), (1, 2, 12)), ((4,), (2, 1, 4)),
]


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def make(dt, shape, rng, nonzero=False):
    npd = wgc.DTYPES[dt].numpy
    if npd.kind == "f":
        a = rng.standard_normal(shape).astype(npd)
        a[np.abs(a) < 0.25] = 1  # clear of subnormals, also in differences (f16)
    else:
        info = np.iinfo(npd)
        a = rng.integers(info.min, info.max, shape, dtype=npd, endpoint=True)
    a = np.asarray(a)
    if nonzero:
        a[a == 0] = 1
    return a


def reference(op, a, b):
    with np.errstate(all="ignore"):
        if op != "divide":
            return OPS[op][1](a, b)
        if a.dtype.kind == "f":  # the exact quotient rounded once to the dtype
            return (a.astype(np.float64) / b.astype(np.float64)).astype(a.dtype)
        a, b = np.broadcast_arrays(a, b)
        q = a // b  # integers round toward zero in WGSL
        return q + ((a % b != 0) & ((a < 0) != (b < 0))).astype(a.dtype)


def check(got, want, dt, op):
    assert got.shape == want.shape and got.dtype == want.dtype
    if wgc.DTYPES[dt].is_float:
        rtol = {"f16": 2.5e-3, "f32": 3e-7, "f64": 6e-16}[dt]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol if op == "divide" else rtol / 2.5, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dt", ALL)
def test_broadcasting_matches_numpy(dt, op, rng):
    need(dt)
    fn = OPS[op][0]
    for sa, sb in PAIRS:
        a = make(dt, sa, rng)
        b = make(dt, sb, rng, nonzero=op == "divide")
        got = fn(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
        check(got, reference(op, a, b), dt, op)


@pytest.mark.parametrize("dt", ALL)
def test_out_may_be_larger_than_the_inputs_broadcast(dt, rng):
    """As numpy's ufuncs: the output takes part in broadcasting."""
    need(dt)
    a, b = make(dt, (3,), rng), make(dt, (1,), rng)
    out = wgc.empty((2, 3), dt)
    assert _kernel_add(wgc.from_numpy(a), wgc.from_numpy(b), out) is out
    check(out.to_numpy(), np.add(a, b, out=np.empty((2, 3), a.dtype)), dt, "add")


@pytest.mark.parametrize("dt", ALL)
def test_launches_split_over_the_binding_limit(dt, rng, monkeypatch):
    """A small binding limit makes the broadcast path split the output (and the operand of
    the output's size) into bound ranges while the broadcast operand stays bound whole."""
    need(dt)
    dev = current_device()
    # 4096 elements per launch
    monkeypatch.setitem(dev.limits, "max-storage-buffer-binding-size",
                        4096 * wgc.DTYPES[dt].itemsize)
    shape = (5, 2051)  # 10,255 elements: three launches, a ragged end
    a = make(dt, shape, rng)
    b = make(dt, (1, 2051), rng)
    c = make(dt, (5, 1), rng)
    got = _kernel_add(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
    check(got, reference("add", a, b), dt, "add")
    with pytest.raises(wgc.ShapeError, match="broadcast, so it is bound whole"):
        _kernel_add(wgc.from_numpy(a), wgc.from_numpy(make(dt, (4, 1, 2051), rng)))
    got = _kernel_multiply(wgc.from_numpy(c), wgc.from_numpy(b)).to_numpy()
    check(got, reference("multiply", c, b), dt, "multiply")
    r, row = make(dt, (5, 2048), rng), make(dt, (2048,), rng)  # the vec4 rows, in launches
    got = wgc.sub(wgc.from_numpy(r), wgc.from_numpy(row)).to_numpy()
    check(got, reference("sub", r, row), dt, "sub")


@pytest.mark.slow
@pytest.mark.bigmem
def test_broadcast_past_the_real_binding_limit():
    """136 MB of f32 output: more than lavapipe's 128 MiB max binding."""
    n = 34 * 1024 * 1024
    a = (np.arange(n, dtype=np.int64) % 1_000_003).astype(np.float32)
    b = np.array([0.5], np.float32)
    with wgc.from_numpy(a) as ga, wgc.from_numpy(b) as gb:
        got = _kernel_add(ga, gb).to_numpy()
    np.testing.assert_array_equal(got, a + b)


def test_equal_sizes_take_the_vector_path():
    """Operands of the output's size share its layout: the vectorized kernel runs, also for
    (1, 3) + (3,), and its pipeline key has no broadcast constants."""
    from wgcompute.kernels import registry

    k = registry.get("elementwise_add")
    a, b = wgc.buffer([[1, 2, 3]]), wgc.buffer([10, 20, 30])
    out = wgc.empty((1, 3))
    assert k.key([a, b], out, {}).constants == ()
    assert _kernel_add(a, b).tolist() == [[11, 22, 33]]
    assert k.key([a, wgc.buffer([1])], out, {}).constants != ()


def test_errors_name_the_shapes():
    a, b = wgc.empty((3, 4)), wgc.empty((5,))
    with pytest.raises(wgc.ShapeError,
                       match=r"input 'a' is \(3, 4\) and input 'b' is \(5,\); they "
                             r"do not broadcast"):
        _kernel_add(a, b)
    with pytest.raises(wgc.ShapeError, match=r"the inputs broadcast to \(3, 4\) and out is "
                                             r"\(4, 4\)"):
        _kernel_add(a, wgc.empty((4,)), wgc.empty((4, 4)))
    with pytest.raises(wgc.ShapeError, match=r"out is \(4,\)"):
        _kernel_add(a, wgc.empty((4,)), wgc.empty((4,)))
    with pytest.raises(wgc.DtypeError, match="input 'a' is f32 and input 'b' is s32"):
        _kernel_add(a, wgc.empty((4,), "s32"))
    with pytest.raises(wgc.DtypeError, match="dtypes must match"):
        _kernel_add(a, wgc.empty((4,), "s32"), wgc.empty((3, 4)))
    # unary kernels do not broadcast
    with pytest.raises(wgc.ShapeError, match="no broadcasting"):
        wgc.scale(wgc.empty((4,)), 2.0, wgc.empty((3, 4)))


def test_too_many_alternating_dimensions_are_refused_alike_naming_the_shapes():
    """A broadcast alternating over more coalesced dimensions than the strided programs index
    (16) is refused by the elementwise kernel and by a fused program with one message: the
    operands' shapes, the output's, the count and the limit."""
    a = wgc.from_numpy(np.ones((2, 1) * 9, np.float32))
    b = wgc.from_numpy(np.ones((1, 2) * 9, np.float32))
    said = (r"broadcasting \(2, 1, 2, .*\) and \(1, 2, 1, .*\) to \(2, 2, 2, .*\) alternates "
            r"over 18 dimensions; at most 16 are supported")
    with pytest.raises(wgc.ShapeError, match="elementwise_add: " + said):
        _kernel_add(a, b)
    with pytest.raises(wgc.ShapeError, match="elementwise_fused: " + said):
        wgc.fuse(lambda x, y: x * 2.0 + y)(a, b)


def test_rows_of_four_take_vec4_items():
    from wgcompute.kernels import registry

    k = registry.get("elementwise_add")
    x, out = wgc.empty((3, 8)), wgc.empty((3, 8))
    assert dict(k.key([x, wgc.empty((8,))], out, {}).constants)["vec4"] == (1,)
    assert dict(k.key([x, wgc.empty((3, 1))], out, {}).constants)["vec4"] == (0,)
    assert "vec4" not in dict(k.key([wgc.empty((3, 6)), wgc.empty((6,))], wgc.empty((3, 6)),
                                    {}).constants)
    assert "vec4" not in dict(k.key([wgc.empty((3, 8), "f64"), wgc.empty((8,), "f64")],
                                    wgc.empty((3, 8), "f64"), {}).constants)


def test_pipelines_are_shared_across_shapes_of_one_pattern():
    """The strided shader is keyed by the coalesced rank, not the shape: one pipeline serves
    every (m, n) + (n,) add."""
    from wgcompute.kernels import registry

    k = registry.get("elementwise_add")
    keys = {k.key([wgc.empty((m, n)), wgc.empty((n,))], wgc.empty((m, n)), {})
            for m, n in [(2, 3), (7, 5), (100, 33)]}
    assert len(keys) == 1
