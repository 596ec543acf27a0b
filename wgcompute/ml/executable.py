"""What a Model keeps on each device (its weights, uploaded once, and its bound numpy runs),
its plans made kernel steps, and the pieces of a numpy run (its command buffer, its outputs,
its one submit)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from .. import transfers
from ..buffer import Buffer, from_numpy
from ..errors import CommandFailedError, WgComputeError
from ..runtime import current_device
from .plan import Plan


def _device():
    """The device a model runs on when its inputs are numpy (the one place that asks)."""
    return current_device()


@dataclass
class _Executable:
    """A plan bound for the numpy path: persistent input and output buffers, the bound
    dispatch, a lock (one run at a time uses the buffers); for small runs, their staging kept
    from call to call and the next call's command buffer, recorded ahead."""

    inputs: list
    output: Buffer
    dispatch: object
    lock: threading.Lock
    # (UploadStage, input index, byte offset) per piece of at most CHUNK of each input
    # (kept), or None
    ups: list | None = None
    down: object = None  # DownloadStage (kept), or None
    recorded: object = None  # the next call's finished command buffer, or None
    generation: int = 0  # the device's autotune generation when it was bound

    def drop_staging(self, healthy: bool) -> None:
        """Give the kept staging back (destroyed when a failure left it in doubt) and forget
        the recorded command buffer."""
        cb, self.recorded = self.recorded, None
        if cb is not None:
            cb.release()
        for stage, _, _ in self.ups or ():
            stage.release(healthy)
        if self.down is not None:
            self.down.release(healthy)
        self.ups, self.down = None, None


class _OnDevice:
    """What a Model keeps on one device, registered with it (``Device.state_for``): its
    weights, uploaded once, and its bound numpy runs per plan; closed with the device."""

    def __init__(self, device):
        self.weights: dict[str, Buffer] = {}  # constant name -> its Buffer
        self.exes: dict = {}  # plan key -> _Executable

    def close(self) -> None:
        for exe in list(self.exes.values()):
            with exe.lock:
                exe.drop_staging(True)
            for b in [*exe.inputs, exe.output]:
                b.free()
        self.exes.clear()
        for b in list(self.weights.values()):
            b.free()
        self.weights.clear()


def weights_for(model, device, plan: Plan) -> dict[str, Buffer]:
    """The model's constants this plan reads, uploaded once per device."""
    cache = device.state_for(model, _OnDevice).weights
    for s in plan.storages.values():
        if s.kind == "weight" and s.ref not in cache:
            with model._lock:
                if s.ref not in cache:
                    arr = np.asarray(model.graph.constants[s.ref])
                    arr = arr.astype(np.float16 if model.dtype == "f16" else np.float32)
                    cache[s.ref] = from_numpy(np.ascontiguousarray(arr.reshape(-1)),
                                              label=f"{model.name}:{s.ref}", device=device)
    return cache


def plan_passes(model, plan: Plan, device=None):
    """``Kernel.passes()`` of ``plan`` on ``device``: (temporaries, steps) with the weights
    as Buffers; ``plan.extra_temps`` says which temporary holds each further output."""
    weights = weights_for(model, device or _device(), plan)
    np_dtype = np.float16 if model.dtype == "f16" else np.float32
    temps, ref = [], {}
    for k, size in enumerate(plan.slots):
        temps.append(((max(size, 1),), plan.slot_dtypes[k]))
    extras = {}
    for sid, s in plan.storages.items():
        if s.kind == "act":
            if sid in plan.slot_of:
                ref[sid] = f"tmp{plan.slot_of[sid]}"
        elif s.kind == "input":
            ref[sid] = f"in{s.ref}"
        elif s.kind == "out":
            ref[sid] = "out"
        elif s.kind == "weight":
            ref[sid] = weights[s.ref]
        elif s.kind == "const":
            ref[sid] = f"tmp{len(temps)}"
            temps.append(np.ascontiguousarray(np.asarray(s.ref, np_dtype).reshape(-1)))
        elif s.kind == "extra":
            ref[sid] = f"tmp{len(temps)}"
            extras[sid] = len(temps)
            temps.append(((max(s.size, 1),), "f32"))
    steps = []
    for st in plan.steps:
        params = dict(st.params)
        params["shapes"] = tuple(tuple(t.shape) for t in [*st.ins, st.out])
        steps.append((st.kernel, [ref[t.sid] for t in st.ins], ref[st.out.sid], params))
    plan.extra_temps = extras
    return temps, steps


def record_run(exe: _Executable, pads) -> object:
    """The finished command buffer of one numpy run: staging pieces -> inputs, the
    model's dispatches in one compute pass, output -> staging."""
    enc = exe.output.device.link.encoder()
    for (stage, i, offset), padded in zip(exe.ups, pads, strict=True):
        stage.record(enc, exe.inputs[i].gpu_buffer, padded, offset)
    calls = exe.dispatch.raw_calls()
    if calls:
        enc.record_calls(calls)
    exe.down.record(enc, exe.output.gpu_buffer)
    return enc.finish()


def collect(plan: Plan, exe: _Executable) -> list[np.ndarray]:
    outs = []
    extras = plan.extra_temps
    for i, o in enumerate(plan.outputs):
        if o[0] == "const":
            outs.append(np.asarray(o[1]))
        elif i == 0:
            outs.append(exe.output.to_numpy().reshape(o[2]))
        else:
            t = exe.dispatch.temps[extras[o[1]]]
            outs.append(t.to_numpy()[:math.prod(o[2])].reshape(o[2]))
    return outs


def run_one_submit(exe: _Executable, arrays, keep: bool, label: str) -> np.ndarray:
    """Upload, run and read back in ONE command buffer, one submit and one wait: the
    inputs go through mapped upload staging, the output into mapped read staging. (The
    general path writes, runs and reads with a submission each: three round trips.) An
    input of any size goes up in pieces of at most CHUNK, each its own staging copied to
    its offset: the staging size every large transfer uses, which the pool keeps, not a
    staging per input size (a 256 MB buffer for 154 MB).

    A small run keeps its staging and, while the GPU works, records and finishes the
    command buffer of the next call (the same copies and dispatches; encoding and
    finishing ~50 of them is the largest host cost of a batch of one): the next call then
    only copies its input in, submits and waits. ``keep``: keep the staging (a small run);
    ``label`` names the run in errors."""
    dev = exe.output.device
    healthy = False
    bufs = [*exe.inputs, exe.output]
    held = []
    try:
        for b in bufs:
            b._pin(label, ": buffer")
            held.append(b)
        if exe.ups is None:
            exe.ups = []  # built in place: a failure part way releases what it holds
            step = transfers.CHUNK
            for i, a in enumerate(arrays):
                for offset in range(0, a.nbytes, step):
                    stage = transfers.UploadStage(dev, min(step, a.nbytes - offset))
                    exe.ups.append((stage, i, offset))
            exe.down = transfers.DownloadStage(dev, exe.output.nbytes)
        flat = [a.reshape(-1).view(np.uint8) for a in arrays]
        # fill() waits for the staging's re-map after the previous call; a lost device
        # fails that wait (or, on the first fill, a probe) before the mapped range is used
        pads = [stage.fill(flat[i][offset:offset + stage.nbytes])
                for stage, i, offset in exe.ups]
        cb, exe.recorded = exe.recorded, None
        if cb is None:
            cb = record_run(exe, pads)
        dev.submit([cb], fence=False)
        for stage, _, _ in exe.ups:
            stage.remap()
        exe.down.map()
        if keep:
            try:
                exe.recorded = record_run(exe, pads)
            except Exception:  # noqa: BLE001 - recorded again (and raising) next call
                exe.recorded = None
        exe.down.wait()
        out = np.empty(exe.output.nbytes, np.uint8)
        exe.down.copy_into(out)
        healthy = True
    except WgComputeError:
        raise
    except Exception as e:  # validation error, out of memory, device lost
        if not dev.alive:
            raise dev.wrap(e, label) from e
        raise CommandFailedError(f"{label} failed: {e}", e) from e
    finally:
        if not (keep and healthy):
            exe.drop_staging(healthy)
        for b in held:
            b._release()
    return out.view(np.float32)
