"""Editors understand wgcompute: pyright (what VS Code's Pylance runs) and mypy check
tests/typing/user_script.py, a program written against the documented API, without an error;
its ``assert_type`` calls pin what both infer (``a + b`` and ``a @ b`` are Buffers, ``wgc.sum``
is the function, ``wgc.ml`` and ``wgc.dask`` are the modules, ``Command.wait()`` returns the
command's result type). The script also runs."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "typing" / "user_script.py"


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_pyright_finds_no_error():
    pyright = shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (npm install -g pyright)")
    # the interpreter running the tests, so pyright sees the same packages (dask, onnx)
    r = _run([pyright, "--pythonpath", sys.executable, str(SCRIPT)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 errors" in r.stdout, r.stdout


@pytest.mark.slow
def test_mypy_finds_no_error(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install mypy, or the dev extra)")
    # errors inside wgcompute's own modules are not what a user sees (mypy reports an
    # installed package's types, not its internals): follow its imports silently
    r = _run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
              "--cache-dir", os.devnull, str(SCRIPT)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout


def test_user_script_runs():
    pytest.importorskip("onnx", reason="the script loads an ONNX model (wgcompute[ml])")
    pytest.importorskip("dask.array", reason="the script runs wgc.dask (wgcompute[dask])")
    r = _run([sys.executable, str(SCRIPT)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok"), r.stdout
