"""Adapters: the ones wgpu finds (asked once per process), choosing one by index, name, backend
or the environment, and requesting a device from it (one GL device at a time)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from dataclasses import dataclass

import wgpu

from .errors import ArgumentError, DeviceError

# Features wgcompute turns on when the adapter has them.
WANTED_FEATURES = (
    "shader-f16",
    "shader-f64",
    "shader-int64",
    "subgroup",
    "timestamp-query",
    "timestamp-query-inside-encoders",
    "timestamp-query-inside-passes",
)
# Limits raised to the adapter's maximum (WebGPU's defaults are far below real hardware).
WANTED_LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-storage-buffers-per-shader-stage",
    "max-bind-groups",
)
# What WGCOMPUTE_BACKEND and device(backend=) accept, and wgpu's name for each.
BACKENDS = {"vulkan": "Vulkan", "metal": "Metal", "d3d12": "D3D12", "gl": "OpenGL",
            "opengl": "OpenGL"}
_GPU_TYPES = ("DiscreteGPU", "IntegratedGPU", "VirtualGPU")


def _is_gpu(info) -> bool:
    if info["adapter_type"] not in _GPU_TYPES:
        return False
    name = info["device"].lower()
    return not any(s in name for s in ("llvmpipe", "lavapipe", "swiftshader", "software"))


def _vendor(info) -> str:
    return info.get("vendor") or {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel",
                                  0x106B: "Apple", 0x10005: "Mesa"}.get(
        info.get("vendor_id", 0), hex(info.get("vendor_id", 0)))


@dataclass(frozen=True)
class AdapterInfo:
    """One adapter wgpu finds: what ``wgc.devices()`` lists and ``wgc.device(i)`` opens."""

    index: int
    name: str
    backend: str
    adapter_type: str
    gpu: bool
    driver: str
    vendor: str

    def __str__(self) -> str:
        kind = "GPU" if self.gpu else "CPU"
        return f"[{self.index}] {self.name} ({self.backend}, {self.adapter_type}, {kind})"


def _summary(i: int, adapter) -> AdapterInfo:
    info = adapter.info
    return AdapterInfo(i, info["device"], info["backend_type"], info["adapter_type"],
                       _is_gpu(info), info.get("description", ""), _vendor(info))


def _headless_runtime_dir() -> None:
    """Linux without a desktop session has no XDG_RUNTIME_DIR, and the Vulkan drivers'
    Wayland probe then prints "error: XDG_RUNTIME_DIR is invalid or not set in the
    environment." for every adapter it looks at. There is no display to reach anyway: give
    this process a private directory (owned by this user, mode 0700) before wgpu starts."""
    if not sys.platform.startswith("linux"):
        return
    if os.environ.get("XDG_RUNTIME_DIR", "").startswith("/"):
        return  # set by a session (the probe only asks for an absolute path)
    path = os.path.join(tempfile.gettempdir(), f"wgcompute-runtime-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            path = tempfile.mkdtemp(prefix="wgcompute-runtime-")  # someone else's: our own
    except OSError:
        path = tempfile.mkdtemp(prefix="wgcompute-runtime-")
    os.environ["XDG_RUNTIME_DIR"] = path


# wgpu's adapters, found once per process. Asking wgpu again (enumerate_adapters or
# request_adapter) while a device of its GL backend works in another thread aborts the process
# (EGL BadAccess in wgpu-hal's make_current), and one adapter opens any number of devices.
_found: list | None = None
_preferred: list = []  # request_adapter's high-performance choice, once asked
_found_lock = threading.Lock()


def _adapters() -> list:
    global _found
    with _found_lock:
        if _found is None:
            _headless_runtime_dir()
            _found = wgpu.gpu.enumerate_adapters_sync()
        return _found


def _high_performance():
    with _found_lock:
        if not _preferred:
            _headless_runtime_dir()
            _preferred.append(wgpu.gpu.request_adapter_sync(power_preference="high-performance"))
        return _preferred[0]


def _same(a, b) -> bool:
    """Whether adapters ``a`` and ``b`` are one: the same object, or the high-performance
    choice (a request makes an object of its own) and the first adapter of ``devices()`` that
    it looks like (wgpu's request takes the first adapter of the kind it prefers)."""
    if a is b:
        return True
    found = _found or ()
    listed = [x for x in (a, b) if any(x is f for f in found)]
    if len(listed) != 1:
        return False
    other = b if listed[0] is a else a
    info = dict(other.info)
    return next((f for f in found if dict(f.info) == info), None) is listed[0]


def _open_on(adapter, candidates):
    """The first open device of ``candidates`` (None allowed) that is on ``adapter``."""
    return next((d for d in candidates if d is not None and d.alive
                 and _same(d.adapter, adapter)), None)


def devices() -> list[AdapterInfo]:
    """Every adapter wgpu finds on this machine, in the order ``device(index)`` uses."""
    return [_summary(i, a) for i, a in enumerate(_adapters())]


def adapters() -> list[dict]:
    """``devices()`` as dicts (name, backend, adapter_type, gpu, driver)."""
    return [{"name": a.name, "backend": a.backend, "adapter_type": a.adapter_type,
             "gpu": a.gpu, "driver": a.driver} for a in devices()]


def _backend_name(backend, argument: str) -> str | None:
    if backend is None or backend == "":
        return None
    if not isinstance(backend, str) or backend.strip().lower() not in BACKENDS:
        raise ArgumentError(f"{argument}: expected one of {', '.join(BACKENDS)}, got "
                            f"{backend!r}")
    return BACKENDS[backend.strip().lower()]


def _check_options(backend, hold_clocks, new) -> str | None:
    """device()'s options checked: wgpu's name of ``backend``."""
    if backend == "":
        raise ArgumentError(f"backend: expected one of {', '.join(BACKENDS)} or None, got ''")
    if hold_clocks is not None and not isinstance(hold_clocks, bool):
        raise ArgumentError(f"hold_clocks: expected True, False or None, got {hold_clocks!r}")
    if not isinstance(new, bool):
        raise ArgumentError(f"new: expected True or False, got {new!r}")
    return _backend_name(backend, "backend")


def _rank(adapter) -> tuple:
    """Prefer a real GPU, then Vulkan/Metal/D3D12 over GL."""
    return (not _is_gpu(adapter.info), adapter.info["backend_type"] == "OpenGL")


def _listing(found) -> str:
    return "; ".join(str(_summary(i, a)) for i, a in enumerate(found)) or "none"


def _no_adapter(detail: str) -> DeviceError:
    return DeviceError(f"no WebGPU adapter found ({detail}). On Debian/Ubuntu install a "
                       f"Vulkan driver, e.g. `apt-get install mesa-vulkan-drivers` (lavapipe, "
                       f"runs on the CPU).")


def _find_adapter(which, backend: str | None, argument: str):
    """The adapter ``which`` names (index, name substring, AdapterInfo) on ``backend``."""
    try:
        found = _adapters()
    except Exception as e:
        raise _no_adapter(str(e)) from e
    if isinstance(which, AdapterInfo):
        which = which.index
    if isinstance(which, bool):
        raise ArgumentError(f"{argument}: expected an adapter index, a name or None, got "
                            f"{which!r}")
    if isinstance(which, int):
        if not 0 <= which < len(found):
            raise ArgumentError(f"{argument}: adapter index {which} out of range; adapters: "
                                f"{_listing(found)}")
        adapter = found[which]
        if backend is not None and adapter.info["backend_type"] != backend:
            raise ArgumentError(f"{argument}: adapter {which} is {adapter.info['device']} on "
                                f"{adapter.info['backend_type']}, not {backend}")
        return adapter
    if which is not None and not isinstance(which, str):
        raise ArgumentError(f"{argument}: expected an adapter index, a name or None, got "
                            f"{type(which).__name__}")
    name = (which or "").strip().lower()
    chosen = [a for a in found
              if (backend is None or a.info["backend_type"] == backend)
              and (not name or name in a.info["device"].lower())]
    if not chosen:
        raise DeviceError(f"no adapter matches {argument}={which!r}"
                          f"{f' on {backend}' if backend else ''}; adapters: {_listing(found)}")
    chosen.sort(key=_rank)
    return chosen[0]


def _default_adapter():
    """The adapter of the default device: WGCOMPUTE_ADAPTER (a substring of the name) and
    WGCOMPUTE_BACKEND when set, else the high-performance one."""
    want_name = os.environ.get("WGCOMPUTE_ADAPTER", "").strip()
    want_backend = _backend_name(os.environ.get("WGCOMPUTE_BACKEND", "").strip(),
                                 "WGCOMPUTE_BACKEND")
    if want_name or want_backend:
        try:
            return _find_adapter(want_name or None, want_backend, "WGCOMPUTE_ADAPTER")
        except DeviceError as e:
            raise DeviceError(f"{e} (WGCOMPUTE_ADAPTER={want_name!r}, WGCOMPUTE_BACKEND="
                              f"{os.environ.get('WGCOMPUTE_BACKEND', '')!r})") from None
    try:
        adapter = _high_performance()
    except Exception as e:  # wgpu raises RuntimeError when nothing is found
        raise _no_adapter(str(e)) from e
    if adapter is None:
        raise _no_adapter("request_adapter returned nothing")
    return adapter


def _one_gl_device(adapter, open_devices: dict) -> None:
    """wgpu's GL backend shares one EGL context among the devices of an adapter, and two of
    them used from different threads abort the process (EGL BadAccess in wgpu-hal): one GL
    device at a time (``open_devices``: runtime's table of open devices)."""
    if adapter.info["backend_type"] != "OpenGL":
        return
    _adapters()  # asked now, not later while this device works (see _adapters)
    with contextlib.suppress(Exception):  # no high-performance choice: nothing to ask later
        _high_performance()
    for dev in list(open_devices.values()):
        if dev.backend == "OpenGL":
            raise DeviceError(
                f"{dev.label} is already open on wgpu's GL backend, which shares one GL context "
                f"between devices (two of them used at once abort the process); close it "
                f"first, or use a Vulkan, Metal or D3D12 adapter for several devices")


def _request(adapter, label: str, open_devices: dict):
    _one_gl_device(adapter, open_devices)
    features = [f for f in WANTED_FEATURES if f in adapter.features]
    limits = {k: adapter.limits[k] for k in WANTED_LIMITS if k in adapter.limits}
    try:
        return adapter.request_device_sync(label=label, required_features=features,
                                           required_limits=limits)
    except Exception as e:
        raise DeviceError(f"adapter {adapter.info['device']!r} refused a device: {e}") from e
