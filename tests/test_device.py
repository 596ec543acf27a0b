"""The device: device_info keys, is_gpu, adapters, lazy creation, and adapter choice through
WGCOMPUTE_ADAPTER / WGCOMPUTE_BACKEND (each in a fresh process)."""

import json
import os
import subprocess
import sys

import pytest
import wgpu

import wgcompute as wgc

INFO_KEYS = {"name", "vendor", "backend", "adapter_type", "gpu", "version", "wgpu_version",
             "features", "limits"}


def test_device_info_keys_and_values():
    info = wgc.device_info()
    assert INFO_KEYS <= set(info)
    assert info["version"] == wgc.__version__ == wgc.version()
    assert info["wgpu_version"] == wgpu.__version__
    assert info["backend"] in ("Vulkan", "Metal", "D3D12", "OpenGL")
    assert isinstance(info["gpu"], bool) and info["gpu"] == wgc.is_gpu()
    assert isinstance(info["features"], list)
    for k in ("max-buffer-size", "max-storage-buffer-binding-size",
              "max-compute-workgroups-per-dimension"):
        assert isinstance(info["limits"][k], int) and info["limits"][k] > 0
    # the limits we asked for are the adapter's maxima, not WebGPU's small defaults
    assert info["limits"]["max-storage-buffer-binding-size"] >= 128 << 20


def test_is_gpu_false_on_a_cpu_adapter():
    info = wgc.device_info()
    software = info["adapter_type"] == "CPU" or "llvmpipe" in info["name"].lower()
    if not software:
        pytest.skip(f"running on {info['name']} ({info['adapter_type']}), not a CPU adapter")
    assert wgc.is_gpu() is False
    assert info["gpu"] is False


def test_adapters_lists_the_one_in_use():
    found = wgc.adapters()
    assert found, "no adapters listed"
    for a in found:
        assert {"name", "backend", "adapter_type", "gpu"} <= set(a)
    info = wgc.device_info()
    assert any(a["name"] == info["name"] and a["backend"] == info["backend"] for a in found)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    for k in ("WGCOMPUTE_ADAPTER", "WGCOMPUTE_BACKEND"):
        full.pop(k, None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


def test_import_creates_no_device():
    r = _run("import wgcompute, wgcompute.runtime as r; print(r.default_opened()); "
             "wgcompute.buffer([1.0]); print(r.default_opened())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_adapter_name_that_matches_nothing_lists_the_adapters():
    r = _run("import wgcompute as wgc\n"
             "try:\n    wgc.device_info()\n"
             "except wgc.DeviceError as e:\n    print('DeviceError:', e)\n",
             WGCOMPUTE_ADAPTER="no-such-adapter-xyz")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "DeviceError:" in out and "no-such-adapter-xyz" in out
    assert "adapters:" in out
    assert wgc.device_info()["name"] in out  # the listing names the adapters that exist


def test_backend_vulkan_selects_a_vulkan_adapter():
    if not any(a["backend"] == "Vulkan" for a in wgc.adapters()):
        pytest.skip("no Vulkan adapter on this machine")
    r = _run("import json, wgcompute as wgc; i = wgc.device_info(); "
             "print(json.dumps([i['backend'], i['name']])); "
             "print(wgc.add(wgc.buffer([1.0]), wgc.buffer([2.0])).tolist())",
             WGCOMPUTE_BACKEND="vulkan")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    assert json.loads(first)[0] == "Vulkan"
    assert second == "[3.0]"


def test_adapter_substring_selects_that_adapter():
    name = wgc.device_info()["name"]
    part = name.split()[0].upper()  # a case-insensitive substring
    r = _run("import wgcompute as wgc; print(wgc.device_info()['name'])",
             WGCOMPUTE_ADAPTER=part)
    assert r.returncode == 0, r.stderr
    assert part.lower() in r.stdout.lower()


def test_unknown_backend_is_an_argument_error():
    r = _run("import wgcompute as wgc\n"
             "try:\n    wgc.device_info()\n"
             "except wgc.ArgumentError as e:\n    print('ArgumentError:', e)\n",
             WGCOMPUTE_BACKEND="directx9")
    assert r.returncode == 0, r.stderr
    assert "ArgumentError: WGCOMPUTE_BACKEND: expected one of" in r.stdout
    assert "'directx9'" in r.stdout
    assert "vulkan" in r.stdout
