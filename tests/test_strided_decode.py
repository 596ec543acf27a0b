"""Broadcast and strided elementwise programs decode the output index once per invocation (a
carry per item after that, no division), and copies that keep the last axis move runs of it
as 16-, 8- or 4-byte words: results equal numpy's bit for bit over dtypes, row lengths around
the invocation's step, launches split over the binding limit, unaligned views and 0-size."""

import re

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import array_api as xp
from wgcompute.kernels import registry  # noqa: F401
from wgcompute.kernels.elementwise.regions import REGION_COPY
from wgcompute.runtime import current_device

DTYPES = ["f32", "f16", "f64", "s32", "u32", "u8", "s16", "s8"]
# row lengths below, at and past the 1024 elements an invocation steps by (vec4 items: 4 x
# 256), and shapes that coalesce to 2, 3 and 4 strided dimensions
PAIRS = [
    ((9, 1), (9, 5)), ((300, 3), (3,)), ((70, 5), (70, 1)), ((3, 1023), (1023,)),
    ((5, 1024), (1024,)), ((4, 1025), (4, 1)), ((2, 4100), (4100,)), ((513, 8), (8,)),
    ((257, 12), (257, 1)), ((6, 7, 40), (7, 1)), ((5, 3, 9, 16), (3, 1, 16)),
    ((3, 4, 5, 6, 7), (4, 1, 6, 1)), ((3, 1, 5, 1, 7), (1, 4, 1, 6, 1)), ((0, 8), (8,)),
]


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def make(dt, shape, rng):
    npd = wgc.DTYPES[dt].numpy
    if npd.kind == "f":
        a = rng.standard_normal(shape).astype(npd)
        a[np.abs(a) < 0.25] = 1  # clear of subnormals, also in sums (f16)
        return a
    info = np.iinfo(npd)
    return rng.integers(info.min, info.max, shape, dtype=npd, endpoint=True)


def same_bits(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}"))


def _decoded_once(source: str) -> bool:
    """Whether every division by a size lies in main before its items loop opens."""
    head = (source.index("let base ="), source.index("for (var j"))
    found = [m.start() for m in re.finditer(r"[/%] p\.sh", source)]
    return bool(found) and all(head[0] < at < head[1] for at in found)


def _source(name: str, ndim: int, dt: str | None = None) -> str:
    """The compiled source of this device's pipeline of kernel ``name`` (on ``dt``) with
    ``ndim`` coalesced strided dimensions."""
    for key, c in current_device().pipelines.items():
        consts = dict(key.constants)
        if dt not in (None, *key.dtypes):
            continue
        if key.kernel == name and ndim in (consts.get(k) for k in ("broadcast", "ndim", "dims")):
            return c.source
    raise AssertionError(f"no {name} pipeline of {ndim} dimensions")


@pytest.mark.parametrize("dt", DTYPES)
def test_broadcast_add_matches_numpy_bit_for_bit(dt, rng):
    need(dt)
    for sa, sb in PAIRS:
        a, b = make(dt, sa, rng), make(dt, sb, rng)
        with np.errstate(over="ignore"):
            want = a + b
        got = wgc.run_kernel("elementwise_add", [wgc.from_numpy(a), wgc.from_numpy(b)])
        same_bits(got.to_numpy(), want)


@pytest.mark.parametrize("dt", ["f32", "f16", "s32", "u8"])
def test_launches_split_over_the_binding_limit_step_from_their_start(dt, rng, monkeypatch):
    """Each launch decodes its first element from its own start."""
    need(dt)
    dev = current_device()
    monkeypatch.setitem(dev.limits, "max-storage-buffer-binding-size",
                        4096 * wgc.DTYPES[dt].itemsize)  # 4096 elements per launch
    for sa, sb in (((7, 2051), (2051,)), ((5, 2048), (5, 1)), ((3, 7, 1000), (7, 1))):
        a, b = make(dt, sa, rng), make(dt, sb, rng)
        with np.errstate(over="ignore"):
            want = a * b
        got = wgc.run_kernel("elementwise_multiply", [wgc.from_numpy(a), wgc.from_numpy(b)])
        same_bits(got.to_numpy(), want)
        got = wgc.fuse(lambda u, v: u * v + u)(wgc.from_numpy(a), wgc.from_numpy(b))
        with np.errstate(over="ignore"):
            same_bits(got.to_numpy(), a * b + a)
        if dt in NP:
            c = a > 0 if a.dtype.kind == "f" else a % 3 == 0
            got = xp.where(xp.asarray(c), xp.asarray(b), xp.asarray(a))
            same_bits(np.asarray(got), np.where(c, b, a))


def test_fused_chain_with_a_bias_row_matches_numpy(rng):
    """The automatic fusion's program reads the bias through the stepped decode."""
    x = rng.standard_normal((37, 3072)).astype(np.float32)
    bias = rng.standard_normal(3072).astype(np.float32)
    col = rng.standard_normal((37, 1)).astype(np.float32)
    gx, gb, gc = xp.asarray(x), xp.asarray(bias), xp.asarray(col)
    got = ((gx * 0.5 + 1.0) * gx + gb) * gc
    want = ((x * np.float32(0.5) + np.float32(1.0)) * x + bias) * col
    same_bits(np.asarray(got), want)
    got = wgc.fuse(lambda u, v: u * 2.0 + v)(wgc.from_numpy(x), wgc.from_numpy(bias))
    same_bits(got.to_numpy(), x * np.float32(2.0) + bias)


def test_broadcast_programs_do_not_divide_per_item(rng):
    """A bias row, a column and a 3-d broadcast: the index is decoded before the items loop
    (divisions there), and each item only adds the step; past four coalesced dimensions the
    program decodes every item (and is still right)."""
    a = rng.standard_normal((6, 5, 8)).astype(np.float32)
    for b in (np.ones((8,), np.float32), np.ones((6, 1, 1), np.float32),
              np.ones((5, 1), np.float32)):
        wgc.run_kernel("elementwise_add", [wgc.from_numpy(a), wgc.from_numpy(b)])
    n = rng.standard_normal((5, 7)).astype(np.float32)
    wgc.run_kernel("elementwise_add", [wgc.from_numpy(n), wgc.from_numpy(n[0])])  # not vec4
    for ndim in (2, 3):
        assert _decoded_once(_source("elementwise_add", ndim))
    got = wgc.fuse(lambda u, v: u * 2.0 + v)(wgc.from_numpy(n), wgc.from_numpy(n[:, :1]))
    same_bits(got.to_numpy(), n * np.float32(2.0) + n[:, :1])
    assert _decoded_once(_source("elementwise_fused", 2))
    # the array namespace's other operators (a u8 result: lane by lane)
    i = rng.integers(-50, 50, (9, 1030)).astype(np.int32)
    j = rng.integers(1, 50, (1030,)).astype(np.int32)
    got = xp.asarray(i) // xp.asarray(j)
    same_bits(np.asarray(got), i // j)
    assert _decoded_once(_source("array_floordiv", 2))
    same_bits(np.asarray(xp.asarray(n) < xp.asarray(n[0])), n < n[0])
    assert _decoded_once(_source("array_lt", 2))  # (a packed output: lane by lane, stepped)
    u = rng.integers(0, 255, (7, 1030)).astype(np.uint8)
    got = wgc.run_kernel("elementwise_add", [wgc.from_numpy(u), wgc.from_numpy(u[:1])])
    same_bits(got.to_numpy(), u + u[:1])
    assert _decoded_once(_source("elementwise_add", 2, "u8"))
    five = np.ones((3, 1, 5, 1, 7), np.float32)
    got = wgc.run_kernel("elementwise_add", [wgc.from_numpy(five),
                                             wgc.from_numpy(np.ones((4, 1, 6, 1), np.float32))])
    same_bits(got.to_numpy(), five + np.ones((4, 1, 6, 1), np.float32))
    assert not _decoded_once(_source("elementwise_add", 5))


def _region_word(shape, strides, dt="f32", offset=0) -> int:
    k = REGION_COPY
    out = wgc.empty(shape, dt)
    key = k.key([wgc.empty((4096,), dt)], out, {
        "shape": shape, "a_strides": strides, "a_offset": offset,
        "out_strides": tuple(int(s) for s in np.cumprod((1,) + shape[:0:-1])[::-1]),
        "out_offset": 0})
    return dict(key.constants)["itemsize"]


def test_region_copy_moves_runs_of_the_last_axis_as_words():
    assert _region_word((384, 197, 64), (64, 384 * 64, 1)) == 16  # permute (1, 0, 2)
    assert _region_word((4, 3, 6), (6, 24, 1)) == 8  # rows of 6 f32: vec2 words
    assert _region_word((4, 3, 5), (5, 20, 1)) == 4  # rows of 5: element by element
    assert _region_word((4, 3, 8), (8, 32, 1), offset=2) == 8  # offset 2: vec2 words
    assert _region_word((4, 3, 16), (16, 64, 1), "u8") == 16  # sixteen bytes, no atomics
    assert _region_word((4, 3, 5), (5, 20, 1), "u8") == 1  # odd rows: byte lanes
    assert _region_word((4, 3, 8), (1, 32, 4)) == 4  # last axis strided: element by element
    x = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    same_bits(np.asarray(xp.permute_dims(xp.asarray(x), (2, 1, 0))), x.transpose(2, 1, 0))
    assert _decoded_once(_source("region_copy", 3))


NP = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "u8": np.uint8,
      "s16": np.int16, "s64": np.int64, "bool": np.bool_}


@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("shape, perm", [
    ((197, 12, 64), (1, 0, 2)), ((3, 5, 7), (1, 0, 2)), ((2, 3, 4, 8), (0, 2, 1, 3)),
    ((4, 6, 2), (1, 0, 2)), ((5, 3, 16), (1, 0, 2)), ((0, 3, 4), (1, 0, 2)),
    ((3, 4, 1), (1, 0, 2)), ((6, 4, 12), (2, 0, 1))])
def test_permute_and_views_match_numpy(dt, shape, perm, rng):
    need(dt)
    if dt == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    else:
        x = make(dt, shape, rng) if dt in DTYPES else rng.integers(-99, 99, shape).astype(NP[dt])
    g = xp.asarray(x)
    same_bits(np.asarray(xp.permute_dims(g, perm)), np.transpose(x, perm))
    if x.ndim == 3 and x.shape[2] > 2:  # unaligned views: offsets off every word
        same_bits(np.asarray(xp.permute_dims(g[1:, :, 2:], perm)),
                  np.transpose(x[1:, :, 2:], perm))
        same_bits(np.asarray(xp.permute_dims(g[:, 1:, 4:], perm)),
                  np.transpose(x[:, 1:, 4:], perm))


@pytest.mark.parametrize("dt", ["f32", "f64", "s32", "u8", "s16"])
def test_where_broadcast_matches_numpy_and_decodes_once(dt, rng):
    need(dt)
    for sc, s1, s2 in (((5, 1030), (1030,), (5, 1)), ((3, 7, 9), (7, 1), (9,)),
                       ((0, 4), (4,), (1,)), ((3, 1, 5, 1, 7), (4, 1, 6, 1), (7,))):
        c = rng.integers(0, 2, sc).astype(bool)
        x1, x2 = make(dt, s1, rng), make(dt, s2, rng)
        got = xp.where(xp.asarray(c), xp.asarray(x1), xp.asarray(x2))
        same_bits(np.asarray(got), np.where(c, x1, x2))
    # u8 and s16 outputs are words of four and two lanes, each lane decoded; the pipeline of
    # this dtype (another test's where of another dtype may have been compiled first)
    if dt not in ("u8", "s16"):
        assert _decoded_once(_source("where", 2, dt))


def test_bool_and_small_int_operators_broadcast_lane_by_lane(rng):
    """Packed outputs (bool, u8, s16: lanes of u32 words) step each lane's index by one."""
    for sa, sb in PAIRS:
        p, q = rng.integers(0, 2, sa).astype(bool), rng.integers(0, 2, sb).astype(bool)
        same_bits(np.asarray(xp.asarray(p) ^ xp.asarray(q)), p ^ q)
        a, b = make("s16", sa, rng), make("s16", sb, rng)
        same_bits(np.asarray(xp.asarray(a) > xp.asarray(b)), a > b)
        u, v = make("u8", sa, rng), make("u8", sb, rng)
        same_bits(np.asarray(xp.asarray(u) | xp.asarray(v)), u | v)


def test_fused_chain_with_a_packed_output_steps_its_lanes(rng, monkeypatch):
    """A fused program writing bool words (four elements an item) reads a broadcast bias
    lane by lane from one decode per invocation, also in launches split at the limit."""
    for shape in ((37, 1030), (9, 5, 12), (3, 3)):
        x = rng.standard_normal(shape).astype(np.float32)
        bias = rng.standard_normal(shape[-1:]).astype(np.float32)
        got = wgc.fuse(lambda u, v: (u * 2.0 + v) > 0.5)(wgc.from_numpy(x),
                                                           wgc.from_numpy(bias))
        same_bits(got.to_numpy(), (x * np.float32(2.0) + bias) > np.float32(0.5))
    assert _decoded_once(_source("elementwise_fused", 2, "bool"))
    monkeypatch.setitem(current_device().limits, "max-storage-buffer-binding-size", 4096 * 4)
    x = rng.standard_normal((5, 2051)).astype(np.float32)
    col = rng.standard_normal((5, 1)).astype(np.float32)
    got = wgc.fuse(lambda u, v: u < v)(wgc.from_numpy(x), wgc.from_numpy(col))
    same_bits(got.to_numpy(), x < col)
