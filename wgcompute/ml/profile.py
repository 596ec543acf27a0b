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
    import wgpu

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
    dev = device.gpu_device
    qs = dev.create_query_set(label=f"{model.name}-profile", type=wgpu.QueryType.timestamp,
                              count=2 * n)
    resolve = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                | wgpu.BufferUsage.COPY_SRC)
    times = [[] for _ in range(n)]
    try:
        with exe.lock:
            for buf, a in zip(exe.inputs, xs, strict=True):
                buf.write(a.reshape(buf.shape))
            for _ in range(repeat + 1):
                def record(enc):
                    for i, part in enumerate(parts):
                        cpass = enc.begin_compute_pass(timestamp_writes={
                            "query_set": qs, "beginning_of_pass_write_index": 2 * i,
                            "end_of_pass_write_index": 2 * i + 1})
                        part.encode(cpass)
                        cpass.end()
                    enc.resolve_query_set(qs, 0, 2 * n, resolve, 0)

                submit_work(f"profile {model.name}", device, record,
                            [*exe.inputs, exe.output], full=True).wait()
                ticks = transfers.download(device, resolve, 0, 16 * n).view(np.uint64)
                for i in range(n):
                    times[i].append(max(int(ticks[2 * i + 1]) - int(ticks[2 * i]), 0) / 1e6)
    finally:
        resolve.destroy()
    return _trace(model, [{"layer": st.label, "kernel": st.kernel.name,
                           "ms": float(np.median(t[1:]))}
                          for st, t in zip(plan.steps, times, strict=True)], trace, device)


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
    import wgpu

    from .replay import replay_for

    device, trace, xs = _arguments(model, inputs, repeat, trace)
    rep = replay_for(model.graph, model._interpreter, xs, device)
    rows = []
    dev = device.gpu_device
    with rep.lock:
        ops = [op for op in rep.capture.ops if op[0]]
        for start in range(0, len(ops), _OPS_A_SUBMIT):
            part = ops[start:start + _OPS_A_SUBMIT]
            rows += _time_ops(device, dev, wgpu, part, repeat, f"{model.name}-profile")
    return _trace(model, rows, trace, device)


def _time_ops(device, dev, wgpu, ops: list, repeat: int, label: str) -> list[dict]:
    n = len(ops)
    qs = dev.create_query_set(label=label, type=wgpu.QueryType.timestamp, count=2 * n)
    resolve = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                | wgpu.BufferUsage.COPY_SRC)
    times = [[] for _ in range(n)]
    try:
        for _ in range(repeat + 1):
            def record(enc):
                for i, op in enumerate(ops):
                    cpass = enc.begin_compute_pass(timestamp_writes={
                        "query_set": qs, "beginning_of_pass_write_index": 2 * i,
                        "end_of_pass_write_index": 2 * i + 1})
                    device.link.record_wgpu_pass(cpass, op[0])
                    cpass.end()
                enc.resolve_query_set(qs, 0, 2 * n, resolve, 0)

            buffers = [b for op in ops for b in op[2]]
            submit_work(label, device, record, buffers, full=True).wait()
            ticks = transfers.download(device, resolve, 0, 16 * n).view(np.uint64)
            for i in range(n):
                times[i].append(max(int(ticks[2 * i + 1]) - int(ticks[2 * i]), 0) / 1e6)
    finally:
        resolve.destroy()
        qs.destroy()
    return [{"layer": op[3].split(": ")[0], "kernel": op[3].split(": ", 1)[-1],
             "ms": float(np.median(t[1:]))} for op, t in zip(ops, times, strict=True)]
