"""Buffers: creation from lists, nested lists, numpy and bytes; exact round trips for every
dtype (u8 at lengths that are not a multiple of 4, f16); the seed's facade; free and leaks."""

import gc

import numpy as np
import pytest

import wgcompute as wgc

ALL = list(wgc.DTYPES)
LENGTHS = [0, 1, 2, 3, 4, 5, 7, 255, 257, 1001]


def sample(dt, n, rng):
    npd = wgc.DTYPES[dt].numpy
    if npd.kind == "f":
        return rng.standard_normal(n).astype(npd)
    if npd.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(npd)
    if npd.kind == "b":
        return rng.random(n) < 0.5
    info = np.iinfo(npd)
    return rng.integers(info.min, info.max, n, dtype=npd, endpoint=True)


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("n", LENGTHS)
def test_numpy_round_trip_is_exact(dt, n, rng):
    a = sample(dt, n, rng)
    buf = wgc.from_numpy(a)
    assert buf.dtype == dt and buf.shape == (n,) and buf.size == n
    assert buf.nbytes == n * a.itemsize
    got = wgc.to_numpy(buf)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, a)
    assert wgc.read(buf) == a.tobytes()
    buf.free()


@pytest.mark.parametrize("dt", ALL)
def test_multidimensional_round_trip(dt, rng):
    a = sample(dt, 2 * 3 * 5, rng).reshape(2, 3, 5)
    buf = wgc.from_numpy(a)
    assert buf.shape == (2, 3, 5) and buf.ndim == 3 and len(buf) == 2
    np.testing.assert_array_equal(buf.to_numpy(), a)
    assert buf.tolist() == a.tolist()
    assert wgc.read_list(buf) == a.tolist()


def test_non_contiguous_and_big_endian_numpy_input():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    np.testing.assert_array_equal(wgc.from_numpy(a).to_numpy(), a)
    be = np.arange(6, dtype=">i4")
    buf = wgc.from_numpy(be)
    assert buf.dtype == "s32"
    assert buf.tolist() == list(range(6))


def test_buffer_from_flat_list_defaults_to_f32():
    buf = wgc.buffer([1, 2.5, -3])
    assert buf.dtype == "f32" and buf.shape == (3,)
    assert buf.tolist() == [1.0, 2.5, -3.0]


def test_buffer_from_nested_lists():
    buf = wgc.buffer([[1, 2, 3], [4, 5, 6]], dtype="s32")
    assert buf.shape == (2, 3) and buf.dtype == "s32"
    assert buf.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_buffer_with_explicit_shape_reshapes_flat_data():
    buf = wgc.buffer([1, 2, 3, 4, 5, 6], shape=(3, 2), dtype="u32")
    assert buf.shape == (3, 2)
    assert buf.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert wgc.buffer([1.0, 2.0, 3.0], shape=3).shape == (3,)


@pytest.mark.parametrize("dt", ALL)
def test_buffer_from_list_every_dtype(dt):
    if dt == "bool":
        assert wgc.buffer([0, 1, True, False], dtype=dt).tolist() == [False, True, True, False]
        return
    if dt in ("c64", "c128"):
        values = [0, 1, 2.5 - 1j, -(2.0**100) * 1j]
        assert wgc.buffer(values, dtype=dt).tolist() == values
        return
    info = np.finfo if dt.startswith("f") else np.iinfo
    lim = info(wgc.DTYPES[dt].numpy)
    values = [0, 1, int(lim.max) if dt[0] != "f" else 2.5, int(lim.min) if dt[0] != "f" else -2.5]
    buf = wgc.buffer(values, dtype=dt)
    assert buf.tolist() == values


def test_buffer_big_ints_exact():
    big = [2**63 - 1, -(2**63), 2**53 + 1]
    assert wgc.buffer(big, dtype="s64").tolist() == big
    assert wgc.buffer([2**32 - 1], dtype="u32").tolist() == [2**32 - 1]


def test_buffer_numpy_dtype_names_accepted():
    assert wgc.buffer([1, 2], dtype=np.int32).dtype == "s32"
    assert wgc.buffer([1, 2], dtype="float64").dtype == "f64"
    assert wgc.buffer([1, 2], dtype=np.dtype("uint8")).dtype == "u8"


def test_buffer_from_numpy_with_other_dtype_converts_exactly():
    a = np.array([1, 2, 3], dtype=np.int64)
    buf = wgc.buffer(a, dtype="f32")
    assert buf.dtype == "f32" and buf.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("dt", ALL)
def test_buffer_from_bytes(dt, rng):
    a = sample(dt, 11, rng)
    for data in (a.tobytes(), bytearray(a.tobytes()), memoryview(a.tobytes())):
        buf = wgc.buffer(data, dtype=dt)
        assert buf.shape == (11,)
        np.testing.assert_array_equal(buf.to_numpy(), a)


@pytest.mark.parametrize("dt", ALL)
def test_buffer_from_binary(dt, rng):
    a = sample(dt, 12, rng).reshape(3, 4)
    buf = wgc.buffer_from_binary(a.tobytes(), (3, 4), dt)
    assert buf.shape == (3, 4) and buf.dtype == dt
    np.testing.assert_array_equal(buf.to_numpy(), a)
    assert wgc.read_binary(buf) == a.tobytes()


def test_buffer_from_binary_length_must_match():
    with pytest.raises(wgc.ShapeError, match=r"12 bytes given.*\(2, 2\).*needs 16"):
        wgc.buffer_from_binary(b"\0" * 12, (2, 2), "f32")
    with pytest.raises(wgc.ShapeError):
        wgc.buffer_from_binary(b"\0" * 20, (2, 2), "f32")
    with pytest.raises(wgc.ArgumentError, match="data"):
        wgc.buffer_from_binary([0, 0], (2,), "f32")


@pytest.mark.parametrize("dt", ALL)
def test_buffer_zeros_really_zero(dt, rng):
    shape = (257, 3)
    n = 257 * 3
    ones = np.full(n, -1 if dt[0] in "fs" else 255, dtype=wgc.DTYPES[dt].numpy)
    dirty = wgc.from_numpy(ones)  # memory full of non-zero bytes, then released
    assert dirty.to_numpy()[0] != 0
    dirty.free()
    z = wgc.buffer_zeros(shape, dt)
    assert z.shape == shape and z.dtype == dt
    got = z.to_numpy()
    assert got.shape == shape
    assert not got.any()
    assert wgc.read(z) == bytes(n * wgc.DTYPES[dt].itemsize)


def test_empty_and_zero_sized():
    e = wgc.empty((0,), "f32")
    assert e.size == 0 and e.nbytes == 0 and e.read() == b"" and e.tolist() == []
    s = wgc.buffer_zeros((), "s32")  # a 0-d buffer holds one element
    assert s.size == 1 and s.tolist() == 0
    with pytest.raises(TypeError):
        len(s)


def test_write_replaces_contents():
    buf = wgc.buffer_zeros((4,), "s32")
    buf.write([1, -2, 3, -4])
    assert buf.tolist() == [1, -2, 3, -4]
    buf.write(np.array([5, 6, 7, 8], np.int64))
    assert buf.tolist() == [5, 6, 7, 8]
    with pytest.raises(wgc.ShapeError):
        buf.write([1, 2, 3])
    with pytest.raises(wgc.DtypeError):
        buf.write([1.5, 2, 3, 4])


def test_facade_metadata():
    buf = wgc.buffer([[1, 2, 3], [4, 5, 6]], dtype="f64")
    assert wgc.shape(buf) == (2, 3)
    assert wgc.dtype(buf) == "f64"
    assert wgc.size(buf) == 48  # the seed's meaning: bytes
    assert buf.size == 6  # the object's meaning: elements
    assert buf.nbytes == 48
    u8 = wgc.buffer([1, 2, 3], dtype="u8")
    assert wgc.size(u8) == 3 and u8.nbytes == 3


def test_repr_is_useful_and_does_not_read():
    buf = wgc.buffer([1.0, 2.0], label="weights")
    r = repr(buf)
    assert "weights" in r and "f32" in r and "(2,)" in r and "8 B" in r
    buf.free()
    assert "freed" in repr(buf)


def test_array_protocol():
    buf = wgc.buffer([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(buf)
    assert a.dtype == np.float32 and a.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.asarray(buf, dtype=np.float64).dtype == np.float64
    assert float(np.sum(np.asarray(buf))) == 10.0
    for f in (np.sum, np.mean, np.reshape, np.clip, np.concatenate):  # all refuse alike,
        with pytest.raises(wgc.DtypeError, match="stay on the GPU"):  # never a silent read
            f([buf, buf]) if f is np.concatenate else (
                f(buf, (4,)) if f is np.reshape else f(buf, 0, 1) if f is np.clip else f(buf))
    with pytest.raises(ValueError, match="copy"):  # numpy 2: copy=False cannot be honoured
        np.asarray(buf, copy=False)


def test_free_then_use_raises_buffer_freed():
    buf = wgc.buffer([1.0, 2.0])
    wgc.free(buf)
    assert buf.freed
    wgc.free(buf)  # freeing twice is harmless
    for fn in (buf.read, buf.to_numpy, buf.tolist, lambda: wgc.read(buf),
               lambda: wgc.read_list(buf), lambda: wgc.read_binary(buf),
               lambda: wgc.shape(buf), lambda: wgc.dtype(buf), lambda: wgc.size(buf),
               lambda: wgc.to_numpy(buf), lambda: buf.write([1.0, 2.0]),
               lambda: buf.gpu_buffer, lambda: wgc.add(buf, buf),
               lambda: wgc.relu(buf), lambda: np.asarray(buf)):
        with pytest.raises(wgc.BufferFreedError, match="freed"):
            fn()
    assert buf.shape == (2,)  # metadata stays readable for messages


def test_context_manager_frees():
    gc.collect()  # earlier tests' garbage must not leave during this one
    before = wgc.live_buffers()
    with wgc.buffer([1.0]) as buf:
        assert wgc.live_buffers() == before + 1
        assert buf.tolist() == [1.0]
    assert buf.freed
    assert wgc.live_buffers() == before


def test_free_many_and_live_buffers():
    gc.collect()
    gc.collect()  # earlier tests' garbage must not leave during this one
    before = wgc.live_buffers()
    bufs = [wgc.buffer_zeros((8,), "f32") for _ in range(5)]
    assert wgc.live_buffers() == before + 5
    wgc.free_many(bufs)
    assert all(b.freed for b in bufs)
    assert wgc.live_buffers() == before
    with pytest.raises(wgc.ArgumentError, match=r"bufs\[1\]"):
        wgc.free_many([wgc.buffer([1.0]), "not a buffer"])


def test_dropped_buffer_is_released():
    gc.collect()
    gc.collect()  # earlier tests' garbage must not leave during this one
    before = wgc.live_buffers()
    wgc.buffer_zeros((16,), "f32")
    gc.collect()
    assert wgc.live_buffers() == before


def test_free_while_in_flight_keeps_result_valid():
    """Freeing an input right after an asynchronous submit must not break the command."""
    n = 100_000
    a = wgc.from_numpy(np.arange(n, dtype=np.float32))
    b = wgc.from_numpy(np.ones(n, np.float32))
    out = wgc.empty((n,), "f32")
    cmd = wgc.run_kernel_async("elementwise_add", [a, b], out)
    a.free()
    b.free()
    cmd.wait()
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n, dtype=np.float32) + 1)


def test_large_round_trip_through_chunked_staging(rng):
    """More than one staging chunk (64 MiB) each way."""
    a = rng.integers(0, 2**32, 20_000_000, dtype=np.uint32)
    buf = wgc.from_numpy(a)
    np.testing.assert_array_equal(buf.to_numpy(), a)
    buf.free()


def test_typed_memoryview_carries_values_not_bytes():
    """A memoryview of float64 is two numbers, not sixteen bytes to reinterpret as f32."""
    buf = wgc.buffer(memoryview(np.float64([1.0, 2.0])))
    assert buf.dtype == "f64" and buf.tolist() == [1.0, 2.0]
    assert wgc.buffer(memoryview(np.int32([1, 2])), dtype="f32").tolist() == [1.0, 2.0]
    assert wgc.buffer(memoryview(np.float64([[1.0, 2.0]]))).shape == (1, 2)
    raw = memoryview(np.float32([1.5]).tobytes())  # format "B": raw bytes, as documented
    assert wgc.buffer(raw, dtype="f32").tolist() == [1.5]
    with pytest.raises(wgc.DtypeError, match="not whole"):
        wgc.buffer(memoryview(np.float64([0.5])), dtype="s32")


def test_buffer_from_a_buffer_keeps_its_dtype():
    src = wgc.buffer([1, 2], dtype="s32")
    copy = wgc.buffer(src)
    assert copy.dtype == "s32" and copy.tolist() == [1, 2] and copy is not src
    with pytest.raises(wgc.DtypeError, match="buffer is s32, expected f32"):
        wgc.buffer(src, dtype="f32")
