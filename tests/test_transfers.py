"""Transfers through the mapped staging ring: upload, write_async and read_async against numpy,
their ordering against other submissions, chunked (> 64 MiB) transfers and argument errors."""

import asyncio

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import transfers

SIZES = [0, 1, 255, 1_000_003]


def _random(rng, n, dtype):
    if dtype == "u8":
        return rng.integers(0, 256, n, dtype=np.uint8)
    if dtype == "s32":
        return rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    if dtype == "u32":
        return rng.integers(0, 2**32 - 1, n, dtype=np.uint32)
    return rng.standard_normal(n).astype(wgc.DTYPES[dtype].numpy)


@pytest.mark.parametrize("dtype", ["f32", "s32", "u32", "u8", "f16", "f64"])
@pytest.mark.parametrize("n", SIZES)
def test_upload_read_async_roundtrip(rng, dtype, n):
    a = _random(rng, n, dtype)
    buf = wgc.upload(a)
    assert buf.shape == (n,) and buf.dtype == dtype
    cmd = buf.read_async()
    got = cmd.wait()
    assert cmd.status == "completed"
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_array_equal(got, a)
    buf.free()


@pytest.mark.parametrize("dtype", ["f32", "u8", "s64"])
def test_write_async_then_read(rng, dtype):
    a = _random(rng, (37, 29), dtype) if dtype != "s64" else \
        rng.integers(-2**62, 2**62, (37, 29), dtype=np.int64)
    buf = wgc.empty(a.shape, dtype)
    cmd = buf.write_async(a)
    assert cmd.wait() is buf
    assert cmd.done()
    np.testing.assert_array_equal(buf.to_numpy(), a)
    np.testing.assert_array_equal(buf.read_async().wait(), a)


def test_read_async_sees_exactly_what_was_submitted_before_it(rng):
    first = rng.standard_normal(300_000).astype(np.float32)
    second = first + 1
    buf = wgc.upload(first)
    reading = buf.read_async()
    buf.write_async(second)  # queued after the read's copy: the read must not see it
    doubled = wgc.run_kernel_async("scale", [buf], None, {"scalar": 2.0})
    after = doubled.wait().read_async()
    np.testing.assert_array_equal(reading.wait(), first)
    np.testing.assert_array_equal(after.wait(), second * 2)


def test_transfers_larger_than_one_staging_chunk(rng):
    n = transfers.CHUNK // 4 + 5  # f32 elements: one full chunk and a ragged tail
    a = rng.standard_normal(n).astype(np.float32)
    buf = wgc.empty(n, "f32")
    buf.write_async(a).wait()
    got = buf.read_async().wait()
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(buf.to_numpy()[-7:], a[-7:])
    buf.free()


def test_read_async_can_be_awaited(rng):
    a = rng.standard_normal(1000).astype(np.float32)
    buf = wgc.upload(a)

    async def main():
        return await buf.read_async()

    np.testing.assert_array_equal(asyncio.run(main()), a)


def test_many_outstanding_reads_complete_in_order(rng):
    arrays = [rng.standard_normal(10_000 + i).astype(np.float32) for i in range(12)]
    bufs = [wgc.upload(a) for a in arrays]
    order = []
    cmds = [b.read_async() for b in bufs]
    for i, c in enumerate(cmds):
        c.add_done_callback(lambda _c, i=i: order.append(i))
    for c, a in zip(cmds, arrays, strict=True):
        np.testing.assert_array_equal(c.wait(), a)
    assert order == sorted(order)


def test_transfer_argument_errors():
    buf = wgc.empty(10, "s32")
    with pytest.raises(wgc.ShapeError, match="10"):
        buf.write_async(np.zeros(11, np.int32))
    with pytest.raises(wgc.DtypeError):
        buf.write_async(np.full(10, 0.5))  # not exactly representable as s32
    with pytest.raises(wgc.ArgumentError, match="array"):
        wgc.upload("not an array")
    with pytest.raises(wgc.ArgumentError, match="already a wgc.Buffer"):
        wgc.upload(buf)
    with pytest.raises(wgc.DtypeError):
        wgc.upload(np.zeros(3, np.clongdouble))
    buf.free()
    with pytest.raises(wgc.BufferFreedError):
        buf.read_async()
    with pytest.raises(wgc.BufferFreedError):
        buf.write_async(np.zeros(10, np.int32))
    with pytest.raises(wgc.ArgumentError, match="timeout"):
        wgc.upload(np.zeros(3, np.float32)).read_async().wait(timeout=-1)
