"""`wgcompute tune MODEL.onnx --batch ...`: a model's configurations timed ahead of its first
use and kept in the autotune cache, run as a user runs it (a subprocess)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")

pytestmark = pytest.mark.slow


def _cli(*args, env):
    return subprocess.run([sys.executable, "-m", "wgcompute.cli", *args], capture_output=True,
                          text=True, env=env, timeout=600)


def test_tune_fills_the_cache_that_later_processes_read(tmp_path):
    import onnx

    from wgcompute.ml.builders import mobilenet_v2

    path = tmp_path / "m.onnx"
    onnx.save(mobilenet_v2(width=0.25, num_classes=10, size=32), str(path))
    env = dict(os.environ, WGCOMPUTE_CACHE_DIR=str(tmp_path / "cache"),
               XDG_RUNTIME_DIR="/tmp")
    env.pop("WGCOMPUTE_AUTOTUNE", None)
    r = _cli("tune", str(path), "--batch", "1,2", env=env)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("batch ")]
    assert [ln.split(":")[0] for ln in lines] == ["batch 1", "batch 2"]
    timed = int(lines[0].split(": ")[1].split()[0])
    assert timed >= 1  # the model's convolutions had choices to time
    stored = json.loads((tmp_path / "cache" / "autotune.json").read_text())
    [choices] = stored.values()
    assert len(choices) >= timed and any(k.startswith("conv") for k in choices)
    # a second run finds everything tuned: nothing more to time
    again = _cli("tune", str(path), "--batch", "1", env=env)
    assert again.returncode == 0, again.stderr
    assert "batch 1: 0 configuration choices timed" in again.stdout


def test_tune_refuses_what_it_cannot_run(tmp_path):
    import onnx

    from wgcompute.ml.builders import mobilenet_v2

    path = tmp_path / "m.onnx"
    onnx.save(mobilenet_v2(width=0.25, num_classes=10, size=32), str(path))
    env = dict(os.environ, WGCOMPUTE_CACHE_DIR=str(tmp_path / "cache"), XDG_RUNTIME_DIR="/tmp")
    r = _cli("tune", str(path), "--batch", "0", env=env)
    assert r.returncode == 1 and "--batch: expected positive integers" in r.stderr
    r = _cli("tune", str(tmp_path / "missing.onnx"), env=env)
    assert r.returncode == 1 and "missing.onnx" in r.stderr
