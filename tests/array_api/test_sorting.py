"""Sorting, searching and set functions of wgcompute.array_api against numpy: sort and argsort
(np.sort / np.argsort kind="stable"), argmax, argmin, searchsorted, count_nonzero and the
unique_* functions (np.unique with equal_nan=False), over dtypes, sizes, axes, duplicates,
nan and ±0."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

REAL = tuple(d for d in ("f32", "f64", "s32", "s64", "u32", "u8", "bool") if d in DTYPES)


def need(*dts):
    have = wgc.device_info()["features"]
    for dt in dts:
        f = DTYPES[dt].feature
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def values(dt, shape, rng, spread=True):
    """Values of ``dt`` with many duplicates; floats with -0.0, nan and ±inf among them."""
    npt = DTYPES[dt].numpy
    n = int(np.prod(shape))
    if DTYPES[dt].is_float:
        pool = np.array([0.0, -0.0, 1.0, -1.0, 0.25, 2.5, np.nan, -np.nan, np.inf, -np.inf,
                         -3e38, 1e-30])
        out = rng.choice(pool, n)
        if spread:
            out = np.where(rng.random(n) < 0.5, rng.standard_normal(n) * 100, out)
    elif DTYPES[dt].kind == "b":
        out = rng.random(n) < 0.5
    else:
        info = np.iinfo(npt)
        pool = np.array([info.min, info.max, 0, 1, 2, info.max - 1], dtype=npt)
        out = rng.choice(pool, n)
        if spread:
            out = np.where(rng.random(n) < 0.5, rng.integers(0, 1000, n).astype(npt), out)
    return out.astype(npt).reshape(shape)


def reference_argsort(a, axis, descending):
    """numpy's stable argsort; descending: reversed order, equal elements in their order,
    nan first."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    moved = np.moveaxis(a, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, 0)
    rows = []
    for r in flat:
        if r.dtype.kind == "f":
            nan = np.isnan(r)
            rows.append(np.lexsort((np.where(nan, 0, -r.astype(np.float64)), ~nan)))
        elif r.dtype.kind == "b":
            rows.append(np.argsort(~r, kind="stable"))
        else:
            rows.append(np.argsort(-r.astype(object), kind="stable").astype(np.int64))
    out = np.array(rows, dtype=np.int64).reshape(moved.shape)
    return np.moveaxis(out, -1, axis)


def same_bits(got, want):
    """Equal values, nan where nan, and the same sign of every zero."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
    if got.dtype.kind == "f":
        assert np.array_equal(np.signbit(got), np.signbit(want))


CASES = [((0,), -1), ((1,), 0), ((7,), -1), ((1031,), 0), ((3, 5), 0), ((3, 5), -1),
         ((2, 3, 4), 1), ((4, 0, 3), 2), ((2, 1, 300), -1)]


@pytest.mark.parametrize("dt", REAL)
def test_sort_and_argsort(dt, rng):
    need(dt)
    for shape, axis in CASES:
        a = values(dt, shape, rng)
        g = wgc.from_numpy(a)
        for descending in (False, True):
            order = reference_argsort(a, axis, descending)
            idx = xp.argsort(g, axis=axis, descending=descending)
            assert idx.dtype == xp.int32 and idx.shape == a.shape
            assert np.array_equal(idx.to_numpy(), order), (shape, axis, descending)
            got = xp.sort(g, axis=axis, descending=descending, stable=False)
            assert got.dtype == g.dtype
            same_bits(got.to_numpy(), np.take_along_axis(a, order, axis))


@pytest.mark.parametrize("dt", ["f32", "s64", "u32"])
def test_sort_large_rows(dt, rng):
    """More than one tile and many rows, ties everywhere (few distinct values)."""
    need(dt)
    for shape in [(100_003,), (37, 1000)]:
        a = values(dt, shape, rng, spread=dt != "f32")
        g = wgc.from_numpy(a)
        order = np.argsort(a, axis=-1, kind="stable")
        assert np.array_equal(xp.argsort(g).to_numpy(), order)
        same_bits(xp.sort(g).to_numpy(), np.take_along_axis(a, order, -1))


def test_sort_zero_d_and_refusals(rng):
    g = wgc.from_numpy(np.array(3.5, np.float32))
    assert xp.sort(g).shape == () and float(xp.sort(g).to_numpy()) == 3.5
    assert xp.argsort(g).shape == () and int(xp.argsort(g).to_numpy()) == 0
    v = wgc.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(wgc.ArgumentError, match="axis"):
        xp.sort(v, axis=2)
    with pytest.raises(wgc.ArgumentError, match="descending"):
        xp.sort(v, descending="yes")
    with pytest.raises(wgc.ArgumentError, match="stable"):
        xp.argsort(v, stable=None)
    with pytest.raises(wgc.ArgumentError, match="x"):
        xp.sort(np.arange(3))


ARG_SHAPES = [((), None), ((1,), 0), ((7,), None), ((3, 5), 0), ((3, 5), -1),
              ((2, 3, 4), 1), ((1031,), None), ((0, 3), 1)]


@pytest.mark.parametrize("dt", REAL)
def test_argmax_argmin(dt, rng):
    """First occurrence; a nan wins both (numpy); ±0 equal; extremes of each integer."""
    need(dt)
    for shape, axis in ARG_SHAPES:
        a = values(dt, shape, rng)
        g = wgc.from_numpy(a)
        for name in ("argmax", "argmin"):
            for keepdims in (False, True):
                got = getattr(xp, name)(g, axis=axis, keepdims=keepdims)
                want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
                assert got.dtype == xp.int32
                assert np.array_equal(got.to_numpy(), want), (name, shape, axis, keepdims)
    with pytest.raises(wgc.ShapeError, match="no elements"):
        xp.argmax(wgc.from_numpy(np.zeros((2, 0), DTYPES[dt].numpy)), axis=1)


@pytest.mark.parametrize("dt", REAL)
def test_count_nonzero(dt, rng):
    need(dt)
    for shape, axis in ARG_SHAPES + [((2, 3, 4), (0, 2)), ((4, 0), 0), ((2, 3), ())]:
        a = values(dt, shape, rng)
        for keepdims in (False, True):
            got = xp.count_nonzero(wgc.from_numpy(a), axis=axis, keepdims=keepdims)
            want = np.count_nonzero(a, axis=axis, keepdims=keepdims)
            assert got.dtype == xp.int32
            assert np.array_equal(got.to_numpy(), want), (shape, axis, keepdims)


@pytest.mark.needs("s64")  # an int64 sorter
@pytest.mark.parametrize("dt", REAL)
def test_searchsorted(dt, rng):
    need(dt)
    for n, shape in [(0, (3,)), (1, (4,)), (37, ()), (2000, (5, 7)), (20_001, (3000,))]:
        a = values(dt, (n,), rng)
        x1 = np.sort(a, kind="stable")
        v = values(dt, shape, rng)
        for side in ("left", "right"):
            got = xp.searchsorted(wgc.from_numpy(x1), wgc.from_numpy(v), side=side)
            assert got.dtype == xp.int32 and got.shape == v.shape
            assert np.array_equal(got.to_numpy(), np.searchsorted(x1, v, side=side))
            order = np.argsort(a, kind="stable").astype(np.int64)
            got = xp.searchsorted(wgc.from_numpy(a), wgc.from_numpy(v), side=side,
                                  sorter=wgc.from_numpy(order))
            assert np.array_equal(got.to_numpy(), np.searchsorted(a, v, side=side,
                                                                  sorter=order))


def test_searchsorted_promotes_and_refuses():
    x1 = wgc.from_numpy(np.array([0, 2, 4], np.uint8))
    v = wgc.from_numpy(np.array([-1, 3, 300], np.int32))
    assert np.array_equal(xp.searchsorted(x1, v).to_numpy(), [0, 2, 3])
    with pytest.raises(wgc.ArgumentError, match="side"):
        xp.searchsorted(x1, v, side="middle")
    with pytest.raises(wgc.ShapeError, match="x1"):
        xp.searchsorted(wgc.from_numpy(np.zeros((2, 2), np.int32)), v)
    with pytest.raises(wgc.IndexingError, match="sorter holds 3"):
        xp.searchsorted(x1, v, sorter=wgc.from_numpy(np.array([0, 1, 3], np.int32)))
    with pytest.raises(wgc.IndexingError, match="sorter"):
        xp.searchsorted(x1, v, sorter=wgc.from_numpy(np.array([0, 1], np.int32)))
    with pytest.raises(wgc.DtypeError, match="float32"):
        xp.searchsorted(wgc.from_numpy(np.zeros(3, np.float32)), v)


@pytest.mark.parametrize("dt", REAL)
def test_unique(dt, rng):
    """np.unique(equal_nan=False): each nan its own value; -0.0 and +0.0 one value."""
    need(dt)
    for shape in [(0,), (1,), (7,), (3, 5), (2, 0, 3), (4, 1031)]:
        a = values(dt, shape, rng, spread=False)
        g = wgc.from_numpy(a)
        v, first, inv, counts = np.unique(a, return_index=True, return_inverse=True,
                                          return_counts=True, equal_nan=False)
        inv = inv.reshape(a.shape)
        same_bits(xp.unique_values(g).to_numpy(), v)
        r = xp.unique_counts(g)
        same_bits(r.values.to_numpy(), v)
        assert r.counts.dtype == xp.int32 and np.array_equal(r.counts.to_numpy(), counts)
        r = xp.unique_inverse(g)
        same_bits(r.values.to_numpy(), v)
        assert np.array_equal(r.inverse_indices.to_numpy(), inv)
        r = xp.unique_all(g)
        same_bits(r.values.to_numpy(), v)
        assert np.array_equal(r.indices.to_numpy(), first)
        assert np.array_equal(r.inverse_indices.to_numpy(), inv)
        assert np.array_equal(r.counts.to_numpy(), counts)


def test_unique_large(rng):
    a = rng.integers(-5000, 5000, 200_001).astype(np.int32)
    v, first, inv, counts = np.unique(a, return_index=True, return_inverse=True,
                                      return_counts=True)
    r = xp.unique_all(wgc.from_numpy(a))
    for got, want in zip(r, (v, first, inv, counts)):
        assert np.array_equal(got.to_numpy(), want)


@pytest.mark.parametrize("subgroups,wide", [(False, True), (True, False)])
def test_sort_other_programs(subgroups, wide, monkeypatch, rng):
    """The workgroup-memory scan (adapters without subgroups) and the tiles of 1,024
    elements (adapters with WebGPU's default 16 KiB of workgroup memory); few segments, so
    that each runs through several tiles (the last one fewer)."""
    from wgcompute.kernels.sort import programs

    monkeypatch.setattr(programs, "use_subgroups", subgroups)
    monkeypatch.setattr(programs, "wide_tiles", wide)
    monkeypatch.setattr(programs, "max_items_wide_records", 8)  # (64-bit records' wide tiles)
    monkeypatch.setattr(programs, "SEGMENTS", 3)
    a = values("f64", (2, 4100), rng)  # 5 or 9 tiles in 3 segments
    g = wgc.from_numpy(a)
    assert np.array_equal(xp.argsort(g).to_numpy(), np.argsort(a, axis=-1, kind="stable"))
    order = reference_argsort(a, -1, True)
    same_bits(xp.sort(g, descending=True).to_numpy(), np.take_along_axis(a, order, -1))


def test_unique_and_count_nonzero_complex(rng):
    """Complex values group by equality of both parts (±0 equal); one with a nan part is a
    value of its own; values sorted by real part, then imaginary part (numpy's order)."""
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.nan, 2.5], np.float32)
    a = (rng.choice(pool, (20, 30)) + 1j * rng.choice(pool, (20, 30))).astype(np.complex64)
    g = wgc.from_numpy(a)
    nan = np.isnan(a.real) | np.isnan(a.imag)
    finite = np.unique(a[~nan])
    r = xp.unique_all(g)
    values = r.values.to_numpy()
    assert values.shape == (finite.size + nan.sum(),)
    assert np.array_equal(values[:finite.size], finite)
    rest = values[finite.size:]
    assert (np.isnan(rest.real) | np.isnan(rest.imag)).all()
    assert np.array_equal(values[r.inverse_indices.to_numpy()], a, equal_nan=True)
    assert np.array_equal(a.ravel()[r.indices.to_numpy()], values, equal_nan=True)
    counts = r.counts.to_numpy()
    assert counts.sum() == a.size and (counts[finite.size:] == 1).all()
    assert np.array_equal(counts[:finite.size],
                          [np.sum(a[~nan] == v) for v in finite])
    assert int(xp.count_nonzero(g).to_numpy()) == np.count_nonzero(a)
    assert np.array_equal(xp.count_nonzero(g, axis=0).to_numpy(), np.count_nonzero(a, axis=0))
    with pytest.raises(wgc.DtypeError, match="complex64"):
        xp.sort(g)
    with pytest.raises(wgc.DtypeError, match="complex64"):
        xp.argmax(g)


RADIX_SHAPES = [(2047,), (2048,), (2049,), (16_383,), (16_385,), (49_153,), (5, 2049),
                (3000, 3)]


@pytest.mark.parametrize("bits", [8, pytest.param(11, marks=pytest.mark.slow)])  # 11: not default
@pytest.mark.parametrize("dt", ["f32", "s32", "u32", "f64", "s64"])
def test_sort_digits_of_8_and_11_bits(bits, dt, monkeypatch, rng):
    """32-bit keys in 4 passes of 8-bit digits or 3 of 11-bit ones (rows: 2 passes for 3,000
    of them), 64-bit keys in 8-bit ones: sizes around the tiles (2,048 or 1,024 elements) and
    segments (8 tiles), ascending and descending, bit-identical to numpy's stable order."""
    from wgcompute.kernels.sort import programs

    need(dt)
    monkeypatch.setattr(programs, "RADIX_BITS_32", bits)
    for shape in RADIX_SHAPES:
        a = values(dt, shape, rng)
        g = wgc.from_numpy(a)
        for descending in (False, True):
            order = reference_argsort(a, -1, descending)
            assert np.array_equal(xp.argsort(g, descending=descending).to_numpy(), order), \
                (shape, descending)
            same_bits(xp.sort(g, descending=descending).to_numpy(),
                      np.take_along_axis(a, order, -1))


@pytest.mark.parametrize("subgroups,wide", [(False, True), (True, False)])
def test_sort_11_bit_digits_other_programs(subgroups, wide, monkeypatch, rng):
    """11-bit digits with the workgroup-memory scan, with tiles of 1,024 elements, and with
    segments of more than 8 tiles (SEGMENTS: 3)."""
    from wgcompute.kernels.sort import programs

    monkeypatch.setattr(programs, "RADIX_BITS_32", 11)
    monkeypatch.setattr(programs, "use_subgroups", subgroups)
    monkeypatch.setattr(programs, "wide_tiles", wide)
    monkeypatch.setattr(programs, "SEGMENTS", 3)
    a = values("f32", (2, 30_001), rng)
    g = wgc.from_numpy(a)
    assert np.array_equal(xp.argsort(g).to_numpy(), np.argsort(a, axis=-1, kind="stable"))
    order = reference_argsort(a, -1, True)
    same_bits(xp.sort(g, descending=True).to_numpy(), np.take_along_axis(a, order, -1))


def test_sort_refuses_other_digit_widths(monkeypatch):
    from wgcompute.kernels.sort import programs

    monkeypatch.setattr(programs, "RADIX_BITS_32", 9)
    with pytest.raises(wgc.ArgumentError, match="RADIX_BITS_32 is 9; expected 8 or 11"):
        xp.sort(wgc.from_numpy(np.arange(5, dtype=np.float32)))


def test_sort_takes_8_bit_digits_where_11_bit_ones_do_not_fit(monkeypatch, rng):
    """An adapter with WebGPU's default 16 KiB of workgroup memory (this one's limit read as
    that) sorts 32-bit keys with 8-bit digits: 11-bit ones would need 27 KiB."""
    from wgcompute.kernels.sort import programs

    dev = wgc.current_device()
    real_limit = dev.limit
    monkeypatch.setattr(dev, "limit", lambda name: 16384 if name ==
                        "max-compute-workgroup-storage-size" else real_limit(name))
    monkeypatch.setattr(programs, "RADIX_BITS_32", 11)
    assert programs.radix_config(dev, 2, 11)["D"] == 256
    a = values("f32", (3, 5000), rng)
    g = wgc.from_numpy(a)
    order = np.argsort(a, axis=-1, kind="stable")
    assert np.array_equal(xp.argsort(g).to_numpy(), order)
    same_bits(xp.sort(g).to_numpy(), np.take_along_axis(a, order, -1))


def test_records_of_several_words_take_four_elements_an_invocation():
    """Tiles of 8 elements an invocation for 32-bit keys alone, 4 once a record has an index
    or a 64-bit key (faster there on an H200: programs.max_items_wide_records)."""
    from wgcompute.kernels.sort import programs

    dev = wgc.current_device()
    if dev.limit("max-compute-workgroup-storage-size") < 32768:
        pytest.skip("this adapter's workgroup memory holds tiles of 4 elements an invocation only")
    assert programs.radix_config(dev, 1)["ITEMS"] == programs.max_items == 8
    assert programs.radix_config(dev, 2)["ITEMS"] == programs.radix_config(dev, 3)["ITEMS"] == 4
