"""The radix sort's scatter on each of its paths against numpy's stable sort: the 4-bit ranking
rounds scanned with subgroup operations (adapters with subgroups) and in workgroup memory
(adapters without); records of one word read four to a load or one at a time. Long runs of
equal keys, few distinct values, tiles not full, rows, 64-bit keys, descending, nan and -0.0,
sort and argsort."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.kernels.sort import programs

PATHS = ("subgroups", "no-subgroups", "scalar-loads")


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    if request.param == "subgroups" and not wgc.current_device().has("subgroup"):
        pytest.skip(f"{wgc.device_info()['name']} has no subgroups")
    if request.param == "no-subgroups":
        monkeypatch.setattr(programs, "use_subgroups", False)
    if request.param == "scalar-loads":  # (records of one word read one at a time)
        monkeypatch.setattr(programs, "vector_loads", False)
    return request.param


def _floats(n, rng, dt=np.float32):
    pool = np.array([0.0, -0.0, 1.5, -1.5, np.nan, -np.nan, np.inf, -np.inf], dt)
    a = rng.standard_normal(n).astype(dt) * 100
    few = rng.random(n) < 0.5
    a[few] = rng.choice(pool, int(few.sum()))
    return a


def _want(a, descending):
    """numpy's stable order of each row; descending: largest first, nan first, equal elements
    (±0 among them) in their order."""
    if not descending:
        return np.argsort(a, axis=-1, kind="stable")
    rows = a.reshape(-1, a.shape[-1])
    out = []
    for r in rows:
        if r.dtype.kind == "f":
            nan = np.isnan(r)
            out.append(np.lexsort((np.where(nan, 0, -r.astype(np.float64)), ~nan)))
        else:
            out.append(np.argsort(-r.astype(object), kind="stable").astype(np.int64))
    return np.array(out).reshape(a.shape)


def _check(a, descending=False):
    g = wgc.from_numpy(a)
    order = _want(a, descending)
    got = xp.argsort(g, descending=descending).to_numpy()
    assert np.array_equal(got, order), (a.shape, a.dtype, descending)
    want = np.take_along_axis(a, order, -1)
    s = xp.sort(g, descending=descending).to_numpy()
    assert s.dtype == want.dtype
    assert np.array_equal(s.view(f"u{a.itemsize}"), want.view(f"u{a.itemsize}")), \
        (a.shape, a.dtype, descending)  # bit for bit: nan payloads and the sign of zeros


@pytest.mark.parametrize("n", [1, 31, 2047, 2048, 2049, 6143, 20_001])
def test_sizes_around_tiles(path, n, rng):
    for descending in (False, True):
        _check(_floats(n, rng), descending)


def test_long_runs_of_equal_keys(path, rng):
    """All-equal keys (every record one digit: one counter takes whole runs), few
    distinct values, and sorted and reversed input."""
    _check(np.full(9000, 7, np.int32))
    _check(np.full(9000, -0.0, np.float32), descending=True)
    _check(rng.integers(0, 3, 12_345).astype(np.int32))
    _check(rng.choice(np.array([1.0, -0.0, 0.0, np.nan], np.float32), 5000), descending=True)
    _check(np.arange(7000, dtype=np.int32))
    _check(np.arange(7000, dtype=np.int32)[::-1].copy())


def test_rows(path, rng):
    """Rows (a pass per digit of the row number after the key's) and rows of one element."""
    _check(_floats(3 * 2500, rng).reshape(3, 2500))
    _check(rng.integers(-4, 4, (700, 9)).astype(np.int32), descending=True)
    _check(_floats(40, rng).reshape(40, 1))


@pytest.mark.parametrize("dt", ["f64", "s64", "u32"])
def test_other_keys(path, dt, rng):
    """64-bit keys (8 passes: W == 2) and unsigned ones, ascending and descending."""
    from wgcompute.dtypes import DTYPES

    feature = DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {feature}")
    if dt == "f64":
        a = _floats(9000, rng, np.float64)
    elif dt == "s64":
        a = rng.integers(-2**62, 2**62, 9000).astype(np.int64)
        a[::5] = rng.integers(-3, 3, a[::5].size)
    else:
        a = rng.integers(0, 2**32, 9000, dtype=np.uint64).astype(np.uint32)
        a[::3] = 2**32 - 1
    for descending in (False, True):
        _check(a, descending)
    _check(a[:6000].reshape(2, 3000), descending=True)


def test_segments_of_several_tiles(path, monkeypatch, rng):
    """A workgroup running through several tiles in order (3 segments): each tile's counters
    start from zero and each digit's place moves on past the tile's records."""
    monkeypatch.setattr(programs, "SEGMENTS", 3)
    _check(_floats(30_001, rng))
    _check(rng.integers(0, 5, 2 * 9000).astype(np.int32).reshape(2, 9000), descending=True)


def test_tiles_of_sixteen_elements_an_invocation(path, monkeypatch, rng):
    """16 records an invocation: its nibble counters take 8 bits each (a count reaches 16,
    which 4 bits do not hold); all-equal keys put all 16 in one counter."""
    monkeypatch.setattr(programs, "max_items", 16)
    if programs.radix_config(wgc.current_device(), 1)["ITEMS"] != 16:
        pytest.skip(f"{wgc.device_info()['name']}: a tile of 4,096 records does not fit "
                    f"its workgroup memory")
    _check(np.full(9000, 7, np.int32))
    _check(_floats(20_001, rng), descending=True)
    _check(rng.integers(0, 3, 12_345).astype(np.int32))

