"""The only place that requests adapters and devices: adapter choice (env overrides),
features, limits and device_info. The device is created lazily, once per process."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from dataclasses import dataclass, field

import wgpu

from ._version import __version__
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
BACKENDS = ("vulkan", "metal", "d3d12", "gl")
_GPU_TYPES = ("DiscreteGPU", "IntegratedGPU", "VirtualGPU")

_lock = threading.RLock()
_device: Device | None = None


@dataclass
class Device:
    """The adapter and logical device wgcompute computes on (one per process)."""

    adapter: object
    gpu_device: object
    features: frozenset = field(default_factory=frozenset)
    limits: dict = field(default_factory=dict)

    @property
    def queue(self):
        return self.gpu_device.queue

    @property
    def name(self) -> str:
        return self.adapter.info["device"]

    def has(self, feature: str) -> bool:
        return feature in self.features

    def limit(self, name: str) -> int:
        return int(self.limits[name])

    @property
    def is_gpu(self) -> bool:
        return _is_gpu(self.adapter.info)

    def info(self) -> dict:
        info = self.adapter.info
        return {
            "name": info["device"],
            "vendor": info.get("vendor") or _vendor_from_id(info.get("vendor_id", 0)),
            "backend": info["backend_type"],
            "adapter_type": info["adapter_type"],
            "gpu": _is_gpu(info),
            "driver": info.get("description", ""),
            "version": __version__,
            "wgpu_version": wgpu.__version__,
            "features": sorted(self.features),
            "limits": dict(self.limits),
        }

    def __repr__(self) -> str:
        info = self.adapter.info
        return f"<wgc.Device {info['device']!r} {info['backend_type']} {info['adapter_type']}>"


def _is_gpu(info) -> bool:
    if info["adapter_type"] not in _GPU_TYPES:
        return False
    name = info["device"].lower()
    return not any(s in name for s in ("llvmpipe", "lavapipe", "swiftshader", "software"))


def _vendor_from_id(vendor_id: int) -> str:
    return {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x106B: "Apple",
            0x10005: "Mesa"}.get(vendor_id, hex(vendor_id))


def _adapter_summary(adapter) -> dict:
    info = adapter.info
    return {
        "name": info["device"],
        "backend": info["backend_type"],
        "adapter_type": info["adapter_type"],
        "gpu": _is_gpu(info),
        "driver": info.get("description", ""),
    }


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


def adapters() -> list[dict]:
    """Every adapter wgpu finds on this machine (name, backend, adapter_type, gpu)."""
    _headless_runtime_dir()
    return [_adapter_summary(a) for a in wgpu.gpu.enumerate_adapters_sync()]


def _choose_adapter():
    _headless_runtime_dir()
    want_name = os.environ.get("WGCOMPUTE_ADAPTER", "").strip()
    want_backend = os.environ.get("WGCOMPUTE_BACKEND", "").strip().lower()
    if want_backend and want_backend not in BACKENDS:
        raise ArgumentError(f"WGCOMPUTE_BACKEND={want_backend!r}: expected one of "
                            f"{', '.join(BACKENDS)}")
    if not want_name and not want_backend:
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as e:  # wgpu raises RuntimeError when nothing is found
            raise DeviceError(_no_adapter_message(str(e))) from e
        if adapter is None:
            raise DeviceError(_no_adapter_message("request_adapter returned nothing"))
        return adapter
    found = wgpu.gpu.enumerate_adapters_sync()
    chosen = [a for a in found
              if (not want_backend or a.info["backend_type"].lower() == want_backend)
              and (not want_name or want_name.lower() in a.info["device"].lower())]
    if not chosen:
        listing = "; ".join(f"{a.info['device']} ({a.info['backend_type']})" for a in found)
        raise DeviceError(
            f"no adapter matches WGCOMPUTE_ADAPTER={want_name!r} WGCOMPUTE_BACKEND="
            f"{want_backend!r}; adapters found: {listing or 'none'}")
    # Prefer a real GPU, then Vulkan/Metal/D3D12 over GL.
    chosen.sort(key=lambda a: (not _is_gpu(a.info), a.info["backend_type"] == "OpenGL"))
    return chosen[0]


def _no_adapter_message(detail: str) -> str:
    return (f"no WebGPU adapter found ({detail}). On Debian/Ubuntu install a Vulkan driver, "
            f"e.g. `apt-get install mesa-vulkan-drivers` (lavapipe, runs on the CPU).")


def _create() -> Device:
    adapter = _choose_adapter()
    features = [f for f in WANTED_FEATURES if f in adapter.features]
    limits = {k: adapter.limits[k] for k in WANTED_LIMITS if k in adapter.limits}
    try:
        dev = adapter.request_device_sync(
            label="wgcompute", required_features=features, required_limits=limits)
    except Exception as e:
        raise DeviceError(f"adapter {adapter.info['device']!r} refused a device: {e}") from e
    return Device(adapter=adapter, gpu_device=dev, features=frozenset(dev.features),
                  limits=dict(dev.limits))


def get_device() -> Device:
    """The process-wide Device, created on first use."""
    global _device
    dev = _device
    if dev is not None:
        return dev
    with _lock:
        if _device is None:
            _device = _create()
        return _device


def device_created() -> bool:
    return _device is not None


def device_info() -> dict:
    """name, vendor, backend, adapter_type, gpu, version, wgpu_version, features, limits."""
    return get_device().info()


def is_gpu() -> bool:
    """True only when computing on a real GPU (not lavapipe or another CPU adapter)."""
    return get_device().is_gpu


def version() -> str:
    return __version__
