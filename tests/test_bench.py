"""The benchmark suite runs on this adapter at --small sizes through `wgcompute bench`, and its
results (JSON, PNG, markdown ratios) say what they should."""

import json

import pytest

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
