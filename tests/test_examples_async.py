"""examples/async_pipeline.py runs to the end (it checks its own results against numpy)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_async_pipeline_example_runs():
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "async_pipeline.py")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "pipeline: [2.0, 4.0, 6.0]" in r.stdout
    assert "awaited:" in r.stdout
