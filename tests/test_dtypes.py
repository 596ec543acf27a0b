"""The dtype table and exact conversion: names and spellings, numpy equivalents, what may
narrow (floats round) and what may not (overflow, fractions, out-of-range integers)."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import dtypes
from wgcompute.dtypes import DTYPES, convert_exact, list_to_array

TABLE = {  # name: (numpy, WGSL compute type, item size, feature kernels need)
    "f32": (np.float32, "f32", 4, None),
    "f64": (np.float64, "f64", 8, "shader-f64"),
    "f16": (np.float16, "f16", 2, "shader-f16"),
    "s32": (np.int32, "i32", 4, None),
    "s64": (np.int64, "i64", 8, "shader-int64"),
    "u32": (np.uint32, "u32", 4, None),
    "u8": (np.uint8, "u32", 1, None),  # packed four to a u32 word
    "s8": (np.int8, "i32", 1, None),  # packed four to a u32 word, computed in i32
    "s16": (np.int16, "i32", 2, None),  # packed two to a u32 word
    "u16": (np.uint16, "u32", 2, None),
    "u64": (np.uint64, "u64", 8, "shader-int64"),
    "bool": (np.bool_, "u32", 1, None),  # the bytes 0 and 1, packed as u8
    "c64": (np.complex64, "vec2<f32>", 8, None),  # (real, imaginary) f32 pairs
    "c128": (np.complex128, "vec2<f64>", 16, "shader-f64"),  # (real, imaginary) f64 pairs
}


def test_table_matches_the_seed_names():
    assert set(DTYPES) == set(TABLE)
    assert wgc.DTYPES is DTYPES
    for name, (npt, wgsl, size, feature) in TABLE.items():
        d = DTYPES[name]
        assert (d.name, d.numpy, d.wgsl, d.itemsize, d.feature) == \
            (name, np.dtype(npt), wgsl, size, feature)
        assert d.itemsize == np.dtype(npt).itemsize
        assert str(d) == name
        assert d.is_float == (np.dtype(npt).kind == "f")
    assert DTYPES["u8"].packed and DTYPES["bool"].packed and not DTYPES["u32"].packed


@pytest.mark.parametrize("spec,name", [
    ("f32", "f32"), ("float32", "f32"), (np.float32, "f32"), (np.dtype("<f4"), "f32"),
    (np.dtype(">f4"), "f32"), ("float64", "f64"), (float, "f64"), ("i32", "s32"),
    ("int32", "s32"), (np.int32, "s32"), ("i64", "s64"), (np.int64, "s64"),
    ("uint32", "u32"), ("uint8", "u8"), (np.uint8, "u8"), ("float16", "f16"),
    (DTYPES["s64"], "s64"),
])
def test_spellings_resolve_to_one_name(spec, name):
    assert dtypes.dtype(spec).name == name


@pytest.mark.parametrize("spec", ["f8", "bfloat16", "complex256", np.longdouble,
                                  np.clongdouble, 3, None, np.dtype("U4")])
def test_unknown_dtypes(spec):
    with pytest.raises(wgc.DtypeError, match="my_arg"):
        dtypes.dtype(spec, "my_arg")


def test_float_narrowing_rounds_but_never_overflows():
    x = np.array([0.1, 1 / 3], np.float64)
    np.testing.assert_array_equal(convert_exact(x, DTYPES["f32"]), x.astype(np.float32))
    np.testing.assert_array_equal(convert_exact(x, DTYPES["f16"]), x.astype(np.float16))
    with pytest.raises(wgc.DtypeError, match="out of range for f16"):
        convert_exact(np.array([70000.0]), DTYPES["f16"])
    with pytest.raises(wgc.DtypeError, match="out of range for f32"):
        convert_exact(np.array([1e300]), DTYPES["f32"])
    inf = convert_exact(np.array([np.inf, -np.inf, np.nan]), DTYPES["f16"])
    assert np.isinf(inf[:2]).all() and np.isnan(inf[2])  # non-finite values stay themselves


def test_integers_to_floats_only_when_exact():
    ok = np.array([2**53, -(2**53), 3], np.int64)
    np.testing.assert_array_equal(convert_exact(ok, DTYPES["f64"]), ok.astype(np.float64))
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        convert_exact(np.array([2**53 + 1], np.int64), DTYPES["f64"])
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        convert_exact(np.array([2**64 - 1], np.uint64), DTYPES["f64"])
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        convert_exact(np.array([2**63 - 1], np.int64), DTYPES["f64"])
    # the extremes that are powers of two are exact, and accepted
    assert convert_exact(np.array([-(2**63)], np.int64), DTYPES["f64"]).tolist() == [-(2.0**63)]
    assert convert_exact(np.array([2**63], np.uint64), DTYPES["f64"]).tolist() == [2.0**63]
    with pytest.raises(wgc.DtypeError, match="exactly as f16"):
        convert_exact(np.array([2049], np.int32), DTYPES["f16"])
    np.testing.assert_array_equal(convert_exact(np.array([2048], np.int32), DTYPES["f16"]),
                                  [2048])


@pytest.mark.parametrize("src", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                 np.uint32, np.uint64])
@pytest.mark.parametrize("dst", ["s32", "s64", "u32", "u8"])
def test_integer_ranges(src, dst):
    """Every integer value of the source type that fits the target converts; the extremes
    that do not fit are refused."""
    si, di = np.iinfo(src), np.iinfo(DTYPES[dst].numpy)
    lo, hi = max(int(si.min), int(di.min)), min(int(si.max), int(di.max))
    fits = np.array([lo, hi, (lo + hi) // 2], dtype=src)
    got = convert_exact(fits, DTYPES[dst])
    assert got.dtype == DTYPES[dst].numpy
    assert got.tolist() == fits.tolist()
    for v in (int(si.min), int(si.max)):
        if not int(di.min) <= v <= int(di.max):
            with pytest.raises(wgc.DtypeError, match=f"out of range for {dst}"):
                convert_exact(np.array([v], dtype=src), DTYPES[dst])


def test_floats_to_integers_only_when_whole_and_in_range():
    np.testing.assert_array_equal(convert_exact(np.array([-3.0, 4.0]), DTYPES["s32"]), [-3, 4])
    for bad, match in (([0.5], "not whole"), ([np.nan], "not whole"), ([np.inf], "not whole"),
                       ([2.0**31], "out of range"), ([-1.0], "out of range")):
        dst = "u32" if bad == [-1.0] else "s32"
        with pytest.raises(wgc.DtypeError, match=match):
            convert_exact(np.array(bad), DTYPES[dst])


def test_booleans_become_0_and_1():
    assert convert_exact(np.array([True, False]), DTYPES["u8"]).tolist() == [1, 0]
    assert wgc.buffer([True, False, True], dtype="s32").tolist() == [1, 0, 1]


def test_lists_of_python_ints_beyond_int64():
    with pytest.raises(wgc.DtypeError, match="out of range for u32"):
        list_to_array([2**64 - 1], DTYPES["u32"])
    with pytest.raises(wgc.DtypeError, match="s64"):
        list_to_array([2**64 - 1, -1], DTYPES["s64"])
    assert list_to_array([2**70], DTYPES["f64"]).tolist() == [2.0**70]  # exact
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        list_to_array([2**70 + 1], DTYPES["f64"])
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        list_to_array([10**400], DTYPES["f64"])


def test_an_int_among_floats_is_not_rounded_on_its_way_in():
    assert wgc.buffer([2**53 + 1, 2.0], dtype="s64").tolist() == [2**53 + 1, 2]
    with pytest.raises(wgc.DtypeError, match="exactly as f32"):
        wgc.buffer([2**24 + 1, 0.5], dtype="f32")
    with pytest.raises(wgc.DtypeError, match="exactly as f64"):
        wgc.buffer([2**53 + 1, 0.5], dtype="f64")
    with pytest.raises(wgc.DtypeError, match="not whole"):
        wgc.buffer([2**53 + 1, 0.5], dtype="s64")


def test_lists_mixing_ints_and_floats():
    assert list_to_array([1, 2.5], DTYPES["f32"]).tolist() == [1.0, 2.5]
    assert list_to_array([[1, 2.0]], DTYPES["s32"]).tolist() == [[1, 2]]


@pytest.mark.parametrize("fn,a,b,want", [
    ("add", [255, 255, 255, 255, 255, 1, 255], [1, 0, 1, 0, 1, 0, 1], [0, 255, 0, 255, 0, 1, 0]),
    ("sub", [0, 1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0, 1], [255, 1, 255, 1, 255, 1, 255]),
    ("multiply", [16, 1, 16, 1, 128], [16, 1, 32, 1, 2], [0, 1, 0, 1, 0]),
])
def test_u8_lanes_do_not_carry_into_their_neighbours(fn, a, b, want):
    """u8 travels four to a u32 word; a lane that wraps or borrows must not touch the next."""
    got = getattr(wgc, fn)(wgc.buffer(a, dtype="u8"), wgc.buffer(b, dtype="u8")).tolist()
    with np.errstate(over="ignore"):
        ref = getattr(np, {"add": "add", "sub": "subtract", "multiply": "multiply"}[fn])(
            np.array(a, np.uint8), np.array(b, np.uint8))
    assert want == ref.tolist()
    assert got == want


def test_u8_buffer_bytes_are_the_elements():
    buf = wgc.buffer([1, 2, 3, 4, 5], dtype="u8")
    assert buf.nbytes == 5
    assert wgc.read(buf) == bytes([1, 2, 3, 4, 5])


@pytest.mark.parametrize("dt", list(TABLE))
def test_extremes_round_trip_through_the_gpu(dt):
    npd = DTYPES[dt].numpy
    if npd.kind == "b":
        vals = np.array([False, True, False, True, True])
        np.testing.assert_array_equal(wgc.from_numpy(vals).to_numpy(), vals)
        return
    info = np.finfo(npd) if npd.kind in "fc" else np.iinfo(npd)  # c64: its f32 parts
    vals = np.array([info.min, info.max, 0], dtype=npd)
    if npd.kind in "fc":
        vals = np.append(vals, [info.tiny, np.inf, -np.inf]).astype(npd)
    got = wgc.from_numpy(vals).to_numpy()
    np.testing.assert_array_equal(got, vals)
    assert got.tobytes() == vals.tobytes()


@pytest.mark.parametrize("value,dst,ok", [
    (2.0**63, "s64", False),  # float64 rounds int64's max up to exactly this
    (-(2.0**63), "s64", True),
    (2.0**63 - 1024, "s64", True),  # the largest float64 below 2**63
    (np.float32(2.0**31), "s32", False),
    (-(2.0**31), "s32", True),
    (2.0**32, "u32", False),
    (4294967295.0, "u32", True),
    (2.0**64, "u32", False),
])
def test_float_to_int_bounds_are_exact(value, dst, ok):
    arr = np.array([value])
    if ok:
        assert convert_exact(arr, DTYPES[dst]).tolist() == [int(value)]
    else:
        with pytest.raises(wgc.DtypeError, match=f"out of range for {dst}"):
            convert_exact(arr, DTYPES[dst])


@pytest.mark.parametrize("name", list(wgc.DTYPES))
def test_buffer_dtype_is_numpy_compatible_and_keeps_its_name(name):
    """np.dtype(buf.dtype) is numpy's dtype, while buf.dtype still is the name: equal to it,
    a key of DTYPES, printed and formatted as it, and pickled back to the table's entry."""
    import pickle

    buf = wgc.empty((2,), name)
    dt = buf.dtype
    npd = wgc.DTYPES[name].numpy
    assert np.dtype(dt) == npd
    assert np.zeros(3, dtype=dt).dtype == npd
    assert dt == name and name == dt and dt != "nope" and not (dt != name)
    assert dt == npd and dt == npd.type and dt == npd.name  # numpy spellings too
    assert wgc.DTYPES[dt] is wgc.DTYPES[name] and dt in {name} and dt in (name,)
    assert str(dt) == name and repr(dt) == repr(name) and f"{dt}" == name
    assert f"{dt:>5}" == f"{name:>5}"
    assert pickle.loads(pickle.dumps(dt)) is wgc.DTYPES[name]
    assert wgc.dtype(buf) == name and type(wgc.dtype(buf)) is str
    others = [n for n in wgc.DTYPES if n != name]
    assert all(dt != o for o in others)
    assert dt != None and dt != 4  # noqa: E711 - np.dtype(None) is float64, not a match
