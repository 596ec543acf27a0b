"""Test setup: report the adapter, enforce the CI job's adapter, helpers shared by the suite,
and the one way a test says what the adapter must be able to do (``needs``)."""

import collections
import functools
import os
import re
import time

import numpy as np
import pytest
import wgpu

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import wgcompute as wgc  # noqa: E402
from wgcompute.dtypes import dtype as resolve_dtype  # noqa: E402
from wgcompute.runtime import WANTED_FEATURES  # noqa: E402

# What CI jobs expect to run on: EXPECT_BACKEND (vulkan or gl) makes the suite fail unless the
# adapter really is llvmpipe on that backend; EXPECT_NATIVE (fast or portable) unless wgcompute
# talks to wgpu that way. So a green job can never be one that silently ran elsewhere.
# EXPECT_LAVAPIPE=1 is EXPECT_BACKEND=vulkan.
_EXPECT_BACKEND = {"vulkan": "Vulkan", "gl": "OpenGL", "opengl": "OpenGL"}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs(*capabilities): the test skips, saying why, where the adapter lacks one "
        "of them: an adapter feature ('shader-f16'), a dtype ('f64': its feature), or one of "
        f"{', '.join(sorted(CAPABILITIES))} (see tests/conftest.py)")
    config.addinivalue_line(
        "markers", "computes(*params): the test computes on the dtypes its parameters of these "
        "names hold (names or numpy dtypes); it needs each one's adapter feature")
    config.addinivalue_line(
        "markers", "slow: a heavy sweep or end-to-end run (seconds each on lavapipe): `make "
        "test-fast` (-m 'not slow') leaves it out, `make test` and CI run it")
    config.addinivalue_line(
        "markers", "bigmem: the test holds about 1 GB of host memory or more at once "
        "(lavapipe's buffers are host memory); -m 'not bigmem' leaves it out")


def pytest_report_header(config):
    info = wgc.device_info()
    return [f"wgcompute adapter: {info['name']} ({info['backend']}, {info['adapter_type']}), "
            f"native calls: {info['native']}",
            f"wgcompute features: {', '.join(info['features']) or 'none'}"]


def pytest_sessionstart(session):
    info = wgc.device_info()
    want = os.environ.get("EXPECT_BACKEND", "").strip().lower()
    if not want and os.environ.get("EXPECT_LAVAPIPE") == "1":
        want = "vulkan"
    if want:
        if want not in _EXPECT_BACKEND:
            raise pytest.UsageError(f"EXPECT_BACKEND={want!r}: expected one of "
                                    f"{', '.join(_EXPECT_BACKEND)}")
        if "llvmpipe" not in info["name"].lower() or info["backend"] != _EXPECT_BACKEND[want]:
            raise pytest.UsageError(f"EXPECT_BACKEND={want} (llvmpipe on {_EXPECT_BACKEND[want]}) "
                                    f"but the adapter is {info['name']} ({info['backend']})")
    native = os.environ.get("EXPECT_NATIVE", "").strip().lower()
    if native and info["native"] != native:
        note = f" ({info['native_note']})" if info["native_note"] else ""
        raise pytest.UsageError(f"EXPECT_NATIVE={native} but wgcompute's native calls are "
                                f"{info['native']!r}{note}")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def has_feature(name: str) -> bool:
    return name in wgc.device_info()["features"]


@pytest.fixture
def tuning_cache(tmp_path, monkeypatch):
    """A fresh, empty tuning cache (its file, and every open device's choices forgotten)."""
    from wgcompute import autotune

    monkeypatch.setenv("WGCOMPUTE_CACHE_DIR", str(tmp_path))
    autotune.autotune_reset()
    yield tmp_path
    autotune.autotune_reset()


@pytest.fixture
def submits(monkeypatch):
    """Every submission to the current device's queue, counted (each way the Submitter
    submits: with a fence or none, a synchronous run's command buffer, a synchronous pass)."""
    submitter = wgc.current_device().submitter
    seen = []

    def counting(real):
        def count(self, *args, **kwargs):
            seen.append(args)
            return real(self, *args, **kwargs)
        return count

    for name in ("submit", "submit_sync", "submit_pass_sync"):
        monkeypatch.setattr(type(submitter), name, counting(getattr(type(submitter), name)))
    return seen


# -- helpers of the matmul tests that read operands in place ------------------------------------
MATMUL_TOL = {"f32": 2e-5, "f64": 1e-12, "f16": 2e-2}  # max |error| / max(1, max |want|)


def float_dtype(name: str) -> np.dtype:
    """numpy's dtype of "f32", "f64" or "f16"; skips where the adapter lacks the type."""
    if name == "f16" and not has_feature("shader-f16"):
        pytest.skip("the adapter lacks shader-f16")
    if name == "f64" and not has_feature("shader-f64"):
        pytest.skip("the adapter lacks shader-f64")
    return np.dtype({"f32": np.float32, "f64": np.float64, "f16": np.float16}[name])


def assert_product_close(got, want, dtype: str) -> None:
    """A product's result against numpy's in f64, to MATMUL_TOL relative to its largest."""
    scale = max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape
    assert np.abs(got.astype(np.float64) - want).max() <= MATMUL_TOL[dtype] * scale


def queued_labels(dev) -> list[str]:
    """The labels of the operations queued on ``dev`` and not yet submitted."""
    return [op.label for op in dev.lazy.ops] if dev.lazy is not None else []


@pytest.fixture
def held_copies():
    """Automatic fusion holds strided copies of every size in the test (by default only those
    of 1 MiB up): the tests of products reading them in place use small data."""
    from fuzz_helpers import held_copies as hold

    with hold(0):
        yield


@pytest.fixture
def autofused():
    """Skips where automatic fusion is off."""
    from wgcompute import _fusion_auto

    if not _fusion_auto.enabled():
        pytest.skip("automatic fusion is off (WGCOMPUTE_FUSE=0)")


# -- what the adapter under test can do -------------------------------------------------------
# Each capability is found on the default device, by asking it or by measuring, once per run,
# and only when a test needs it. None: available; else why not (the skip reason).

def _where() -> str:
    info = wgc.device_info()
    return f"{info['name']} on {info['backend']} ({info['native']} native calls)"


def _several_devices() -> str | None:
    """A second logical device on the default device's adapter, computing."""
    dev = wgc.current_device()
    index = next((a.index for a in wgc.devices()
                  if a.name == dev.name and a.backend == dev.backend), None)
    if index is None:
        return f"the default device's adapter ({_where()}) is not among wgc.devices()"
    try:
        other = wgc.device(index, new=True)
    except wgc.DeviceError as e:
        return f"a second device on {_where()} is refused: {e}"
    try:
        ok = wgc.relu(wgc.buffer([-1.0, 2.0], device=other)).tolist() == [0.0, 2.0]
    finally:
        other.close()
    return None if ok else f"a second device on {_where()} computes wrongly"


_SPIN = """
struct Params { n: u32, iters: u32, }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.n) { return; }
    var v = x[g.x];
    for (var k = 0u; k < p.iters; k = k + 1u) { v = v * 0.5 + 1.0; }
    out[g.x] = v;
}
"""


def _async_submit() -> str | None:
    """Whether submit() returns while the GPU still runs the work (a kernel of ~0.3 s)."""
    name = "conftest_async_probe"
    if name not in wgc.kernels():
        wgc.register_kernel(name, _SPIN, bindings=[("x", "read"), ("out", "read_write"),
                                                   ("p", "uniform")],
                            params={"n": "u32", "iters": "u32"}, workgroup_size=64)
    x = wgc.from_numpy(np.zeros(4096, np.float32))
    out = wgc.empty((4096,), "f32")
    iters, took = 1000, 0.0
    while took < 0.1 and iters < 1 << 28:
        iters *= 4
        t = time.perf_counter()
        wgc.run_kernel(name, [x], out, {"iters": iters})
        took = time.perf_counter() - t
    t = time.perf_counter()
    cmd = wgc.submit({"op": "run_kernel", "kernel": name, "inputs": [x], "output": out,
                      "params": {"iters": iters}})
    submit_s = time.perf_counter() - t
    cmd.wait()
    total_s = time.perf_counter() - t
    if submit_s > total_s / 2:
        return (f"on {_where()} a submit runs the work before it returns (measured: submit "
                f"{submit_s * 1e3:.0f} ms of a {total_s * 1e3:.0f} ms kernel)")
    return None


def _window_surface() -> str | None:
    """Presenting to a window (glfw under a display): wgpu's GL backend lists no surface
    format for one (create_surface then raises SurfaceError)."""
    if wgc.device_info()["backend"] == "OpenGL":
        return (f"wgpu's GL backend cannot present to a window ({_where()}: it lists no surface "
                f"format for one; configuring it anyway aborts inside wgpu-native)")
    return None


def _leased_results() -> str | None:
    """Results lent from mapped staging memory (stream_map's zero-copy results)."""
    if wgc.device_info()["native"] != "fast":
        return (f"{_where()}: the portable native calls copy results out of the staging "
                f"memory instead of lending it (wgpu-py's public API has no mapped range "
                f"that outlives an unmap)")
    return None


def _out_of_memory_errors() -> str | None:
    """A buffer the host has no memory for is refused (with an error) when it is made."""
    if wgc.device_info()["adapter_type"] != "CPU":
        return (f"the host memory cap cannot exhaust {_where()}: its buffers live in the "
                f"GPU's own memory (an H100 made 64 of 64 MiB under a 1 GiB cap)")
    if wgc.device_info()["backend"] == "OpenGL":
        return (f"wgpu's GL backend does not check glBufferStorage for GL_OUT_OF_MEMORY ({_where()}"
                f"): a buffer past the memory limit is made without storage and reads zeros, "
                f"so running out cannot be seen")
    return None


def _map_failure_survived() -> str | None:
    """A staging buffer that cannot be mapped (host memory exhausted) leaves the device usable."""
    if wgc.device_info()["backend"] == "OpenGL":
        return (f"wgpu's GL backend loses the device when a buffer cannot be mapped at creation "
                f"under memory pressure ({_where()}: 'Failed to map buffer while creating: "
                f"Parent device is lost')")
    return None


CAPABILITIES = {
    "several-devices": _several_devices,
    "async-submit": _async_submit,
    "window-surface": _window_surface,
    "leased-results": _leased_results,
    "out-of-memory-errors": _out_of_memory_errors,
    "map-failure-survived": _map_failure_survived,
}


_FEATURES = set(wgpu.FeatureName) | set(WANTED_FEATURES)


@functools.cache
def lacks(capability: str) -> str | None:
    """Why the default device cannot do ``capability`` (one of CAPABILITIES, an adapter feature
    or a dtype name), or None when it can."""
    if capability in CAPABILITIES:
        return CAPABILITIES[capability]()
    features = wgc.device_info()["features"]
    if capability in wgc.DTYPES:
        feature = wgc.DTYPES[capability].feature
        if feature is None or feature in features:
            return None
        return f"{_where()} lacks the adapter feature {feature!r}, which kernels on " \
               f"{capability} need"
    if capability not in _FEATURES:
        raise pytest.UsageError(f"needs({capability!r}): not a capability "
                                f"({', '.join(CAPABILITIES)}), an adapter feature or a dtype")
    if capability in features:
        return None
    return f"{_where()} lacks the adapter feature {capability!r}"


def pytest_runtest_setup(item):
    needed = [c for m in item.iter_markers("needs") for c in m.args]
    params = getattr(item, "callspec", None)
    for m in item.iter_markers("computes"):
        for name in m.args:
            if params is None or name not in params.params:
                continue  # a module's mark: its tests without that parameter need nothing
            try:  # a dtype name, a numpy dtype or type
                needed.append(resolve_dtype(params.params[name]).name)
            except wgc.DtypeError:
                pass  # not a dtype (a test may mix in other values): nothing to need
    for capability in needed:
        why = lacks(capability)
        if why is not None:
            pytest.skip(why)


@pytest.fixture
def adapter_lacks():
    """``lacks`` for tests that decide inside (e.g. per docs block): why the adapter cannot do a
    capability, or None."""
    return lacks


@pytest.fixture
def unfused():
    """``with unfused():`` runs a block with automatic fusion off (each operator its own
    kernel): the reference of the fusion tests (test_lazy.py has a fixture of its own)."""
    from contextlib import contextmanager

    from wgcompute import _fusion_auto

    @contextmanager
    def off():
        _fusion_auto.set_enabled(False)
        try:
            yield
        finally:
            _fusion_auto.set_enabled(True)

    return off


# -- test ids ----------------------------------------------------------------------------------
# `make test` runs the suite on several pytest-xdist workers; each collects the suite and they
# must find the same test ids. An id made by repr() of an object names its memory address,
# which differs from process to process (give such a parameter an id: pytest.param(..., id=)).
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


# scripts/pytest_rounds.py runs a large file in shards, one per round (WGCOMPUTE_TEST_SHARDS=
# "test_onnx_backend.py=2/3,..."): shard i of n keeps every n-th of that file's tests.
SHARDS_ENV = "WGCOMPUTE_TEST_SHARDS"


def _shards() -> dict[str, tuple[int, int]]:
    shards = {}
    for part in filter(None, os.environ.get(SHARDS_ENV, "").split(",")):
        name, _, frac = part.partition("=")
        i, _, n = frac.partition("/")
        shards[name.strip()] = (int(i), int(n))
    return shards


def _keep_shards(items, config) -> None:
    shards = _shards()
    if not shards:
        return
    seen: dict[str, int] = {}
    kept, dropped = [], []
    for item in items:
        name = item.path.name
        if name in shards:
            i, n = shards[name]
            k = seen[name] = seen.get(name, -1) + 1
            (kept if k % n == i - 1 else dropped).append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(config, items):
    _keep_shards(items, config)
    unstable = [item.nodeid for item in items if _ADDRESS.search(item.nodeid)]
    if unstable:
        raise pytest.UsageError(
            f"{len(unstable)} test ids hold a memory address, so they differ between runs and "
            f"between pytest-xdist workers (give the parameter an id): "
            f"{', '.join(unstable[:3])}{' ...' if len(unstable) > 3 else ''}")


# -- the end of a run: skips grouped by reason -----------------------------------------------
# pytest's -rs lists skips per file and line; here each reason is one line with its count
# (pyproject's addopts ask pytest for failures, errors and xfails only).

def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if not skipped:
        return
    counts = collections.Counter(_skip_reason(r) for r in skipped)
    terminalreporter.section(f"{len(skipped)} skipped, by reason", sep="-")
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.line(f"{n:5d}  {reason}")
