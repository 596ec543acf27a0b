"""Timelines: spans of (batch, stage, start, end) recorded from any thread while a batch
pipeline runs (stream_map, streams given ``batch=``), a text Gantt chart of them, and Chrome
trace files (Perfetto, chrome://tracing) of a timeline or of a model's profile."""

from __future__ import annotations

import json
import os
import threading
import time

from .errors import ArgumentError


class Timeline:
    """Spans of (batch, stage, start, end) in seconds since the timeline was created, recorded
    from any thread; ``gantt()`` draws them as text. stream_map fills one if given."""

    STAGES = ("load", "upload", "gpu", "download")

    def __init__(self):
        self.t0 = time.perf_counter()
        self.spans: list[tuple[int, str, float, float]] = []
        self._lock = threading.Lock()
        self._gpu_last_end: dict = {}  # per device: when its previous GPU span ended

    def add(self, batch: int, stage: str, start: float, end: float) -> None:
        """Record a span given in ``time.perf_counter()`` seconds."""
        with self._lock:
            self.spans.append((int(batch), str(stage), start - self.t0, end - self.t0))

    def gpu_span(self, batch: int, t_submit: float, stage: str = "gpu", lane=None):
        """A fence callback recording ``stage`` from when the GPU could start this submission
        (its submit time, or the end of the previous GPU span of the same ``lane``, usually a
        device: its queue runs in order) until now."""
        def done(_arg=None):
            now = time.perf_counter()
            with self._lock:
                start = max(t_submit, self._gpu_last_end.get(lane, 0.0))
                self._gpu_last_end[lane] = now
            self.add(batch, stage, start, now)
        return done

    def span(self, batch: int, stage: str):
        """``with tl.span(3, "upload"): ...`` records the block's duration."""
        tl = self

        class _Span:
            def __enter__(self):
                self.start = time.perf_counter()

            def __exit__(self, *exc):
                tl.add(batch, stage, self.start, time.perf_counter())

        return _Span()

    def stages(self) -> list[str]:
        seen = [s for s in self.STAGES if any(x[1] == s for x in self.spans)]
        return seen + sorted({x[1] for x in self.spans} - set(seen))

    def stage_means(self) -> dict[str, float]:
        """Mean duration of each stage over its batches."""
        out = {}
        for st in self.stages():
            d = [e - s for _, name, s, e in self.spans if name == st]
            out[st] = sum(d) / len(d)
        return out

    def total(self) -> float:
        """From the first span's start to the last span's end."""
        if not self.spans:
            return 0.0
        return max(x[3] for x in self.spans) - min(x[2] for x in self.spans)

    def trace_events(self) -> list[dict]:
        """The spans as Chrome Trace Event Format events: one complete ("X") event per span,
        named after its batch, on one track per stage (a stage whose spans overlap gets more
        tracks, so each track's events never overlap), times in microseconds since the
        timeline was created; "M" events name the process and the tracks."""
        with self._lock:
            spans = sorted(self.spans, key=lambda x: (x[2], x[3]))
        pid = 1
        events: list[dict] = [_meta(pid, 0, "process_name", "wgcompute timeline (host clock)")]
        lanes: dict[str, list[float]] = {}  # stage -> end time of each of its tracks
        tids: dict[tuple[str, int], int] = {}
        order = {st: i for i, st in enumerate(self.stages())}
        for batch, stage, start, end in spans:
            ends = lanes.setdefault(stage, [])
            lane = next((i for i, e in enumerate(ends) if e <= start), len(ends))
            if lane == len(ends):
                ends.append(end)
                tid = tids[stage, lane] = 1 + order[stage] * 1000 + lane
                name = stage if stage != "gpu" else "gpu (submit to fence)"
                events.append(_meta(pid, tid, "thread_name",
                                    name if lane == 0 else f"{name} ({lane + 1})"))
                events.append(_meta(pid, tid, "thread_sort_index", tid, key="sort_index"))
            ends[lane] = end
            events.append({"name": f"batch {batch}", "cat": stage, "ph": "X",
                           "ts": start * 1e6, "dur": max(end - start, 0.0) * 1e6,
                           "pid": pid, "tid": tids[stage, lane],
                           "args": {"batch": batch, "stage": stage}})
        return events

    def save_trace(self, path) -> str:
        """Write the timeline as a Chrome trace (JSON) to ``path`` and return the path: open
        it in https://ui.perfetto.dev or chrome://tracing."""
        return write_trace(path, self.trace_events())

    def gantt(self, width: int = 72) -> str:
        """One row per batch and stage; each column is total()/width seconds."""
        if not self.spans:
            return "(empty timeline)"
        t_min = min(x[2] for x in self.spans)
        scale = width / max(self.total(), 1e-12)
        marks = {st: (st[0].upper() if i < 9 else "#") for i, st in enumerate(self.stages())}
        rows = []
        for b in sorted({x[0] for x in self.spans}):
            for st in self.stages():
                line = [" "] * width
                hit = False
                for bb, name, s, e in self.spans:
                    if bb != b or name != st:
                        continue
                    hit = True
                    lo = min(width - 1, int((s - t_min) * scale))
                    hi = max(lo + 1, min(width, int(round((e - t_min) * scale))))
                    for i in range(lo, hi):
                        line[i] = marks[st]
                if hit:
                    rows.append(f"batch {b:>3} {st:<9}|{''.join(line)}|")
        legend = ", ".join(f"{m} = {st}" for st, m in marks.items())
        return "\n".join(rows + [f"{'':>19}0{'':>{width - 12}}{self.total() * 1e3:9.1f} ms",
                                 f"({legend})"])


def _meta(pid: int, tid: int, what: str, value, key: str = "name") -> dict:
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}


def check_trace_path(path, where: str = "path") -> str:
    """``path`` as a str, or ArgumentError naming it (checked before any work runs)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ArgumentError(f"{where}: expected a file path (str or os.PathLike) for the trace, "
                            f"got {path!r}")
    return os.fspath(path)


def write_trace(path, events: list[dict], where: str = "path") -> str:
    """Write ``events`` as a Chrome trace file ({"traceEvents": [...]}); returns the path."""
    path = check_trace_path(path, where)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    return path


def profile_trace_events(rows: list[dict], device: str, model: str) -> list[dict]:
    """A model profile's rows (layer, kernel, ms) as Chrome trace events: one complete event
    per step, back to back in step order on the device's GPU-timestamp track, each as long as
    its median GPU time (steps are timed in passes of their own: gaps are not measured)."""
    pid, tid = 1, 1
    events = [_meta(pid, 0, "process_name", device),
              _meta(pid, tid, "thread_name", f"{model}: GPU timestamps (median per step)")]
    t = 0.0
    for i, r in enumerate(rows):
        dur = max(float(r["ms"]), 0.0) * 1e3
        events.append({"name": r["layer"], "cat": r["kernel"], "ph": "X", "ts": t, "dur": dur,
                       "pid": pid, "tid": tid,
                       "args": {"step": i, "kernel": r["kernel"], "ms": r["ms"]}})
        t += dur
    return events
