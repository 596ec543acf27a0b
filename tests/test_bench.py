"""The benchmark suite runs on this adapter at --small sizes through `wgcompute bench`, and its
results (JSON, PNG, markdown ratios) say what they should."""

import json
import math
import os
import sys
import tempfile

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.cli import main


def test_bench_cli_small_run_writes_json_and_png(tmp_path, capsys):
    out = tmp_path / "kernels.json"
    assert main(["bench", "--small", "--only", "copy,reduce", "--repeat", "2",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| transpose f32 512x512 | wgcompute |" in printed
    data = json.loads(out.read_text())
    assert data["env"]["device"]
    rows = [r for r in data["rows"] if r["impl"] == "wgcompute"]
    assert {r["case"] for r in rows} >= {"copy f32 512x512", "transpose f32 512x512",
                                         "fill f32 512x512", "sum f32 1M all"}
    for r in rows:  # every wgcompute result was checked against numpy
        assert r["max_rel_err"] is not None and r["max_rel_err"] < 1e-5, r
        assert r["seconds"] > 0 and r["gbps"] > 0
    assert (tmp_path / "kernels.png").stat().st_size > 1000


def test_bench_cli_refuses_unknown_groups(capsys):
    assert main(["bench", "--only", "nope"]) == 1
    assert "--only: unknown nope" in capsys.readouterr().err


def test_results_ratios_and_markdown(monkeypatch):
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks.harness import Results

    res = Results("t")
    res.add("add", "wgcompute", 2.0, nbytes=4e9)
    res.add("add", "torch", 1.0, nbytes=4e9)
    torch_row = res.rows[1]
    assert res.ratio(torch_row) == pytest.approx(0.5)  # wgcompute at 50% of torch
    md = res.markdown()
    assert "| add | torch | 1.000 s | 4.0 |" in md and "50%" in md


@pytest.mark.slow
def test_bench_inference_small_run(tmp_path, monkeypatch):
    """benchmarks/bench_inference.py end to end at tiny sizes: every wgcompute row checked
    against onnxruntime, the stream case and the per-layer profile in the JSON."""
    pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks import bench_inference

    out = tmp_path / "inference.json"
    bench_inference.main(["--small", "--size", "32", "--batches", "1,2", "--images", "4",
                          "--repeat", "1", "--json", str(out)])
    data = json.loads(out.read_text())
    checked = [r for r in data["rows"] if r["max_rel_err"] is not None]
    assert checked and all(r["max_rel_err"] < 1e-4 for r in checked
                           if "f16" not in r["impl"])
    assert any(r["impl"] == "wgcompute stream_map" for r in data["rows"])
    assert any(r["impl"] == "onnxruntime CPU" for r in data["rows"])
    assert data["summary"]["1"]["dispatches"] == 55
    if "shader-f16" in data["env"]["features"]:  # f16 with f32 and mixed sums, f32 or f16 in
        f16 = [r for r in checked if "f16" in r["impl"]]
        assert {r["impl"] for r in f16} == {"wgcompute f16", "wgcompute f16 mixed"}
        assert len(f16) == 4 and all(r["max_rel_err"] < 3e-2 for r in f16)
    if "timestamp-query" in data["env"]["features"]:
        assert len(data["profiles"]["1"]) == 55


@pytest.mark.slow
def test_probe_conv_tiles_times_each_implicit_gemm_layer(tmp_path, monkeypatch):
    """benchmarks/probe_conv_tiles.py at a tiny size: one row per distinct implicit-GEMM
    convolution of MobileNetV2 (its 36 non-depthwise ones, counted), each timed with the
    tile asked for; an unknown dtype is refused."""
    pytest.importorskip("onnx", reason="onnx (pip install 'wgcompute[ml]')")
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks import probe_conv_tiles

    out = tmp_path / "tiles.json"
    assert probe_conv_tiles.main(["--batch", "1", "--size", "32", "--dtypes", "f32", "--only",
                                  "--configs", "32x64x16_4x4", "--budget", "600",
                                  "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["f32"]
    assert sum(r["count"] for r in rows) == 36
    for r in rows:
        assert list(r["ms"]) == ["32x64x16_4x4"] and r["ms"]["32x64x16_4x4"] > 0
        m, n, k = r["mnk"]
        assert r["shapes"][-1][1] == m and n == math.prod(r["shapes"][-1]) // m
    with pytest.raises(SystemExit) as e:
        probe_conv_tiles.main(["--dtypes", "f64"])
    assert e.value.code == 2


@pytest.mark.slow
def test_bench_multi_small_spreads_over_devices_and_checks_results(tmp_path, monkeypatch):
    """The data-parallel benchmark at lavapipe sizes: stream_map over one and two logical
    devices gives the float64 reference's results (and MobileNetV2's, where onnx is there)."""
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks import bench_multi

    out = tmp_path / "multi.json"
    assert bench_multi.main(["--small", "--repeat", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    impls = {r["impl"] for r in rows if r["case"] == "fma stream_map"}
    assert {"wgcompute, 1 device", "wgcompute, 2 devices"} <= impls
    for r in rows:
        if r["impl"].startswith("wgcompute"):
            assert r["err"] is not None and r["err"] < 1e-5, r
def test_bench_arrays_runs_and_checks_its_results(tmp_path, monkeypatch):
    """benchmarks/bench_arrays.py at a tiny size: every case runs, the operator's result and
    the reference's are checked against numpy."""
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks import bench_arrays

    out = tmp_path / "arrays.json"
    assert bench_arrays.main(["--small", "--n", str(1 << 18), "--repeat", "1", "--json",
                              str(out)]) == 0
    data = json.loads(out.read_text())
    impls = {r["impl"] for r in data["rows"]}
    assert {"wgc.add(a, b, out)", "c = a + b", "c = a + b, no memory pool",
            "+ (cols,) broadcast", "batched (a, b both 3-D)"} <= impls
    for r in data["rows"]:
        assert r["seconds"] > 0
        assert r["max_rel_err"] is None or r["max_rel_err"] == 0, r


def test_ab_versions_runs_two_copies_in_one_process(tmp_path, monkeypatch, capsys):
    """benchmarks/ab_versions.py with this package as the other version: both copies run (each
    checked against numpy inside), every row has both medians and a ratio. On wgpu's GL
    backend it refuses at once (the copies' devices would share one GL context)."""
    from wgcompute.cli.bench import find_benchmarks

    monkeypatch.syspath_prepend(find_benchmarks())
    from benchmarks import ab_versions

    out = tmp_path / "ab.json"
    other = os.path.dirname(wgc.__file__)
    args = ["--other", other, "--rounds", "2", "--block", "10", "--json", str(out)]
    if wgc.device_info()["backend"] == "OpenGL":  # two copies cannot share the GL context
        assert ab_versions.main(args) == 2 and not out.exists()
        assert "GL backend" in capsys.readouterr().err
        return
    assert ab_versions.main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["row"] for r in rows] == ["run_kernel", "submit + wait", "submit() returns",
                                        "polling wait for the fence", "Command.wait() after it"]
    assert all(r["other_us"] > 0 and r["this_us"] > 0 and r["ratio"] > 0 for r in rows)
    assert all(r["interval"][0] <= r["ratio"] <= r["interval"][1] for r in rows)
    assert sys.modules["wgc_other"].__file__.startswith(tempfile.gettempdir())


def test_ab_versions_interval_is_the_bootstrap_of_the_median():
    """The ratio's 95% interval: one value repeated has no spread; rounds that scatter give an
    interval around their median that narrows as the rounds grow (numpy's own resampling as
    the reference)."""
    from wgcompute.cli.bench import find_benchmarks

    sys.path.insert(0, find_benchmarks())
    try:
        from benchmarks.ab_versions import bootstrap_interval
    finally:
        sys.path.remove(find_benchmarks())
    assert bootstrap_interval(np.full(20, 1.02)) == (1.02, 1.02)
    rng = np.random.default_rng(1)
    few, many = 1 + 0.05 * rng.standard_normal(10), 1 + 0.05 * rng.standard_normal(1000)
    (lo1, hi1), (lo2, hi2) = bootstrap_interval(few), bootstrap_interval(many)
    assert lo1 <= np.median(few) <= hi1 and lo2 <= np.median(many) <= hi2
    assert hi2 - lo2 < (hi1 - lo1) / 3 and lo2 < 1 < hi2
