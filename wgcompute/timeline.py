"""Timelines: spans of (batch, stage, start, end) recorded from any thread while a batch
pipeline runs (stream_map, streams given ``batch=``), and a text Gantt chart of them."""

from __future__ import annotations

import threading
import time


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
