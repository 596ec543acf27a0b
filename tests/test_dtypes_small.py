"""The 1- and 2-byte integers (s8, s16, u16: lanes of u32 words, signed ones sign-extended when
read) and u64, against numpy: round trips of odd lengths and views, arithmetic that wraps,
comparisons, bitwise ops and shifts, astype both ways (exact and unsafe), reductions,
broadcasting, getitem and setitem."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import array_api as xp
from wgcompute.dtypes import DTYPES

SMALL = ["s8", "s16", "u16"]
NEW = SMALL + ["u64"]
pytestmark = pytest.mark.computes("dt", "src", "dst")


def _values(dt, n, rng):
    """n values of dtype dt spanning its whole range (its extremes first)."""
    info = np.iinfo(DTYPES[dt].numpy)
    edges = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], dtype=info.dtype)
    body = rng.integers(info.min, info.max, n, dtype=info.dtype, endpoint=True)
    body[:min(n, edges.size)] = edges[:min(n, edges.size)]
    return body


def test_table_rows():
    for name, npt, lanes in (("s8", np.int8, 4), ("s16", np.int16, 2), ("u16", np.uint16, 2)):
        d = DTYPES[name]
        assert d.numpy == np.dtype(npt) and d.packed and d.lanes == lanes
        assert d.wgsl == ("i32" if name[0] == "s" else "u32")
    assert DTYPES["u64"].feature == "shader-int64" and not DTYPES["u64"].packed
    for alias, name in (("int8", "s8"), ("int16", "s16"), ("uint16", "u16"),
                        ("uint64", "u64"), (np.int8, "s8"), (np.uint64, "u64")):
        assert wgc.dtypes.dtype(alias) == name


@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("n", [0, 1, 3, 5, 7, 1027])
def test_round_trip_odd_lengths(dt, n, rng):
    a = _values(dt, n, rng)
    b = wgc.buffer(a)
    assert b.dtype == dt and b.nbytes == a.nbytes
    np.testing.assert_array_equal(b.to_numpy(), a)
    assert bytes(b.read()) == a.tobytes()
    np.testing.assert_array_equal(wgc.buffer(a.tolist(), dtype=dt).to_numpy(), a)
    if n > 2:  # a view starting inside a word, odd length
        np.testing.assert_array_equal(b[1:n - 1].to_numpy(), a[1:n - 1])
        np.testing.assert_array_equal(b[::-2].to_numpy(), a[::-2])


@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "mod", "neg", "abs"])
def test_arithmetic_wraps_as_numpy(dt, op, rng):
    a, b = _values(dt, 1031, rng), _values(dt, 1031, rng)[::-1].copy()
    if op in ("floordiv", "mod"):
        b[b == 0] = 3
        if DTYPES[dt].kind == "i":  # numpy's min // -1 warns and is undefined in C
            b[b == -1] = 5
    x, y = wgc.buffer(a), wgc.buffer(b)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
          "floordiv": np.floor_divide, "mod": np.remainder}
    with np.errstate(over="ignore"):
        if op == "neg":
            got, want = (-x).to_numpy(), np.negative(a)
        elif op == "abs":
            got, want = abs(x).to_numpy(), np.abs(a)
        else:
            got = {"add": x + y, "sub": x - y, "mul": x * y, "floordiv": x // y,
                   "mod": x % y}[op].to_numpy()
            want = fn[op](a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_lists_out_of_range_are_refused():
    for data, dt in (([128], "s8"), ([-1], "u16"), ([2**15], "s16"), ([-1], "u64"),
                     ([2**64], "u64"), ([1.5], "s8")):
        with pytest.raises(wgc.DtypeError, match=dt):
            wgc.buffer(data, dtype=dt)


def test_int8_wraps():
    x = wgc.buffer(np.array([127, -128, 100], np.int8))
    np.testing.assert_array_equal((x + wgc.buffer(np.array([1, -1, 100], np.int8))).to_numpy(),
                                  np.array([-128, 127, -56], np.int8))


@pytest.mark.parametrize("dt", NEW)
def test_comparisons_and_bitwise(dt, rng):
    a, b = _values(dt, 777, rng), _values(dt, 777, rng)
    b[::3] = a[::3]
    ns = xp.asarray(a), xp.asarray(b)
    for f in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
              "bitwise_and", "bitwise_or", "bitwise_xor"):
        got = getattr(xp, f)(*ns).to_numpy()
        np.testing.assert_array_equal(got, getattr(np, f)(a, b), err_msg=f)
    np.testing.assert_array_equal(xp.bitwise_invert(ns[0]).to_numpy(), np.invert(a))
    shifts = (np.arange(777) % (DTYPES[dt].bits + 3)).astype(a.dtype)
    s = xp.asarray(shifts)
    np.testing.assert_array_equal(xp.bitwise_left_shift(ns[0], s).to_numpy(),
                                  np.left_shift(a, shifts))
    np.testing.assert_array_equal(xp.bitwise_right_shift(ns[0], s).to_numpy(),
                                  np.right_shift(a, shifts))


@pytest.mark.parametrize("dt", NEW)
def test_broadcast_and_scalars(dt, rng):
    a = _values(dt, 35, rng).reshape(5, 7)
    row = _values(dt, 7, rng)[::-1].copy()
    x, r = wgc.buffer(a), wgc.buffer(row)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((x + r).to_numpy(), a + row)
        np.testing.assert_array_equal((x[:, :1] * r).to_numpy(), a[:, :1] * row)
        np.testing.assert_array_equal((x + 3).to_numpy(), a + a.dtype.type(3))
        np.testing.assert_array_equal((x < r).to_numpy(), a < row)
    np.testing.assert_array_equal(xp.where(xp.asarray(a > 0), x, r).to_numpy(),
                                  np.where(a > 0, a, row))


@pytest.mark.parametrize("src", NEW + ["u8", "s32", "u32", "s64", "f32", "f64", "f16", "bool"])
@pytest.mark.parametrize("dst", NEW)
def test_astype_both_ways(src, dst, rng):
    sd = DTYPES[src]
    if sd.kind in "iu":
        sources = [_values(src, 517, rng)]
    elif sd.kind == "b":
        sources = [rng.integers(0, 2, 517).astype(bool)]
    else:  # whole values every new dtype holds, and fractions
        sources = [np.round(rng.uniform(0, 100, 517)).astype(sd.numpy),
                   (rng.standard_normal(517) * 50).astype(sd.numpy)]
    pairs = [(dst, a) for a in sources] + [(src, _values(dst, 517, rng))]
    for d, arr in pairs:
        x = wgc.buffer(arr)
        if DTYPES[d].kind == "b":
            got = wgc.astype(x, d, casting="exact").to_numpy()
            np.testing.assert_array_equal(got, arr != 0)
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            want = arr.astype(DTYPES[d].numpy)
        exact = np.array_equal(want.astype(object), arr.astype(object))  # every value kept
        if exact:
            np.testing.assert_array_equal(wgc.astype(x, d, casting="exact").to_numpy(), want)
        else:
            with pytest.raises(wgc.DtypeError, match=d):
                wgc.astype(x, d, casting="exact")
        if arr.dtype.kind in "iub" and DTYPES[d].kind in "iu":  # unsafe: the low bits
            np.testing.assert_array_equal(wgc.astype(x, d, casting="unsafe").to_numpy(), want)
        elif arr.dtype.kind == "f" and DTYPES[d].kind in "iu":  # rounded, saturating
            got = wgc.astype(x, d, casting="unsafe", rounding="floor").to_numpy()
            info = np.iinfo(want.dtype)
            ref = np.clip(np.floor(arr.astype(np.float64)), info.min, info.max)
            np.testing.assert_array_equal(got.astype(np.float64), ref)


@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("shape,axis", [((1031,), None), ((6, 37), 1), ((37, 6), 0),
                                        ((3, 5, 4), (0, 2)), ((0, 5), 0)])
def test_reductions(dt, shape, axis, rng):
    a = _values(dt, int(np.prod(shape)), rng).reshape(shape)
    x = xp.asarray(a)
    got = xp.sum(x, axis=axis).to_numpy()
    wide = np.int32 if DTYPES[dt].kind == "i" else np.uint32 if DTYPES[dt].itemsize < 8 \
        else np.uint64
    if DTYPES[dt].itemsize == 8:
        wide = a.dtype
    with np.errstate(over="ignore"):
        want = np.sum(a, axis=axis, dtype=wide)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if a.size:
        for f in ("max", "min"):
            got = getattr(xp, f)(x, axis=axis).to_numpy()
            assert got.dtype == a.dtype
            np.testing.assert_array_equal(got, getattr(np, f)(a, axis=axis))
        np.testing.assert_array_equal(xp.any(x, axis=axis).to_numpy(), np.any(a, axis=axis))
        np.testing.assert_array_equal(xp.argmax(x, axis=axis if axis != (0, 2) else None)
                                      .to_numpy(),
                                      np.argmax(a, axis=axis if axis != (0, 2) else None))


@pytest.mark.parametrize("dt", NEW)
def test_getitem_setitem(dt, rng):
    a = _values(dt, 63, rng).reshape(7, 9)
    x = wgc.buffer(a)
    np.testing.assert_array_equal(x[2:5, 1::3].to_numpy(), a[2:5, 1::3])
    np.testing.assert_array_equal(x[:, 3].to_numpy(), a[:, 3])
    np.testing.assert_array_equal(x[4].to_numpy(), a[4])
    v = _values(dt, 9, rng)
    x[1:4, ::4] = wgc.buffer(v[:3])
    a[1:4, ::4] = v[:3]
    x[6] = wgc.buffer(v)
    a[6] = v
    np.testing.assert_array_equal(x.to_numpy(), a)
    xx = xp.asarray(a)
    np.testing.assert_array_equal(xp.reshape(xx, (9, 7)).to_numpy(), a.reshape(9, 7))
    np.testing.assert_array_equal(xp.permute_dims(xx, (1, 0)).to_numpy(), a.T)
    np.testing.assert_array_equal(xp.full((5,), -1 if dt[0] == "s" else 7, dtype=DTYPES[dt])
                                  .to_numpy(), np.full(5, -1 if dt[0] == "s" else 7, a.dtype))


def test_array_api_promotion():
    i8, u8, i16, u16 = (xp.int8, xp.uint8, xp.int16, xp.uint16)
    assert xp.result_type(i8, u8) == i16
    assert xp.result_type(u16, i8) == xp.int32
    assert xp.result_type(xp.uint64, xp.uint8) == xp.uint64
    with pytest.raises(wgc.DtypeError, match="int64"):
        xp.result_type(xp.uint64, xp.int64)
    with pytest.raises(wgc.DtypeError, match="uint64"):
        xp.result_type(xp.uint64, xp.int8)
    z = xp.asarray(np.array([100, -100], np.int8)) + xp.asarray(np.array([200, 3], np.uint8))
    assert z.dtype == i16
    np.testing.assert_array_equal(z.to_numpy(), [300, -97])
    names = xp.__array_namespace_info__().dtypes()
    for n in ("int8", "int16", "uint16"):
        assert n in names


_ADD1 = """
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = a[g.x] + 1; }
}
"""


def test_custom_kernels_do_not_read_packed_lanes_as_elements():
    # an s8 buffer's words are four lanes, not i32 elements: a shader declaring array<i32>
    # must not receive it
    wgc.register_kernel("dtypes_small_add1", _ADD1)
    x = wgc.buffer(np.array([1, -2, 3, 4], np.int8))
    with pytest.raises(wgc.DtypeError, match="s8.*array<i32>"):
        wgc.run_kernel("dtypes_small_add1", [x], wgc.empty((4,), "s32"))
    y = wgc.run_kernel("dtypes_small_add1", [wgc.astype(x, "s32")], wgc.empty((4,), "s32"))
    np.testing.assert_array_equal(y.to_numpy(), [2, -1, 4, 5])


@pytest.mark.parametrize("dt", NEW)
def test_sorting_scans_products_and_rolls(dt, rng):
    a = _values(dt, 6 * 37, rng).reshape(6, 37)  # (u64: values past 2**63 among them)
    x = xp.asarray(a)
    np.testing.assert_array_equal(xp.sort(x, axis=1).to_numpy(), np.sort(a, axis=1))
    np.testing.assert_array_equal(xp.argsort(x, axis=1, stable=True).to_numpy(),
                                  np.argsort(a, axis=1, kind="stable"))
    np.testing.assert_array_equal(xp.argmin(x, axis=0).to_numpy(), np.argmin(a, axis=0))
    np.testing.assert_array_equal(xp.unique_values(x).to_numpy(), np.unique(a))
    wide = a.dtype if DTYPES[dt].itemsize == 8 else np.int32 if dt[0] == "s" else np.uint32
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(xp.cumulative_sum(x, axis=1).to_numpy(),
                                      np.cumsum(a, axis=1, dtype=wide))
        np.testing.assert_array_equal(xp.matmul(x, xp.permute_dims(x, (1, 0))).to_numpy(),
                                      np.matmul(a, a.T))  # wrapping, in the dtype
    np.testing.assert_array_equal(xp.roll(x, 3, axis=1).to_numpy(), np.roll(a, 3, axis=1))
    np.testing.assert_array_equal(xp.roll(x, -5).to_numpy(), np.roll(a, -5))


def test_u64_needs_shader_int64_and_the_small_integers_do_not():
    """On an adapter without shader-int64 (wgpu's GL backend: no 64-bit integers), uint64 is
    stored but its kernels are refused naming the feature, and the namespace does not list
    it; the packed 1- and 2-byte integers compute there."""
    gl = next((a for a in wgc.devices() if a.backend == "OpenGL"), None)
    if gl is None:
        pytest.skip("needs an OpenGL adapter (one without shader-int64)")
    try:
        dev = wgc.device(backend="gl")
    except wgc.DeviceError as e:
        pytest.skip(f"this machine's OpenGL adapter cannot compute: {str(e)[:200]}")
    try:
        if dev.has("shader-int64"):
            pytest.skip(f"{dev.name} has shader-int64")
        names = xp.__array_namespace_info__().dtypes(device=dev)
        assert "uint64" not in names and "int64" not in names
        assert {"int8", "int16", "uint16"} <= set(names)
        b = wgc.buffer(np.array([1, 2, 2**64 - 1], np.uint64), device=dev)
        np.testing.assert_array_equal(b.to_numpy(), [1, 2, 2**64 - 1])
        with pytest.raises(wgc.UnsupportedDtypeError, match="u64.*shader-int64"):
            (b + b).to_numpy()
        s = wgc.buffer(np.array([127, -2, 3], np.int8), device=dev)
        np.testing.assert_array_equal((s + s).to_numpy(), np.array([127, -2, 3], np.int8) * 2)
    finally:
        dev.close()


@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("shape", [(33, 70), (1, 5), (64, 3)])
def test_matrix_transpose(dt, shape, rng):
    a = _values(dt, shape[0] * shape[1], rng).reshape(shape)
    np.testing.assert_array_equal(xp.matrix_transpose(xp.asarray(a)).to_numpy(), a.T)
    np.testing.assert_array_equal(wgc.buffer(a).T.to_numpy(), a.T)


@pytest.mark.parametrize("dt", NEW)
def test_trace_and_cross(dt, rng):
    a = _values(dt, 4 * 3 * 3, rng).reshape(4, 3, 3)
    x = xp.asarray(a)
    wide = a.dtype if DTYPES[dt].itemsize == 8 else np.int32 if dt[0] == "s" else np.uint32
    with np.errstate(over="ignore"):
        got = xp.linalg.trace(x).to_numpy()
        assert got.dtype == wide
        np.testing.assert_array_equal(got, np.trace(a, axis1=-2, axis2=-1, dtype=wide))
        got = xp.linalg.trace(x, dtype=x.dtype).to_numpy()  # wrapping in the dtype
        np.testing.assert_array_equal(got, np.trace(a, axis1=-2, axis2=-1, dtype=a.dtype))
        np.testing.assert_array_equal(xp.linalg.cross(x, x[::-1]).to_numpy(),
                                      np.cross(a, a[::-1]))


@pytest.mark.parametrize("dt", SMALL)
def test_small_integer_indices_keep_their_sign(dt):
    a = np.arange(10, dtype=np.float32)
    idx = np.array([-1, 3, 0, -10] if dt[0] == "s" else [9, 3, 0, 1], DTYPES[dt].numpy)
    x, i = xp.asarray(a), xp.asarray(idx)
    np.testing.assert_array_equal(x[i].to_numpy(), a[idx])
    np.testing.assert_array_equal(xp.take(x, i).to_numpy(), np.take(a, idx))


def test_u64_indices_are_refused():
    # read as the 32- or 64-bit indices the gathers take, 2**32 + 1 would pick element 1
    x = xp.asarray(np.arange(10, dtype=np.float32))
    big = xp.asarray(np.array([2**32 + 1], np.uint64))
    with pytest.raises(wgc.IndexingError, match="u64"):
        x[big]
    with pytest.raises(wgc.IndexingError, match="u64"):
        xp.take(x, big)


@pytest.mark.parametrize("dt", SMALL)
@pytest.mark.parametrize("shape,axis", [((3, 1001), 0), ((1001, 3), 1), ((5, 67, 3), 1),
                                        ((2, 40000), 1)])
def test_packed_reduction_outputs(dt, shape, axis, rng):
    """max / min keep the packed dtype: several outputs share a word, from rows, columns and
    split columns, odd output counts included."""
    a = _values(dt, int(np.prod(shape)), rng).reshape(shape)
    x = xp.asarray(a)
    for f in ("max", "min"):
        got = getattr(xp, f)(x, axis=axis).to_numpy()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, getattr(np, f)(a, axis=axis))
    np.testing.assert_array_equal(xp.argmax(x, axis=axis).to_numpy(), np.argmax(a, axis=axis))


@pytest.mark.parametrize("dt", NEW)
def test_scalar_and_mask_assignment(dt):
    a = np.arange(12).astype(DTYPES[dt].numpy).reshape(3, 4)
    x = xp.asarray(a)
    v = -5 if dt[0] == "s" else 77
    x[1, 2] = v
    a[1, 2] = v
    x[:, 1] = v
    a[:, 1] = v
    m = a > 8
    x[xp.asarray(m)] = 3
    a[m] = 3
    np.testing.assert_array_equal(x.to_numpy(), a)
    if DTYPES[dt].itemsize < 8:
        with pytest.raises(wgc.DtypeError, match=dt):
            x[0, 0] = 2**20
