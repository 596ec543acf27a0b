"""Lazy execution: each device's open command batch. Operators and the array namespace record
their dispatches here and return at once; Device.submit flushes the batch first, so the queue
runs work in program order. ``set_eager(True)`` / WGCOMPUTE_EAGER=1 makes every op wait."""

from __future__ import annotations

import contextvars
import os
import sys
import threading

from ._args import check_buffer_list
from .buffer import Buffer
from .commands import bound, prepare_output, run_blocking
from .errors import ArgumentError, CommandFailedError, WgComputeError
from .kernels import Kernel, registry
from .runtime import Device, open_devices

# Dispatches a batch holds before it is submitted by itself: the GPU then runs them while
# Python records the next ones. Measured on lavapipe (benchmarks/bench_lazy.py): 16 to 256
# cost the same per op within noise; 64 keeps the holds (pinned results) of one batch small.
MAX_OPS = 64
# A time bound as well (a batch submitted once its first op had waited 100-200 us, so the GPU
# runs a dependent chain while Python records the rest) was slower on an H200: the 256x256
# matmul / transpose chain took 41.9 us an op at 64 ops a batch, 51.0-65.7 with the bound,
# 52.4 submitting every op (pinned, 6 alternating rounds): a submission costs the host more
# than the GPU's head start gives back.
_PKG = os.path.dirname(os.path.abspath(__file__))
_eager = [os.environ.get("WGCOMPUTE_EAGER", "").strip().lower() in ("1", "true", "yes", "on")]
# Where automatic fusion hooks in. "enqueue": fn(kernel, inputs, output, params, label) called
# by enqueue() before it binds (not in eager mode): a Buffer return means the hook took the op
# (held in batch.held, or queued its own way through bind_and_queue), None lets it be bound
# and queued. "flush": fn(batch) called before the batch is recorded (outside its lock): it
# queues what it holds (enqueue / Batch.enqueue). "learn": fn((thread id, kernel, inputs,
# output, params)) sees each op enqueue() is given while _fusion_quick plans a signature.
hooks: dict = {"enqueue": None, "flush": None, "learn": None}
# The batch of the innermost `with stream:` block (streams.py): ops on its device go there.
_route: contextvars.ContextVar = contextvars.ContextVar("wgcompute_batch", default=None)


def set_eager(on: bool = True) -> None:
    """``True``: every operator and array function waits for its GPU work (errors raise at
    the call; for debugging); ``False``: they queue it (the default)."""
    if not isinstance(on, bool):
        raise ArgumentError(f"on: expected True or False, got {on!r}")
    if on:
        for dev in open_devices():
            dev.synchronize()
    _eager[0] = on


def is_eager() -> bool:
    return _eager[0]


# a module's __file__ -> whether it is wgcompute's: a look-up per frame (a str caches its
# hash). Frames are told apart by their module, not their code object: reading a frame's
# f_code is an audited event, and an audit hook (filelock's, on Python 3.12+) ran for every
# frame of every queued op (a quarter of a dependent chain's host time).
_OURS: dict = {None: False}


def call_site(skip: int = 0) -> str:
    """file:line of the first frame outside wgcompute (the user's call). ``skip``: how many
    frames past the caller's are wgcompute's for sure (its callers'), not looked at."""
    f = sys._getframe(1 + skip)
    ours = _OURS
    while f is not None:
        path = f.f_globals.get("__file__")
        inside = ours.get(path)
        if inside is None:
            if len(ours) > 4096:
                ours.clear()
                ours[None] = False
            inside = ours[path] = isinstance(path, str) and path.startswith(_PKG)
        if not inside:
            break
        f = f.f_back
    if f is None:
        return "?"
    return f"{path if type(path) is str else f.f_code.co_filename}:{f.f_lineno}"


class Op:
    """One queued dispatch: its native calls, what keeps their handles alive, its buffers."""

    __slots__ = ("label", "calls", "keep", "buffers", "site")

    def __init__(self, label: str, calls, keep, buffers, site: str):
        self.label = label
        self.calls = calls
        self.keep = keep
        self.buffers = buffers
        self.site = site


class Batch:
    """A device's open batch of dispatches, recorded into ONE compute pass when flushed. Its
    buffers stay held (a free() is deferred) until the submission's fence completes."""

    def __init__(self, device: Device):
        self.device = device
        self.lock = threading.RLock()  # reentrant: a loss found while submitting drops the batch
        self.ops: list[Op] = []
        self.held: list = []  # ops a hook holds back (fusion); non-empty, a submit flushes
        self.streams: list = []  # batches of open `with stream:` blocks on this device
        self.error: WgComputeError | None = None  # raised at the next sync
        self.capture: Capture | None = None  # a graph trace recording this batch's ops
        self.fusion = None  # the enqueue hook's state for this batch (fusion's held DAG)

    def due(self) -> bool:
        """Whether a submission goes through this batch first: ops queued or held, open
        `with stream:` blocks, or a kept error to raise."""
        return bool(self.ops or self.held or self.streams or self.error is not None)

    def enqueue(self, op: Op) -> None:
        dev = self.device
        held = []
        try:
            for b in op.buffers:  # hold first, then check (a free() racing this defers)
                b._pin(op.label, ": buffer")
                held.append(b)
            with self.lock:
                if not dev.alive:
                    dev.check(op.label)
                ops = self.ops
                ops.append(op)
                full = len(ops) >= MAX_OPS
                if self.capture is not None:
                    self.capture.saw(op)
        except BaseException:
            for b in held:
                b._release()
            raise
        if full:
            self.flush()

    def flush(self) -> None:
        """Submit the open batch (through Device.submit); an error of its work is kept for
        the next sync."""
        self._materialize()
        if self.ops:  # the last flush's fence woke no poll thread: its callbacks fire here
            self.device.submitter.reap()
        with self.lock:
            if self.ops:
                self._submit(None, False)

    def flush_waited(self) -> tuple[list, object]:
        """``flush`` for a caller that waits for the GPU right after (synchronize): the batch
        goes without a Fence of its own, recorded and submitted as run_kernel's pass is.
        Returns (its ops, whose buffers ``let_go`` releases once that wait ended; what
        ``submitter.wait_sync`` polls for, or None where the caller arms its own). An error
        of the work is kept, as flush's."""
        self._materialize()
        if self.ops:
            self.device.submitter.reap()
        with self.lock:
            ops, dev = self.ops, self.device
            if not ops:
                return [], None
            try:  # one native sequence, armed for the caller's wait
                box = dev.submit_pass_sync([c for op in ops for c in op.calls], batch=True)
            except Exception:  # noqa: BLE001 - refused or lost (nothing submitted): the
                pass  # general path below finds the refused op, or the loss, and keeps it
            else:
                self.ops = []
                return ops, box
            kept: list = []
            self._submit(None, False, lambda cbs, _f: dev.submit(
                cbs, batch=True, fence=False, poll=False), kept)
            return kept, None

    def let_go(self, ops: list, done: bool) -> None:
        """Release what ``flush_waited`` submitted: now (``done``: the GPU finished it), or
        once the GPU has (a wait that gave up)."""
        if not ops:
            return
        if done:
            release(ops)
        else:
            self.device.submitter.fence_for_all().add_callback(lambda _f: release(ops))

    def submit_after(self, command_buffers, fence: bool, submit, held: bool = True):
        """Device.submit's part: a kept error raises; else the open batch and
        ``command_buffers`` go in ONE queue submission, the batch first (``submit(cbs)`` ->
        Fence). Returns that Fence (None with ``fence=False``). ``held=False``: ops held by
        automatic fusion stay held (``command_buffers`` touch none of their buffers)."""
        self._materialize(held)
        with self.lock:
            error, self.error = self.error, None
            if error is not None:
                raise error
            f = self._submit(command_buffers, True, submit) if self.ops else \
                submit(command_buffers, True)
        if self.error is not None:  # this batch failed validation: its error first
            error, self.error = self.error, None
            raise error
        return f if fence else None

    def _materialize(self, held: bool = True) -> None:
        """What is queued elsewhere goes first: held ops (a hook's; unless ``held`` is
        False), and the ops of open `with stream:` blocks, which their streams' threads submit
        (waited for)."""
        hook = hooks["flush"]
        if hook is not None and self.held and held:
            hook(self)
        if self.streams:
            me = threading.current_thread()
            for sb in list(self.streams):
                if sb.thread() is not me:
                    sb.flush()
                    sb.wait_submitted()

    def _submit(self, after, raises: bool, submit=None, kept: list | None = None):
        """Record and submit the open batch (with the lock held), ``after`` (command buffers)
        in the same submission; the ops' buffers are let go once it completes (``kept``: the
        ops submitted go there instead, the caller lets them go). Returns its Fence. A
        refused op's error is kept (and ``after`` not submitted); a failed submit raises when
        ``raises``, else is kept. The ops stay in ``self.ops`` until submitted: a submit in
        another thread that sees them waits for the lock, so it comes after them in the
        queue (they are taken out before anything that may drop the batch)."""
        ops = self.ops
        dev = self.device
        # no native call on a destroyed device (a closing one still takes its queued work)
        if dev.submitter.dead is not None or dev.link.destroyed():
            self.ops = []
            release(ops)
            try:
                dev.check(ops[0].label)
            except WgComputeError as e:
                if raises:
                    raise
                self._keep(e)
            return None
        try:
            cb = dev.link.one_pass([c for op in ops for c in op.calls])
        except Exception as e:  # validation: find the op, run those before it
            self.ops = []
            ops, after = self._culprit(ops, e), None
            try:
                cb = dev.link.one_pass([c for op in ops for c in op.calls]) if ops else None
            except Exception:  # noqa: BLE001 - the error is already kept
                cb = None
        cbs = [cb] if cb is not None else []
        if after:
            cbs.extend(after)
        fence = None
        try:
            if cbs:
                fence = submit(cbs, True) if submit is not None else dev.submit(cbs, batch=True,
                                                                                  poll=False)
        except Exception as e:
            self.ops = []
            release(ops)
            if raises:
                raise
            self._keep(e if isinstance(e, WgComputeError) else dev.wrap(e, ops[0].label))
            return None
        self.ops = []
        if kept is not None:
            kept.extend(ops)
        elif fence is None:
            release(ops)
        else:
            fence.add_callback(lambda _f, ops=ops: release(ops))
        return fence

    def _culprit(self, ops: list[Op], error: Exception) -> list[Op]:
        """The ops before the first one WebGPU refuses; that op's error is kept."""
        dev = self.device
        i = 0
        for j, op in enumerate(ops):
            try:
                dev.link.discard(dev.link.one_pass(op.calls))
            except Exception as e:  # noqa: BLE001
                i, error = j, e
                break
        op = ops[i]
        later = len(ops) - i - 1
        rest = f" (and the {later} operation(s) queued after it did not run)" if later else ""
        err = CommandFailedError(f"run_kernel {op.label} (queued at {op.site}) failed{rest}: "
                                 f"{error}", error)
        if not dev.alive or "lost" in str(error).lower():
            err = dev.wrap(error, f"run_kernel {op.label} (queued at {op.site})")
        self._keep(err)
        release(ops[i:])
        return ops[:i]

    def _keep(self, error: WgComputeError) -> None:
        if self.error is None:
            self.error = error

    def before_submit(self) -> None:
        """Submit the open batch now, then raise a kept error (once): Device.flush, and
        Device.submit before a synchronous run."""
        if self.ops or self.held or self.streams:
            self.flush()
        error, self.error = self.error, None
        if error is not None:
            raise error

    def drop(self) -> None:
        """The device was lost: the open batch will never run; let go of its buffers."""
        with self.lock:
            ops, self.ops = self.ops, []
            self.held = []
        for sb in list(self.streams):
            sb.drop()
        release(ops)


class Capture:
    """The dispatches one thread queues on a device while a graph is traced (ml's replayed
    models), kept to be recorded again: their native calls, what keeps the handles alive,
    and a hold on every buffer they touch (its memory stays theirs until ``close``).

    The trace is only good if those dispatches are ALL its work: ``why`` says what spoiled it
    (another thread queuing on the device, or work submitted outside the batch: a read back,
    a synchronous run; a staged upload does not, its buffer keeps what it wrote); then
    ``close`` and run without it."""

    def __init__(self, batch: Batch):
        self.batch = batch
        self.owner = threading.get_ident()
        # (calls, keep, buffers, label) of each op (Op.keep is let go)
        self.ops: list[tuple] = []
        self.why: str | None = None
        # checks of the data, read after each run: (flag Buffer, fn(its value) -> the error
        # to raise, or None)
        self.checks: list[tuple] = []
        self.tag = ""  # what the ops queued now are part of (an ONNX node), for profiles

    def begin(self) -> bool:
        """Start recording this thread's ops on the batch; False if another trace records."""
        with self.batch.lock:
            if self.batch.capture is not None:
                return False
            self.batch.capture = self
        return True

    def end(self, ok: bool = True) -> None:
        """Stop recording (``ok``: once what fusion holds is queued, and seen, first)."""
        try:
            if ok:
                self.batch.flush()
        finally:
            with self.batch.lock:
                self.batch.capture = None

    def saw(self, op: Op) -> None:
        if threading.get_ident() != self.owner:
            self.spoil("another thread queued work on the device during the trace")
            return
        for b in op.buffers:  # held beyond the op's own hold: replays write them again
            b._pin(op.label, ": buffer")
        shapes = ", ".join("x".join(map(str, b.shape)) or "()" for b in op.buffers)
        self.ops.append((op.calls, op.keep, op.buffers, f"{self.tag}: {op.label} [{shapes}]"))

    def saw_submit(self) -> None:
        """Device.submit of other work: the owner's (a read, a synchronous run) spoils it."""
        if threading.get_ident() == self.owner:
            self.spoil("work outside the queued operators ran during the trace (a read back "
                       "or a synchronous run)")

    def spoil(self, why: str) -> None:
        if self.why is None:
            self.why = why

    def defer(self, flag: Buffer, error) -> None:
        """A check of the data whose ``flag`` (a one-element Buffer the queued work writes)
        is read once the run is submitted: ``error(value)`` -> the error to raise, or None."""
        self.checks.append((flag, error))

    def calls(self) -> list:
        return [c for op in self.ops for c in op[0]]

    def close(self) -> None:
        ops, self.ops = self.ops, []
        for _, _, buffers, _ in ops:
            for b in buffers:
                b._release()


def tracing(dev: Device) -> Capture | None:
    """The trace this thread runs on ``dev`` (its checks of the data are deferred), or None."""
    b = dev.lazy
    cap = b.capture if b is not None else None
    return cap if cap is not None and cap.owner == threading.get_ident() else None


def release(ops) -> None:
    for op in ops:
        for b in op.buffers:
            b._release()
        op.keep = None


_batches_lock = threading.Lock()


def batch_of(dev: Device) -> Batch:
    b = dev.lazy
    if b is None:
        with _batches_lock:
            b = dev.lazy
            if b is None:
                b = dev.lazy = Batch(dev)
    return b


def enqueue(kernel, inputs, output: Buffer | None = None, params=None,
            label: str | None = None) -> Buffer:
    """Bind one kernel run (the checks raise here) and queue it on its device's batch;
    returns the output at once (its contents are ready for whatever reads it). Eager mode
    (set_eager): run and wait, as run_kernel."""
    k = kernel if isinstance(kernel, Kernel) else registry.get(kernel)
    if type(inputs) is not list and type(inputs) is not tuple:
        check_buffer_list(inputs, f"{k.name}: ")
    if hooks["learn"] is not None:  # (automatic fusion's short path learns a signature)
        hooks["learn"]((threading.get_ident(), k, inputs, output, params))
    hook = hooks["enqueue"]
    if hook is not None and not _eager[0] and (output is None or isinstance(output, Buffer)):
        taken = hook(k, inputs, output, params, label)
        if taken is not None:
            return taken
    return bind_and_queue(k, inputs, output, params, label)


def bind_and_queue(k: Kernel, inputs, output: Buffer | None, params, label: str | None
                   ) -> Buffer:
    """``enqueue`` past its hook: bind and queue (or run, in eager mode) as given."""
    out = prepare_output(k, inputs, output, params)
    d = bound(k, inputs, out, params)
    name = label or k.name
    queue_calls(name, d.device, d.raw_calls(), d, [*inputs, out], f"run_kernel {name}",
                site=1)
    return out


def queue_calls(label: str, dev: Device, calls, keep, buffers, eager_label: str | None = None,
                held_first: bool = False, site: int = 0) -> None:
    """Native ``calls`` (``keep`` holds their handles) queued as one operation on ``dev``'s
    open batch, or the open `with stream:` block's; in eager mode run and waited for.
    ``held_first``: what automatic fusion holds there is queued before them (for calls that
    did not pass its hook, which orders the rest)."""
    if _eager[0]:
        run_blocking(eager_label or label, dev, buffers, calls=calls)
        return
    if not calls:
        return
    batch = _route.get()
    if batch is None or batch.device is not dev:
        batch = dev.lazy
        if batch is None:
            batch = batch_of(dev)
    flush = hooks["flush"]
    if held_first and flush is not None and batch.held:
        flush(batch)
    batch.enqueue(Op(label, calls, keep, buffers, call_site(1 + site)))


def flush(dev: Device) -> None:
    """Submit ``dev``'s open batch now (the GPU starts on it); nothing waits."""
    b = dev.lazy
    if b is not None:
        b.flush()


def route(batch: Batch):
    """Queue this context's ops on ``batch``'s device into ``batch`` (a `with stream:`
    block's); returns the token for ``unroute``."""
    return _route.set(batch)


def unroute(token) -> None:
    _route.reset(token)
