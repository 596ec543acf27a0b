"""Model.profile: per-layer GPU times from timestamp queries, each step in its own compute
pass, and those times written as a Chrome trace."""

from __future__ import annotations

import numpy as np

from .. import transfers
from ..buffer import Buffer
from ..commands import submit_work
from ..dtypes import dtype as resolve_dtype
from ..errors import ArgumentError
from .executable import _device


def _arguments(model, inputs, repeat, trace) -> tuple:
    """profile()'s checks: (the device, the trace path or None, the inputs as numpy)."""
    from ..timeline import check_trace_path

    if trace is not None:
        trace = check_trace_path(trace, "trace")
    device = _device()
    if not device.has("timestamp-query"):
        raise ArgumentError(f"profile: {device.name} lacks the 'timestamp-query' feature")
    if not isinstance(repeat, int) or repeat < 1:
        raise ArgumentError(f"repeat: expected an int >= 1, got {repeat!r}")
    xs = [np.asarray(x.to_numpy() if isinstance(x, Buffer) else x)
          for x in model._arrays(inputs, {})]
    return device, trace, xs


def profile_model(model, inputs, repeat: int = 5, trace=None) -> list[dict]:
    """Per-layer GPU times (ms, the median of ``repeat`` runs) from timestamp queries:
    each step in its own compute pass. Returns dicts with layer (ONNX node names,
    fused ones joined by +), kernel, and ms; needs the adapter's timestamp-query.
    ``trace`` (a path): also write the steps as a Chrome trace for ui.perfetto.dev or
    chrome://tracing, back to back at their median times (wgc.Timeline's format)."""
    device, trace, xs = _arguments(model, inputs, repeat, trace)
    xs = [x if model._is_host(i) else np.require(x, model._upload_type(x.dtype), "C")
          for i, x in enumerate(xs)]
    plan = model.plan(*[x if model._is_host(i) else x.shape for i, x in enumerate(xs)],
                      dtypes=[resolve_dtype(x.dtype).name for i, x in enumerate(xs)
                              if not model._is_host(i)])
    xs = [x for i, x in enumerate(xs) if not model._is_host(i)]
    exe = model._executable(plan)
    parts = exe.dispatch.parts
    n = len(parts)
    if n == 0:
        return _trace(model, [], trace, device)
    with exe.lock:
        for buf, a in zip(exe.inputs, xs, strict=True):
            buf.write(a.reshape(buf.shape))
        ms = _time_passes(device, [part.encode for part in parts], [*exe.inputs, exe.output],
                          repeat, f"{model.name}-profile")
    return _trace(model, [{"layer": st.label, "kernel": st.kernel.name, "ms": t}
                          for st, t in zip(plan.steps, ms, strict=True)], trace, device)


def _trace(model, rows: list[dict], trace: str | None, device) -> list[dict]:
    """profile()'s rows, written first as a Chrome trace to ``trace`` when it is a path."""
    if trace is not None:
        from ..timeline import profile_trace_events, write_trace

        write_trace(trace, profile_trace_events(rows, device.label, model.name), "trace")
    return rows


# timestamp queries a profile submits at once (a query set holds at most 4096)
_OPS_A_SUBMIT = 1024


def profile_replayed(model, inputs, repeat: int = 5, trace=None) -> list[dict]:
    """profile() of an interpreted model: the dispatches of its replayed call (ml/replay.py),
    each operation (one kernel of a node) in its own compute pass, named by its node."""
    from .replay import replay_for

    device, trace, xs = _arguments(model, inputs, repeat, trace)
    rep = replay_for(model.graph, model._interpreter, xs, device)
    with rep.lock:
        ops = [op for op in rep.capture.ops if op[0]]
        ms = _time_passes(device, [_recorder(device, op[0]) for op in ops],
                          [b for op in ops for b in op[2]], repeat, f"{model.name}-profile")
    rows = [{"layer": op[3].split(": ")[0], "kernel": op[3].split(": ", 1)[-1], "ms": t}
            for op, t in zip(ops, ms, strict=True)]
    return _trace(model, rows, trace, device)


def _recorder(device, calls):
    return lambda cpass: device.link.record_wgpu_pass(cpass, calls)


def _time_passes(device, encoders: list, buffers: list, repeat: int, label: str) -> list[float]:
    """Median GPU ms of each ``encoders[i](cpass)``, each in its own compute pass between
    timestamp queries (``repeat`` runs after one warm-up), _OPS_A_SUBMIT passes a submit."""
    out = []
    for start in range(0, len(encoders), _OPS_A_SUBMIT):
        out += _time_some(device, encoders[start:start + _OPS_A_SUBMIT], buffers, repeat, label)
    return out


def _time_some(device, encoders: list, buffers: list, repeat: int, label: str) -> list[float]:
    import wgpu

    n = len(encoders)
    dev = device.gpu_device
    qs = dev.create_query_set(label=label, type=wgpu.QueryType.timestamp, count=2 * n)
    resolve = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                | wgpu.BufferUsage.COPY_SRC)
    times = [[] for _ in range(n)]

    def record(enc):
        for i, encode in enumerate(encoders):
            cpass = enc.begin_compute_pass(timestamp_writes={
                "query_set": qs, "beginning_of_pass_write_index": 2 * i,
                "end_of_pass_write_index": 2 * i + 1})
            encode(cpass)
            cpass.end()
        enc.resolve_query_set(qs, 0, 2 * n, resolve, 0)

    try:
        for _ in range(repeat + 1):
            submit_work(label, device, record, buffers, full=True).wait()
            ticks = transfers.download(device, resolve, 0, 16 * n).view(np.uint64)
            for i in range(n):
                times[i].append(max(int(ticks[2 * i + 1]) - int(ticks[2 * i]), 0) / 1e6)
    finally:
        resolve.destroy()
        qs.destroy()
    return [float(np.median(t[1:])) for t in times]
