"""wgcompute.dask on a real LocalCluster of 2 worker processes (both on this machine's one
adapter, lavapipe in CI): recipes that travel, map_blocks / map_overlap / reductions against
numpy and scipy, `process --workers/--scheduler` against `process`, and workers killed
mid-run. One cluster serves the whole file (module fixture); the kill tests come last.

Tolerances: f32 filters within 2e-5 of scipy in float64 (as tests/test_image_kernels.py),
and bit for bit equal to the same filter run on the whole array in this process; f32 sums
within 1e-5 of the sum of |x|; everything else exact."""

import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

import wgcompute as wgc

distributed = pytest.importorskip("distributed", reason="needs wgcompute[dask]")
da = pytest.importorskip("dask.array", reason="needs wgcompute[dask]")

from wgcompute.cli import main  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # a cluster of 2 processes
F32_ATOL = 2e-5
SCIPY_MODE = {"clamp": "nearest", "reflect": "reflect", "zero": "constant"}

SQUARE = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
struct Params { n: u32, k: f32 }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 64u + lid;
    if (i < p.n) { out[i] = x[i] * x[i] + p.k; }
}
"""


@pytest.fixture(scope="module")
def client():
    with wgc.dask.LocalCluster(n_workers=2, threads_per_worker=4) as cluster, \
            cluster.get_client() as c:
        c.wait_for_workers(2, timeout=120)
        yield c


def _pids(c):
    return c.run(os.getpid)


def test_import_wgcompute_does_not_import_dask():
    import subprocess
    import sys

    code = "import sys, wgcompute; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('dask', 'distributed')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


# -- recipes -----------------------------------------------------------------------------------
def test_a_buffer_does_not_pickle_and_says_what_to_send():
    b = wgc.from_numpy(np.arange(3, dtype=np.float32))
    with pytest.raises(wgc.ArgumentError, match=r"to_numpy\(\)"):
        pickle.dumps(b)
    p = wgc.pipeline("holds")
    p.add(kernel="relu", inputs=[b])
    with pytest.raises(wgc.ArgumentError, match="does not pickle"):
        pickle.dumps(p.stages[0])  # a stage dict holds buffers: refused the same way


def test_a_pipeline_pickles_as_its_recipe_with_its_constants(rng):
    x = wgc.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
    bias = rng.standard_normal((5, 6)).astype(np.float32)
    p = wgc.pipeline("bias")
    p.add(kernel="relu", inputs=[x])
    p.add(kernel="elementwise_add", inputs=[p.stages[0]["output"], wgc.from_numpy(bias)])
    data = pickle.dumps(p)
    assert len(data) < 4000  # a recipe: stages, placeholders and the 120-byte constant
    q = pickle.loads(data)
    assert q is not p and pickle.loads(data) is q  # built once, then the cached one
    batch = rng.standard_normal((5, 6)).astype(np.float32)
    got = next(iter(wgc.stream_map(q, [batch])))
    np.testing.assert_array_equal(got, np.maximum(batch, 0) + bias)
    with pytest.raises(wgc.PipelineError, match="shared"):
        q.set_params(0, slope=0.5)
    r = p.recipe()
    assert r == pickle.loads(pickle.dumps(r)) and r.digest() == pickle.loads(
        pickle.dumps(r)).digest()
    assert [s.data is not None for s in r.slots] == [False, False, True, False]


def test_a_chain_recipe_follows_the_input_shape_and_checks_stages():
    r = wgc.dask.work([("scale", {"scalar": 2.0}), "relu"], like=((8, 8), "f32")).recipe
    assert r.output_spec((3, 7), "f32") == ((3, 7), "f32")
    with pytest.raises(wgc.WgComputeError, match="resize"):
        wgc.dask.work([("resize", {"size": (0, 3)})], like=((8, 8, 4), "u8"))
    with pytest.raises(wgc.ArgumentError, match="work"):
        wgc.dask.work(42)


def test_workers_are_pinned_and_have_a_gpu_resource(client):
    info = client.scheduler_info()["workers"]
    assert len(info) == 2
    assert all(w["resources"] == {"GPU": 1} for w in info.values())
    pinned = client.run(lambda: (wgc.dask.pinned_adapter(), wgc.device_info()["name"],
                                 wgc.device_info()["backend"]))
    adapters = wgc.devices()
    for index, name, backend in pinned.values():
        assert index in wgc.dask.usable_adapters()
        assert (adapters[index].name, adapters[index].backend) == (name, backend)


def test_custom_kernel_travels_as_its_recipe(client, rng):
    k = wgc.register_kernel("dask_square_plus", SQUARE,
                            bindings=[("x", "read"), ("out", "read_write"), ("p", "uniform")],
                            params={"n": "u32", "k": "f32"}, workgroup_size=64, replace=True)
    a = rng.standard_normal((37, 41)).astype(np.float32)

    def registered_there():
        return "dask_square_plus" in wgc.kernels()

    assert not any(client.run(registered_there).values())
    got = wgc.dask.map_blocks(k, da.from_array(a, chunks=(10, 16)), {"k": 0.5}).compute()
    # the multiply and add rounded apart or fused (NVIDIA's compiler fuses): one of the two
    fused = (a.astype(np.float64) ** 2 + 0.5).astype(np.float32)
    assert ((got == a * a + np.float32(0.5)) | (got == fused)).all()
    assert any(client.run(registered_there).values())


# -- map_blocks ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.float64])
@pytest.mark.computes("dtype")
def test_map_blocks_scale_and_relu_exact_on_ragged_chunks(client, rng, dtype):
    a = (rng.standard_normal((101, 67)) * 1000).astype(dtype)
    x = da.from_array(a, chunks=(32, 25))
    y = wgc.dask.map_blocks("scale", x, {"scalar": 3})
    assert y.chunks == x.chunks and y.dtype == a.dtype and y._meta.dtype == a.dtype
    np.testing.assert_array_equal(y.compute(), a * dtype(3))
    if np.dtype(dtype).kind == "f":
        np.testing.assert_array_equal(wgc.dask.map_blocks("relu", x).compute(),
                                      np.maximum(a, 0))


def test_map_blocks_pipeline_and_chain_on_other_chunk_shapes(client, rng):
    a = rng.standard_normal((70, 45)).astype(np.float32)
    x = da.from_array(a, chunks=(32, 20))
    inp = wgc.empty((32, 20), "f32")
    p = wgc.pipeline("scale-relu")
    p.add(kernel="scale", inputs=[inp], params={"scalar": 2.0})
    p.add(kernel="relu", inputs=[p.stages[0]["output"]])
    want = np.maximum(a * np.float32(2), 0)
    np.testing.assert_array_equal(wgc.dask.map_blocks(p, x).compute(), want)
    chain = [("scale", {"scalar": 2.0}), ("relu", {})]
    np.testing.assert_array_equal(wgc.dask.map_blocks(chain, x).compute(), want)


def test_map_blocks_callable_work(client, rng):
    def negate_into_f32(inp, out):  # queues GPU work inp -> out, as stream_map takes it
        return wgc.run_kernel_async("scale", [inp], out, {"scalar": -1.0})

    a = rng.standard_normal((50, 30)).astype(np.float32)
    y = wgc.dask.map_blocks(negate_into_f32, da.from_array(a, chunks=(16, 16)))
    np.testing.assert_array_equal(y.compute(), -a)


def test_a_callable_may_give_results_of_another_shape():
    """out_shape: a classifier's (N, classes) for every batch (wgcompute infer's work)."""
    def probs(inp, out):
        return None

    w = wgc.dask.work(probs, {"out_shape": [4, 10], "out_dtype": "f32"})
    assert w.output_spec((4, 96, 96, 4), "u8") == ((4, 10), "f32")
    assert w.stream_args((4, 96, 96, 4), "u8")["out_shape"] == (4, 10)
    with pytest.raises(wgc.ShapeError, match="out_shape"):
        wgc.dask.work(probs, {"out_shape": "10"})
    with pytest.raises(wgc.ArgumentError, match="out_dtype and out_shape"):
        wgc.dask.work(probs, {"shape": (4, 10)})


def test_map_blocks_resize_changes_chunks():
    a = np.zeros((40, 60, 4), np.uint8)
    y = wgc.dask.map_blocks("resize", da.from_array(a, chunks=(20, 30, 4)),
                            {"size": (10, 15)})
    assert y.chunks == ((10, 10), (15, 15), (4,)) and y.dtype == np.uint8


def test_map_blocks_checks_before_running(rng):
    a = rng.standard_normal((20, 20)).astype(np.float32)
    with pytest.raises(wgc.ArgumentError, match="dask.array"):
        wgc.dask.map_blocks("relu", a)
    with pytest.raises(wgc.DtypeError, match="bool"):
        wgc.dask.map_blocks("relu", da.from_array(a > 0))
    with pytest.raises(wgc.ArgumentError, match="one"):
        wgc.dask.map_blocks("elementwise_add", da.from_array(a))
    with pytest.raises(wgc.ShapeError, match="number of dimensions"):  # axis 1 split
        wgc.dask.map_blocks("sum", da.from_array(a, chunks=(10, 10)), {"axis": -1})
    np.testing.assert_allclose(  # axis 1 whole: rows reduced block by block
        wgc.dask.map_blocks("sum", da.from_array(a, chunks=(10, 20)),
                            {"axis": -1}).compute(scheduler="sync"),
        a.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
    x = wgc.empty((10, 10), "f32")
    p = wgc.pipeline("fixed")
    p.add(kernel="elementwise_add", inputs=[x, wgc.from_numpy(np.ones((10, 10), np.float32))])
    with pytest.raises(wgc.ShapeError, match="stage 0"):
        wgc.dask.map_blocks(p, da.from_array(a, chunks=(10, 7)))
    np.testing.assert_array_equal(  # a chunk of the pipeline's own shape is fine
        wgc.dask.map_blocks(p, da.from_array(a, chunks=(10, 10))).compute(scheduler="sync"),
        a + 1)


# -- map_overlap -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["clamp", "reflect", "zero"])
def test_map_overlap_gaussian_matches_scipy_and_the_whole_array(client, rng, mode):
    img = rng.random((150, 97, 3), dtype=np.float32)
    params = {"radius": 4, "sigma": 1.5, "mode": mode}
    got = wgc.dask.map_overlap("gaussian_blur", da.from_array(img, chunks=(40, 30, 3)),
                               params).compute()
    whole = wgc.image.apply("gaussian_blur", wgc.from_numpy(img), **params).to_numpy()
    np.testing.assert_array_equal(got, whole)  # chunk borders leave no trace at all
    ref = np.stack([ndimage.gaussian_filter(img[..., c].astype(np.float64), 1.5, radius=4,
                                            mode=SCIPY_MODE[mode]) for c in range(3)], -1)
    np.testing.assert_allclose(got, ref, atol=F32_ATOL, rtol=0)


def test_map_overlap_rgba_sobel_and_a_pipeline_with_weights(client, rng):
    rgba = rng.integers(0, 256, (90, 70, 4), dtype=np.uint8)
    x = da.from_array(rgba, chunks=(25, 25, 2))  # the channel axis is joined for images
    got = wgc.dask.map_overlap("sobel", x, {"scale": 0.25}).compute()
    whole = wgc.image.apply("sobel", wgc.from_numpy(rgba), scale=0.25).to_numpy()
    np.testing.assert_array_equal(got, whole)
    weights = rng.random((5, 5), dtype=np.float32)
    img = wgc.empty((25, 25, 4), "u8")
    p = wgc.pipeline("conv")
    p.add(kernel="convolve2d", inputs=[img, wgc.from_numpy(weights / weights.sum())])
    p.add(kernel="invert", inputs=[p.stages[0]["output"]])
    assert wgc.dask.work(p).halo() == {0: 2, 1: 2}
    got = wgc.dask.map_overlap(p, x).compute()
    k = wgc.from_numpy(weights / weights.sum())
    whole = wgc.image.apply("invert", wgc.image.apply("convolve2d", wgc.from_numpy(rgba), k))
    np.testing.assert_array_equal(got, whole.to_numpy())


def test_map_overlap_needs_depth_when_it_cannot_tell(client, rng):
    k = wgc.register_kernel("dask_square_plus2", SQUARE,
                            bindings=[("x", "read"), ("out", "read_write"), ("p", "uniform")],
                            params={"n": "u32", "k": "f32"}, workgroup_size=64, replace=True)
    a = rng.standard_normal((30, 30)).astype(np.float32)
    with pytest.raises(wgc.ArgumentError, match="depth"):
        wgc.dask.map_overlap(k, da.from_array(a, chunks=10), {"k": 0.0})
    got = wgc.dask.map_overlap(k, da.from_array(a, chunks=10), {"k": 0.0}, depth=1).compute()
    np.testing.assert_array_equal(got, a * a)


# -- reductions ---------------------------------------------------------------------------------
AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2)]


_WIDE = pytest.mark.needs("shader-int64")  # sums as numpy's: in 64 bits


@pytest.mark.parametrize("dtype", [pytest.param(np.int32, marks=_WIDE), np.uint8,
                                   pytest.param(np.uint32, marks=_WIDE),
                                   pytest.param(np.int64, marks=_WIDE)])
def test_integer_reductions_exact(client, rng, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (33, 20, 17), dtype=dtype, endpoint=True)
    x = da.from_array(a, chunks=(10, 8, 17))
    for axis in AXES:
        s = wgc.dask.sum(x, axis=axis).compute()
        assert s.dtype == a.sum(axis=axis).dtype
        np.testing.assert_array_equal(s, a.sum(axis=axis))
        np.testing.assert_array_equal(wgc.dask.max(x, axis=axis).compute(), a.max(axis=axis))
        np.testing.assert_array_equal(wgc.dask.min(x, axis=axis).compute(), a.min(axis=axis))
        m = wgc.dask.mean(x, axis=axis).compute()
        assert m.dtype == np.float64
        np.testing.assert_allclose(m, a.mean(axis=axis), rtol=1e-12)


def test_float_reductions(client, rng):
    a = rng.standard_normal((64, 50, 9)).astype(np.float32)
    x = da.from_array(a, chunks=(20, 16, 9))
    for axis in AXES:
        scale = np.abs(a).sum(axis=axis)
        s = wgc.dask.sum(x, axis=axis).compute()
        assert s.dtype == np.float32
        assert np.all(np.abs(s - a.sum(axis=axis, dtype=np.float64)) <= 1e-5 * scale + 1e-6)
        np.testing.assert_array_equal(wgc.dask.max(x, axis=axis).compute(), a.max(axis=axis))
        m = wgc.dask.mean(x, axis=axis).compute()
        assert m.dtype == np.float32
        n = a.size // np.size(scale)
        assert np.all(np.abs(m - a.mean(axis=axis, dtype=np.float64)) <= 1e-5 * scale / n
                      + 1e-7)


# -- files ---------------------------------------------------------------------------------------
PIPE = "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | " \
       "convolve2d(weights=[[0, 1, 0], [1, -4, 1], [0, 1, 0]]) | grayscale"


def _images(folder, n, size=(90, 70)):
    folder.mkdir()
    rng = np.random.default_rng(7)
    for i in range(n):
        h, w = size[0] + 9 * (i % 4), size[1] + 5 * (i % 3)
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
            folder / f"im{i:02d}.png")
    return folder


def _same_files(a, b):
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


def test_process_workers_matches_process_byte_for_byte(tmp_path, capsys):
    src = _images(tmp_path / "in", 8)
    (src / "broken.png").write_bytes(b"not an image")
    assert main(["process", str(src), "-o", str(tmp_path / "one"), "--pipeline", PIPE]) == 1
    assert main(["process", str(src), "-o", str(tmp_path / "two"), "--pipeline", PIPE,
                 "--workers", "2"]) == 1
    out = capsys.readouterr()
    assert out.out.count("processed 8 of 9") == 2
    assert out.err.count(f"  {src / 'broken.png'}: ArgumentError: path: cannot decode") == 2
    _same_files(tmp_path / "one", tmp_path / "two")


def test_process_arguments_are_checked(tmp_path, capsys):
    src = _images(tmp_path / "in", 1)
    for extra in (["--workers", "0"], ["--workers", "2", "--scheduler", "tcp://x:1"]):
        assert main(["process", str(src), "-o", str(tmp_path / "o"), "--pipeline", "invert",
                     *extra]) == 2
    assert "--workers" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- data made or read on the workers -----------------------------------------------------------
def field(offset, shape):
    """A block of a smooth 3-d field, from its place alone (the same wherever it is made)."""
    i, j, c = np.indices(shape, dtype=np.float32)
    i += offset[0]
    j += offset[1]
    c += offset[2]
    return (np.sin(i * 0.05) * np.cos(j * 0.03) + c * 0.25).astype(np.float32)


def test_from_function_makes_the_chunks_on_the_workers(client):
    shape, chunks = (480, 360, 4), (120, 90, 4)
    x = wgc.dask.from_function(field, shape, chunks, "f32")
    assert x.chunks == da.core.normalize_chunks(chunks, shape)
    graph = pickle.dumps(dict(x.__dask_graph__()))
    assert len(graph) < 64_000 < x.nbytes  # the recipe travels, not the data
    params = {"sigma": 1.5, "mode": "reflect"}
    whole = field((0, 0, 0), shape)
    np.testing.assert_array_equal(x.compute(), whole)
    got = wgc.dask.map_overlap("gaussian_blur", x, params).compute()
    np.testing.assert_array_equal(
        got, wgc.image.apply("gaussian_blur", wgc.from_numpy(whole), **params).to_numpy())
    assert all(s["chunks"] for s in client.run(wgc.dask.stats).values())  # both computed


def test_from_function_and_from_files_check_what_they_are_given(client, tmp_path):
    with pytest.raises(wgc.ArgumentError, match="fn: expected a callable"):
        wgc.dask.from_function(None, (4, 4), 2, "f32")
    with pytest.raises(wgc.ArgumentError, match="chunks"):
        wgc.dask.from_function(field, (4, 4), "nonsense", "f32")
    with pytest.raises(wgc.ShapeError, match=r"fn at offset \(\d, \d, 0\): gave shape \(3,\); "
                                              r"the block is \(2, 2, 1\)"):
        wgc.dask.from_function(lambda o, s: np.zeros(3, np.float32), (4, 4, 1), 2,
                               "f32").compute()
    with pytest.raises(wgc.ArgumentError, match="paths: expected at least one"):
        wgc.dask.from_files([], np.load, (2,), "f32")
    np.save(tmp_path / "a.npy", np.zeros(3, np.float64))
    with pytest.raises(wgc.DtypeError, match="gave dtype float64; the array is float32"):
        wgc.dask.from_files([tmp_path / "a.npy"], np.load, (3,), "f32").compute()


def test_from_files_reads_each_chunk_on_its_worker(client, tmp_path, rng):
    tiles = [rng.standard_normal((32, 48)).astype(np.float32) for _ in range(7)]
    paths = []
    for i, t in enumerate(tiles):
        paths.append(tmp_path / f"t{i}.npy")
        np.save(paths[-1], t)
    x = wgc.dask.from_files(paths, np.load, (32, 48), "f32", per_chunk=3)
    assert x.shape == (7, 32, 48) and x.chunks[0] == (3, 3, 1)
    np.testing.assert_array_equal(wgc.dask.map_blocks("scale", x, {"scalar": 2.0}).compute(),
                                  np.stack(tiles) * 2)


def test_connect_to_a_scheduler_sets_its_workers_up(rng):
    """A cluster wgcompute did not start (distributed's own, reached by its tcp:// address, as
    a cluster of several machines is): connect registers the setup, and each worker is pinned
    to an adapter, has the GPU resource and computes."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=":0") as plain:
        assert plain.scheduler_address.startswith("tcp://")
        with wgc.dask.connect(scheduler=plain.scheduler_address) as c:
            c.wait_for_workers(2, timeout=120)
            pinned = c.run(wgc.dask.pinned_adapter)
            assert len(pinned) == 2 and all(i in wgc.dask.usable_adapters()
                                            for i in pinned.values())
            info = c.scheduler_info()["workers"]
            assert all(w["resources"].get("GPU") == 1 for w in info.values())
            x = wgc.dask.from_function(field, (64, 64, 4), (32, 32, 4), "f32")
            np.testing.assert_array_equal(wgc.dask.map_blocks("relu", x).compute(),
                                          np.maximum(field((0, 0, 0), (64, 64, 4)), 0))


def test_example_runs_on_the_shared_cluster(client):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "dask_cluster.py"),
                        "--size", "320", "--scheduler", client.scheduler.address],
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR",
                                                                           "/tmp")))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 worker(s), 16 chunks of 80x80x4" in r.stdout
    assert "identical to the whole image" in r.stdout


# -- faults (last: they kill workers of the shared cluster) -----------------------------------
def _kill_busy_worker(c):
    """SIGKILL a worker that is running tasks now; returns its pid."""
    pids = _pids(c)
    for _ in range(400):
        busy = [w for w, tasks in c.processing().items() if tasks and w in pids]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            return pids[busy[0]]
        time.sleep(0.01)
    raise AssertionError("no worker was busy")


def test_a_worker_killed_mid_map_overlap_changes_nothing(client, rng):
    img = rng.random((480, 360, 4), dtype=np.float32)
    params = {"radius": 6, "sigma": 2.0, "mode": "reflect"}
    whole = wgc.image.apply("gaussian_blur", wgc.from_numpy(img), **params).to_numpy()
    y = wgc.dask.map_overlap("gaussian_blur", da.from_array(img, chunks=(40, 60, 4)), params)
    fut = client.compute(y)
    while not any(s["chunks"] for s in client.run(wgc.dask.stats).values()):
        time.sleep(0.01)  # the job is under way
    pid = _kill_busy_worker(client)
    assert not fut.done()
    np.testing.assert_array_equal(fut.result(timeout=240), whole)
    client.wait_for_workers(2, timeout=120)  # the nanny started a new one
    assert pid not in _pids(client).values()


def test_a_worker_killed_mid_job_on_data_made_on_the_workers_loses_nothing(client):
    """The chunks a killed worker made (and held) are made again from their recipe."""
    shape = (640, 480, 4)
    params = {"radius": 4, "sigma": 1.5, "mode": "reflect"}
    whole = wgc.image.apply("gaussian_blur", wgc.from_numpy(field((0, 0, 0), shape)),
                            **params).to_numpy()
    for s in client.run(wgc.dask.close_lanes).values():
        assert s >= 0
    before = sum(s["chunks"] for s in client.run(wgc.dask.stats).values())
    y = wgc.dask.map_overlap("gaussian_blur",
                             wgc.dask.from_function(field, shape, (40, 60, 4), "f32"), params)
    fut = client.compute(y)
    while sum(s["chunks"] for s in client.run(wgc.dask.stats).values()) == before:
        time.sleep(0.01)  # the job is under way
    pid = _kill_busy_worker(client)
    assert not fut.done()
    np.testing.assert_array_equal(fut.result(timeout=240), whole)
    client.wait_for_workers(2, timeout=120)
    assert pid not in _pids(client).values()


def test_a_worker_killed_mid_process_leaves_complete_exact_outputs(client, tmp_path):
    src = _images(tmp_path / "in", 24, size=(160, 120))
    assert main(["process", str(src), "-o", str(tmp_path / "one"), "--pipeline", PIPE]) == 0
    addr = client.scheduler.address
    rc = []
    run = threading.Thread(target=lambda: rc.append(main(
        ["process", str(src), "-o", str(tmp_path / "two"), "--pipeline", PIPE,
         "--scheduler", addr, "--no-progress"])))
    run.start()
    while not (tmp_path / "two").exists() or not any(
            n.startswith("im") for n in os.listdir(tmp_path / "two")):
        time.sleep(0.01)
    _kill_busy_worker(client)
    assert len(os.listdir(tmp_path / "two")) < 24
    run.join(240)
    assert rc == [0]
    _same_files(tmp_path / "one", tmp_path / "two")  # nothing half-written, nothing missing
    client.wait_for_workers(2, timeout=120)


def test_a_restarting_worker_keeps_its_place_for_lost_worker_timeout():
    """A killed worker's nanny starts a new process, which imports wgcompute and opens its
    device again: the cluster waits lost_worker_timeout for it (120 s by default; with
    distributed's 15 s a loaded machine lost the worker for good). A timeout shorter than a
    restart gives the place up, which shows the setting is the one in force."""
    for timeout, kept in ((120.0, True), (0.2, False)):
        with wgc.dask.LocalCluster(n_workers=1, threads_per_worker=1,
                                   lost_worker_timeout=timeout) as cluster, \
                cluster.get_client() as c:
            c.wait_for_workers(1, timeout=120)
            (pid,) = _pids(c).values()
            os.kill(pid, signal.SIGKILL)
            if kept:
                deadline = time.monotonic() + 120
                while {w.get("pid") for w in c.scheduler_info()["workers"].values()} in (
                        set(), {pid}):
                    assert time.monotonic() < deadline, "the worker did not come back"
                    time.sleep(0.2)
                assert len(cluster.workers) == 1
            else:
                deadline = time.monotonic() + 60
                while cluster.workers:
                    assert time.monotonic() < deadline, "the cluster kept the lost worker"
                    time.sleep(0.1)
    with pytest.raises(wgc.ArgumentError, match="lost_worker_timeout"):
        wgc.dask.LocalCluster(lost_worker_timeout=-1)


def test_an_onnx_model_runs_on_every_chunk_as_locally(client, tmp_path):
    """A wgc.ml.Model is work too: it travels as its file (or bytes), each worker loads it
    once, and every chunk's logits equal the model run here (onnxruntime is the referee of
    the model itself elsewhere)."""
    pytest.importorskip("onnx", reason="wgc.ml needs onnx (pip install 'wgcompute[ml]')")
    import dask.array as da

    from wgcompute.ml.builders import mobilenet_v2

    path = tmp_path / "mnv2.onnx"
    path.write_bytes(mobilenet_v2(seed=5, size=32, num_classes=10).SerializeToString())
    model = wgc.ml.load_onnx(str(path))
    x = np.random.default_rng(2).standard_normal((6, 3, 32, 32)).astype(np.float32)
    want = model(x)
    for send in (False, True):  # by path (same machine), then carrying the bytes
        w = wgc.dask.work(model, {"send_bytes": send})
        assert (w.recipe.data is not None) == send
        got = wgc.dask.map_blocks(w, da.from_array(x, chunks=(2, 3, 32, 32)))
        assert got.shape == (6, 10) and got.chunks == ((2, 2, 2), (10,))
        np.testing.assert_allclose(got.compute(), want, rtol=1e-5, atol=1e-5 * abs(want).max())
    from_bytes = wgc.ml.load_onnx(path.read_bytes())
    assert wgc.dask.work(from_bytes).recipe.data == path.read_bytes()
