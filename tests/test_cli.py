"""The `wgcompute` command line, run as a user runs it (a subprocess): demo's results, info's
table and JSON, the exit codes of bad arguments."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wgcompute as wgc

SCRIPT = Path(sys.executable).parent / "wgcompute"


def run_cli(*args, cwd=None, timeout=300):
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "wgcompute.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


@pytest.fixture(scope="module")
def demo_cwd(tmp_path_factory):
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="module")
def demo(demo_cwd):
    # a small matmul keeps it quick on a CPU adapter
    return run_cli("demo", "--size", "96", cwd=demo_cwd)


def test_demo_leaves_the_current_folder_alone(demo, demo_cwd):
    assert demo.returncode == 0, demo.stderr
    assert list(demo_cwd.iterdir()) == []
    m = re.search(r"-> (\S+_processed\.png) in", demo.stdout)
    assert m, demo.stdout
    assert Path(m.group(1)).is_file()


def test_demo_succeeds(demo):
    assert demo.returncode == 0, demo.stderr
    assert "all results checked against numpy: OK" in demo.stdout


def test_demo_prints_the_quick_start_results(demo):
    out = demo.stdout
    info = wgc.device_info()
    assert info["name"] in out and info["backend"] in out
    assert "a + b          = [5.0, 7.0, 9.0]" in out
    assert "relu           = [0.0, 0.0, 0.0, 1.5]" in out
    assert "leaky relu 0.1 = [-0.2, -0.05, 0.0, 1.5]" in out
    assert "matmul 2x2     = [[19.0, 22.0], [43.0, 50.0]]" in out


def test_demo_prints_timings(demo):
    out = demo.stdout
    for label in ("upload 4M f32", "add 4M f32", "relu 4M f32", "read back 4M f32"):
        assert re.search(rf"{re.escape(label)}.*\s[0-9]+\.[0-9]+ ms", out), label
    m = re.search(r"matmul 96x96x96: ([0-9.]+) ms, ([0-9.]+) GFLOP/s, max abs error vs float64 "
                  r"numpy ([0-9.e+-]+)", out)
    assert m, out
    assert float(m.group(3)) < 1e-3


def test_demo_bad_size_is_a_clean_error():
    r = run_cli("demo", "--size", "0")
    assert r.returncode == 1
    assert "--size: expected a positive int, got 0" in r.stderr
    assert "Traceback" not in r.stderr


def test_info_table():
    r = run_cli("info")
    assert r.returncode == 0, r.stderr
    info = wgc.device_info()
    assert info["name"] in r.stdout
    for row in ("backend", "adapter type", "real GPU", "features", "max-buffer-size",
                "adapters found"):
        assert row in r.stdout
    gpu_row = next(line for line in r.stdout.splitlines() if "real GPU" in line)
    assert gpu_row.split()[-1] == ("yes" if info["gpu"] else "no")


def test_info_json_matches_device_info():
    r = run_cli("info", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    info = wgc.device_info()
    for k in ("name", "backend", "adapter_type", "gpu", "version", "wgpu_version",
              "features"):
        assert data[k] == info[k], k
    assert data["limits"]["max-buffer-size"] == info["limits"]["max-buffer-size"]


def test_no_command_prints_help_and_exits_2():
    r = run_cli()
    assert r.returncode == 2
    assert "demo" in r.stdout and "info" in r.stdout


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"wgcompute {wgc.__version__}"


def test_unknown_subcommand():
    r = run_cli("frobnicate")
    assert r.returncode == 2
    assert "invalid choice" in r.stderr
