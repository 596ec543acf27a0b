"""Interpreted models, replayed: a call on numpy inputs of shapes the model has seen runs the
dispatches the interpreter queued for those shapes again, recorded into one command buffer and
submitted at once, instead of walking the graph through Python node by node (about 200 us a
node on a GPU; a transformer has a thousand).

The first call of a shape is a trace: the interpreter runs as usual, and every dispatch it
queues on the device is kept with its pipeline, bind group and buffers (their memory stays the
model's: the intermediates of that shape, about what one interpreted call holds at its end).
It is kept only when it is the whole of the work and depends on the shapes alone:
- no node read a host value from the inputs' data (a shape computed from an integer input);
- nothing was read back or run synchronously during it, and no other thread queued work on
  the device (what fusion held was queued by the trace itself).
(load_onnx refuses random operators.)
Otherwise the call's result stands and the next call traces again (three times at most; a
value read from the inputs stops it at once: ``Model.replayed`` says why). A replay writes the
inputs into the traced input buffers, submits, records the next call's command buffer while the
GPU works, and reads the outputs back. Calls on Buffers, eager mode (``set_eager``) and
``WGCOMPUTE_REPLAY=0`` run the interpreter every time."""

from __future__ import annotations

import os
import threading

import numpy as np

from .. import _lazy, transfers
from ..buffer import Buffer
from . import eager

# input shapes a model keeps a replay for, per device (each holds its intermediates)
KEEP = 4
# traces spoiled by something else than the inputs' values before a model stops tracing
TRIES = 3


def enabled() -> bool:
    return os.environ.get("WGCOMPUTE_REPLAY", "1").strip().lower() not in (
        "0", "false", "no", "off")


class Replay:
    """One traced run of a model on one device for one set of input shapes."""

    def __init__(self, device, capture: _lazy.Capture, inputs: list, outputs: list,
                 checks: tuple):
        self.device = device
        self.checks = checks  # (bool Buffer, [(_, fn -> error)]): the inputs' values checked
        self.capture = capture
        self.inputs = inputs  # the graph inputs' Buffers, as the trace uploaded them
        self.outputs = outputs  # (value, ONNX element type): Buffers, or host arrays
        self.calls = capture.calls()
        self.lock = threading.Lock()
        self.recorded = None  # the next call's command buffer, recorded ahead
        self.closed = False

    def __repr__(self) -> str:
        return f"<Replay of {len(self.capture.ops)} operations, {len(self.calls)} dispatches>"

    def __call__(self, arrays: list) -> list[np.ndarray] | None:
        dev = self.device
        with self.lock:
            if self.closed:
                return None
            for b, a in zip(self.inputs, arrays, strict=True):
                if a.size:
                    b.write(a)
            if self.calls:
                cb, self.recorded = self.recorded, None
                if cb is None:
                    cb = dev.link.one_pass(self.calls)
                dev.submit([cb], fence=False)
            reads = _Reads(dev, self.checks[0], self.outputs)  # queued right behind the work
            if self.calls:
                try:  # while the GPU works: the same dispatches for the next call
                    self.recorded = dev.link.one_pass(self.calls)
                except Exception:  # noqa: BLE001 - recorded (and raising) at the next call
                    self.recorded = None
            return reads.finish(self.checks[1])

    def close(self) -> None:
        with self.lock:
            self.closed = True
            cb, self.recorded = self.recorded, None
            if cb is not None:
                cb.release()
            self.capture.close()
            self.inputs, self.outputs, self.checks = [], [], (None, [])


def run_model(graph, owner, xs: list, default_device, numpy: bool = False) -> list:
    """eager.run_model, replayed where it can be: numpy in, numpy out (module docstring)."""
    if (any(isinstance(x, Buffer) for x in xs) or _lazy.is_eager() or not enabled()
            or _lazy._route.get() is not None):
        return eager.run_model(graph, owner, xs, default_device, numpy)
    device = default_device
    state = device.state_for(owner, eager.EagerState)
    vals = [eager.host_input(graph, i, x, device) for i, x in enumerate(xs)]
    key = _key(device, vals)
    rep = state.replays.get(key)
    if rep is not None:
        outs = rep(vals)
        if outs is not None:  # (None: another thread let go of it meanwhile)
            return outs
    if state.no_replay is not None:
        return eager.interpret(graph, vals, device, state.consts)
    return _trace(graph, state, vals, device, key)


def _key(device, vals: list) -> tuple:
    return device.autotune_generation, tuple((v.shape, v.dtype.str) for v in vals)


def replay_for(graph, owner, xs: list, device) -> Replay:
    """The Replay of ``graph`` for inputs ``xs`` (numpy) on ``device``, made by calling it
    (twice at most); a ModelError says why there is none."""
    from ..errors import ModelError

    for _ in range(TRIES + 1):
        run_model(graph, owner, xs, device, True)
        state = device.state_for(owner, eager.EagerState)
        vals = [eager.host_input(graph, i, x, device) for i, x in enumerate(xs)]
        rep = state.replays.get(_key(device, vals))
        if rep is not None:
            return rep
        if state.no_replay is not None or not enabled():
            break
    raise ModelError(f"{graph.name}: its calls are not replayed: "
                     f"{state.no_replay or 'WGCOMPUTE_REPLAY=0'}")


def _trace(graph, state, vals: list, device, key) -> list:
    batch = _lazy.batch_of(device)
    ctx = eager.Context(graph, device, state.consts)
    env = eager.upload_inputs(ctx, vals)  # before the trace: an upload may be staged
    inputs = [env[name] for name, _, _ in graph.inputs]
    cap = _lazy.Capture(batch)
    if not cap.begin():  # another thread traces on this device
        return _read(eager.declared(eager.evaluate(ctx, env), graph), graph)
    try:
        outs = eager.declared(eager.evaluate(ctx, env), graph)
        flags = _flags(cap.checks)
        cap.end()
    except BaseException:
        cap.end(False)
        cap.close()
        raise
    try:  # the call's own result first: once kept, another thread may replay it
        _check(flags, cap.checks)
        results = _read(outs, graph)
    except BaseException:
        cap.close()
        raise
    why = ctx.data_dependent or cap.why
    if why is None and not all(isinstance(v, (Buffer, np.ndarray)) for v in outs):
        why = "an output is not a tensor"
    if why is not None:
        cap.close()
        state.traces += 1
        if ctx.data_dependent is not None or state.traces >= TRIES:
            state.no_replay = why
        return results
    rep = Replay(device, cap, inputs, list(zip(outs, eager.output_types(graph), strict=True)),
                 (flags, cap.checks))
    for old in [k for k in state.replays if k[0] != key[0] or k == key]:
        state.replays.pop(old).close()  # bound before tuning changed; a concurrent trace's
    state.replays[key] = rep
    while len(state.replays) > KEEP:
        state.replays.pop(next(iter(state.replays))).close()
    return results


def _flags(checks: list):
    """The trace's checks of the data as one u32 Buffer (queued), or None."""
    if not checks:
        return None
    from .. import array_api as xp

    return xp.concat([xp.reshape(xp.astype(b, xp.uint32), (1,)) for b, _ in checks])


def _check(flags, checks: list) -> None:
    """Raise the error of the first check that failed (one read of every check)."""
    if flags is None:
        return
    _raise_failed(flags.to_numpy(), checks)


def _raise_failed(values: np.ndarray, checks: list) -> None:
    for value, (_, error) in zip(values, checks, strict=True):
        e = error(int(value))
        if e is not None:
            raise e


class _Reads:
    """A replayed call's reads: the checks' flags and every output Buffer copied into staging
    in one submission right behind the call's work (no round trip for each read once the work
    is done), the outputs' new arrays faulted in by the device's threads meanwhile."""

    def __init__(self, dev, flags, outputs: list):
        bufs = [v for v, _ in outputs if isinstance(v, Buffer)]
        if flags is not None:
            bufs.insert(0, flags)
        regions, self.skips = [], []
        for b in bufs:
            gpu, offset = b._held_binding("output")
            start = offset // 4 * 4  # copies move whole 4-byte words
            regions.append((gpu, start, offset - start + b.nbytes))
            self.skips.append(offset - start)
        self.bufs, self.outputs = bufs, outputs
        self.has_flags = flags is not None
        self.reads = transfers.Readback.many(dev, regions) if regions else []
        # (an output read from an offset inside a word goes through a scratch array instead)
        self.fresh = [transfers.Fresh(b.shape, b._dt.numpy, dev.workers) if skip == 0
                      else None for b, skip in zip(bufs, self.skips)]
        if self.has_flags:
            self.fresh[0] = None

    def _array(self, i: int) -> np.ndarray:
        b, skip, read, fresh = self.bufs[i], self.skips[i], self.reads[i], self.fresh[i]
        if fresh is not None:
            out = fresh.get()
            read.finish(out.reshape(-1).view(np.uint8))
            return out
        raw = np.empty(read.nbytes, np.uint8)
        read.finish(raw)
        return raw[skip:].view(b._dt.numpy).reshape(b.shape)

    def finish(self, checks: list) -> list[np.ndarray]:
        """Raise the first failed check's error, or return the outputs as numpy."""
        done = 0
        try:
            if self.has_flags:
                done = 1
                _raise_failed(self._array(0), checks)
            results = []
            for v, elem in self.outputs:
                if isinstance(v, Buffer):
                    a = self._array(done)
                    done += 1
                    results.append(eager.host_typed(a, elem))
                else:
                    results.append(np.array(v))
            return results
        finally:
            for read in self.reads[done:]:
                read.drop()


def _read(outs: list, graph) -> list[np.ndarray]:
    return [eager.to_host(v, elem) for v, elem in zip(outs, eager.output_types(graph),
                                                      strict=True)]
