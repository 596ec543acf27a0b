"""Chrome trace files (Trace Event Format, what ui.perfetto.dev and chrome://tracing open) of a
Timeline filled by real GPU work and of Model.profile(): the schema, one event per span or
step, each track's events in order without overlap, and refused paths."""

import json

import numpy as np
import pytest

import wgcompute as wgc

X_KEYS = {"name", "ph", "ts", "dur", "pid", "tid"}


def load_trace(path) -> tuple[list[dict], list[dict]]:
    """(complete events, metadata events) of a trace file, its schema checked."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    events = doc["traceEvents"]
    assert {e["ph"] for e in events} <= {"X", "M"}
    xs = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    for e in xs:
        assert X_KEYS <= set(e), e
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ts"] >= 0 and e["dur"] >= 0, e
    for e in meta:
        assert {"name", "ph", "pid", "tid", "args"} <= set(e), e
    named = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in xs} <= named  # every track has a name
    assert any(e["name"] == "process_name" for e in meta)
    by_track: dict = {}
    for e in xs:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track in by_track.values():  # one track's events follow each other
        track.sort(key=lambda e: e["ts"])
        for a, b in zip(track, track[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
    return xs, meta


def test_timeline_trace_has_every_span_of_a_stream_map(tmp_path):
    tl = wgc.Timeline()
    batches = [np.full(50_000, i, np.float32) for i in range(6)]
    outs = list(wgc.stream_map("scale", batches, depth=3, params={"scalar": 2.0}, timeline=tl))
    for b, o in zip(batches, outs):
        np.testing.assert_array_equal(o, b * 2)
    path = tmp_path / "timeline.json"
    assert tl.save_trace(path) == str(path)
    xs, meta = load_trace(path)

    # one event per span, at the span's times (microseconds since the timeline began)
    assert len(xs) == len(tl.spans) == 6 * 4
    got = sorted((e["args"]["batch"], e["cat"], round(e["ts"], 3), round(e["dur"], 3))
                 for e in xs)
    want = sorted((b, st, round(s * 1e6, 3), round((e - s) * 1e6, 3))
                  for b, st, s, e in tl.spans)
    assert got == want
    assert all(e["name"] == f"batch {e['args']['batch']}" for e in xs)
    names = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert {"load", "upload", "download"} <= {n.split(" (")[0] for n in names}

    # each batch goes load -> upload -> gpu -> download
    for b in range(6):
        stage = {e["cat"]: e for e in xs if e["args"]["batch"] == b}
        assert set(stage) == {"load", "upload", "gpu", "download"}
        assert stage["load"]["ts"] <= stage["upload"]["ts"]
        assert stage["upload"]["ts"] + stage["upload"]["dur"] <= stage["gpu"]["ts"] + 1e-3
        assert stage["gpu"]["ts"] <= stage["download"]["ts"] + stage["download"]["dur"]


def test_overlapping_spans_of_one_stage_get_tracks_of_their_own(tmp_path):
    tl = wgc.Timeline()
    t = tl.t0
    tl.add(0, "load", t + 0.0, t + 0.3)
    tl.add(1, "load", t + 0.1, t + 0.2)   # inside batch 0's load: a second track
    tl.add(2, "load", t + 0.35, t + 0.4)  # after both: back on the first
    xs, meta = load_trace(tl.save_trace(tmp_path / "t.json"))
    tid = {e["args"]["batch"]: e["tid"] for e in xs}
    assert tid[0] == tid[2] != tid[1]
    names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert names[tid[0]] == "load" and names[tid[1]] == "load (2)"


def test_empty_timeline_writes_a_trace_without_events(tmp_path):
    xs, _ = load_trace(wgc.Timeline().save_trace(tmp_path / "empty.json"))
    assert xs == []


@pytest.mark.parametrize("bad", [None, 3, ""])
def test_save_trace_refuses_what_is_not_a_path(bad):
    with pytest.raises(wgc.ArgumentError, match="path: expected a file path"):
        wgc.Timeline().save_trace(bad)


def _tiny_net() -> bytes:
    onnx = pytest.importorskip("onnx", reason="Model.profile needs wgcompute[ml] (onnx)")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w", (4, 3, 3, 3)), ("b", (4,)), ("fc", (5, 64)), ("fb", (5,)))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_model_profile_trace_has_one_event_per_step(tmp_path):
    if "timestamp-query" not in wgc.device_info()["features"]:
        pytest.skip("the adapter lacks timestamp-query, which Model.profile needs")
    model = wgc.ml.load_onnx(_tiny_net())
    path = tmp_path / "profile.json"
    rows = model.profile(np.zeros((2, 3, 8, 8), np.float32), repeat=2, trace=path)
    xs, meta = load_trace(path)
    assert [e["name"] for e in xs] == [r["layer"] for r in rows]
    assert [e["args"]["kernel"] for e in xs] == [r["kernel"] for r in rows]
    assert len(xs) == len(rows) == 3
    assert [e["dur"] for e in xs] == pytest.approx([r["ms"] * 1e3 for r in rows])
    assert xs[0]["ts"] == 0
    for a, b in zip(xs, xs[1:]):  # back to back, in step order
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"])
    assert len({(e["pid"], e["tid"]) for e in xs}) == 1
    process = next(e["args"]["name"] for e in meta if e["name"] == "process_name")
    assert process == wgc.current_device().label
    model.free()


def test_model_profile_refuses_a_bad_trace_before_running(tmp_path):
    model = wgc.ml.load_onnx(_tiny_net())
    with pytest.raises(wgc.ArgumentError, match=r"trace: expected a file path .* got 3"):
        model.profile(np.zeros((1, 3, 8, 8), np.float32), trace=3)
    model.free()


def test_docs_plot_script_draws_a_trace(tmp_path):
    pytest.importorskip("matplotlib", reason="docs/plot_trace.py draws with matplotlib")
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "docs" / "plot_trace.py"
    spec = importlib.util.spec_from_file_location("plot_trace", script)
    plot_trace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_trace)
    tl = wgc.Timeline()
    list(wgc.stream_map("relu", [np.ones(1000, np.float32)] * 3, depth=2, timeline=tl))
    png = plot_trace.plot_trace(tl.save_trace(tmp_path / "t.json"), str(tmp_path / "t.png"))
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
