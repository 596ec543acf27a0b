"""Python's and numpy's/CuPy's/torch's protocols on a Buffer, against numpy: format() and
round() of a 0-d buffer as its scalar (and refused, as numpy refuses, for n-d buffers),
CuPy's spellings x.get() and wgc.asnumpy, torch's x.to("cpu"), itemsize, strides (bytes, for
views too) and the array API's mT. And the documented way of giving a cluster a numpy array
that sends it once, where dask.array.from_array sends it inside every graph."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import lacks

import wgcompute as wgc

DTYPES = [np.float32, np.int32, np.uint32, np.uint8]


# -- format() ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_0d_buffer_formats_as_its_scalar(dt):
    for v in (0, 1, 7, 200):
        ref = np.array(v, dt)
        x = wgc.buffer(ref)
        specs = [".2f", ".3e", "g", ">10", "<8.1f", "+.4g", "^12"]
        if np.dtype(dt).kind in "iu":
            specs += ["d", "05d", "x", "#b", ","]
        for spec in specs:
            assert format(x, spec) == format(ref, spec) == format(ref[()], spec), spec


def test_a_sum_formats_in_an_f_string():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 4  # exact sums
    x = wgc.from_numpy(a)
    assert f"{x.sum():.2f}" == f"{a.sum():.2f}" == "16.50"
    assert f"{x.max(axis=None):8.3f}" == f"{a.max():8.3f}"
    assert f"{x.mean():.1%}" == f"{a.mean():.1%}"


def test_an_empty_format_spec_is_str_and_reads_nothing():
    x = wgc.buffer(np.array(2.5, np.float32))
    assert format(x, "") == str(x) == repr(x)  # as print(x): a description, no GPU read
    assert f"{x}" == repr(x)
    y = wgc.buffer([1.0, 2.0])
    assert f"{y}" == format(y, "") == repr(y)


@pytest.mark.parametrize("shape", [(3,), (1,), (2, 2), (0,)])
def test_an_nd_buffer_with_a_format_spec_is_refused_as_numpy_refuses(shape):
    a = np.ones(shape, np.float32)
    with pytest.raises(TypeError):
        format(a, ".2f")
    x = wgc.from_numpy(a)
    with pytest.raises(TypeError, match=r"\.2f.*0-d|0-d.*\.2f"):
        format(x, ".2f")


# -- round() -------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", [2.5, 3.5, -2.5, 0.5, 2.567, -1234.5678, 1e7 + 0.5])
def test_round_of_a_0d_float_buffer_is_numpys_scalar_round(v):
    ref = np.float32(v)
    x = wgc.buffer(np.array(v, np.float32))
    for args in ((), (None,), (0,), (1,), (2,), (-2,)):
        got, want = round(x, *args), round(ref, *args)
        assert type(got) is type(want), args
        assert got == want, args
    assert type(round(x)) is int


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.uint8])
def test_round_of_a_0d_integer_buffer_is_numpys_scalar_round(dt):
    ref = np.array(187, dt)[()]
    x = wgc.buffer(np.array(187, dt))
    for args in ((), (None,), (0,), (1,), (-1,), (-2,)):
        got, want = round(x, *args), round(ref, *args)
        assert type(got) is type(want) and got == want, args


@pytest.mark.parametrize("shape", [(3,), (1,), (2, 2)])
def test_round_of_an_nd_buffer_is_refused_as_numpy_refuses(shape):
    a = np.full(shape, 2.5, np.float32)
    with pytest.raises(TypeError):
        round(a)
    x = wgc.from_numpy(a)
    for args in ((), (1,)):
        with pytest.raises(TypeError, match=r"round.*0-d.*rounding='round'"):
            round(x, *args)


def test_round_refuses_a_bad_ndigits():
    x = wgc.buffer(np.array(2.5, np.float32))
    with pytest.raises(TypeError):
        round(np.float32(2.5), 1.5)
    with pytest.raises(wgc.ArgumentError, match="ndigits"):
        round(x, 1.5)


# -- CuPy's get() and asnumpy ---------------------------------------------------------------------
def test_get_is_to_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = wgc.from_numpy(a)
    got = x.get()
    assert isinstance(got, np.ndarray) and got.dtype == a.dtype
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(x[1:].get(), a[1:])  # a view too
    x.free()
    with pytest.raises(wgc.BufferFreedError):
        x.get()


def test_asnumpy_reads_a_buffer_and_passes_numpy_through():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = wgc.asnumpy(wgc.from_numpy(a))
    assert isinstance(got, np.ndarray) and got.dtype == np.int32
    np.testing.assert_array_equal(got, a)
    assert wgc.asnumpy(a) is a  # as cupy.asnumpy: numpy in, the same array out
    for v in (np.float32(2.5), 3, 2.5, [1, 2, 3], [[1.0], [2.0]], True):
        got = wgc.asnumpy(v)
        want = np.asarray(v)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", [None, "x", b"ab", {1: 2}, object(), [[1], [1, 2]], [None]])
def test_asnumpy_refuses_what_is_not_an_array(bad):
    with pytest.raises(wgc.ArgumentError, match=r"^a: "):
        wgc.asnumpy(bad)


def test_asnumpy_refuses_a_freed_buffer():
    x = wgc.buffer([1.0])
    x.free()
    with pytest.raises(wgc.BufferFreedError, match="^a: "):
        wgc.asnumpy(x)


# -- torch's to("cpu") -------------------------------------------------------------------------
def test_to_cpu_is_a_numpy_array():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    x = wgc.from_numpy(a)
    got = x.to("cpu")
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(x[1].to("cpu"), a[1])  # a view
    assert x.to(x.device) is x
    for bad in ("gpu", "cuda", "CPU", "", None, 0):
        with pytest.raises(wgc.ArgumentError, match=r"^device: .*'cpu'"):
            x.to(bad)


def test_to_another_device_copies():
    why = lacks("several-devices")
    if why is not None:
        pytest.skip(why)
    a = np.arange(5, dtype=np.float32)
    x = wgc.from_numpy(a)
    d = wgc.device(new=True)
    try:
        y = x.to(d)
        assert y.device is d and y is not x
        np.testing.assert_array_equal(y.to("cpu"), a)
    finally:
        d.close()


# -- itemsize, strides, mT ---------------------------------------------------------------------
SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0,), (3, 0), (2, 0, 4), (1, 3), (3, 1)]


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.uint8, np.float16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_itemsize_and_strides_are_numpys(dt, shape):
    a = np.zeros(shape, dt)
    x = wgc.from_numpy(a)
    assert x.itemsize == a.itemsize
    assert x.strides == a.strides


def test_strides_of_views_are_numpys():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = wgc.from_numpy(a)
    for view, ref in ((x[1], a[1]), (x[1:], a[1:]), (x[1, 2], a[1, 2]),
                      (x.reshape(12, 5), a.reshape(12, 5)), (x.ravel(), a.ravel()),
                      (x.view("u8"), a.view(np.uint8)), (x[0, 1:3], a[0, 1:3])):
        assert view.strides == ref.strides
        assert view.itemsize == ref.itemsize


@pytest.mark.parametrize("shape", [(3, 4), (1, 5), (2, 3, 4), (2, 1, 3, 5), (0, 3)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
def test_mT_transposes_the_last_two_axes(shape, dt):
    a = np.arange(int(np.prod(shape)), dtype=dt).reshape(shape)
    x = wgc.from_numpy(a)
    got = x.mT
    assert isinstance(got, wgc.Buffer) and got.shape == a.mT.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got.to_numpy(), a.mT)


@pytest.mark.parametrize("shape", [(), (4,)], ids=str)
def test_mT_of_fewer_than_two_axes_is_refused_as_numpy_refuses(shape):
    with pytest.raises(ValueError):
        _ = np.zeros(shape).mT
    with pytest.raises(wgc.ShapeError, match=r"mT: .*2 axes"):
        _ = wgc.from_numpy(np.zeros(shape, np.float32)).mT


# -- a numpy array given to a cluster once -------------------------------------------------------
def _large_graph_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "large graph" in str(w.message)]


SCATTERED = "x = da.from_delayed(client.scatter(a), a.shape, a.dtype).rechunk((256, 256))"


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_the_documented_way_to_give_a_cluster_an_array_sends_it_once():
    """docs/guide/dask.md: from_array puts the numpy array inside every graph computed from it
    (distributed warns past 10 MB, each compute); scattered, it travels once."""
    pytest.importorskip("distributed", reason="needs wgcompute[dask]")
    da = pytest.importorskip("dask.array", reason="needs wgcompute[dask]")
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "dask.md").read_text(
        encoding="utf-8")
    assert SCATTERED in guide
    a = np.random.default_rng(0).standard_normal((1800, 1700)).astype(np.float32)  # 11.7 MiB
    with wgc.dask.LocalCluster(n_workers=1, threads_per_worker=2) as cluster, \
            cluster.get_client() as client:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            embedded = da.from_array(a, chunks=(256, 256))
            wgc.dask.map_blocks("relu", embedded).compute()
        assert len(_large_graph_warnings(record)) == 1  # why the guide scatters
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            namespace = {"da": da, "client": client, "a": a}
            exec(SCATTERED, namespace)
            x = namespace["x"]
            for _ in range(3):
                got = wgc.dask.map_blocks("relu", x).compute()
            np.testing.assert_array_equal(got, np.maximum(a, 0))
            np.testing.assert_array_equal(wgc.dask.max(x, axis=0).compute(), a.max(axis=0))
        assert _large_graph_warnings(record) == []
