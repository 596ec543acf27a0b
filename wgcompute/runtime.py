"""Devices: one ``Device`` per logical GPU device owns everything wgcompute keeps for it (adapter,
limits, submitter and fences, commands, pipeline and bind caches, staging pools, host threads,
autotune choices, memory counts), can be closed, and survives as an object when the GPU is lost.
Also ``device()`` (an adapter's open device), the default and the current device (``with d:``, a
context variable) and ``synchronize``; _adapters.py finds adapters."""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections import OrderedDict
from functools import partial

import wgpu

from . import _adapters, _native, clocks
from ._adapters import BACKENDS, WANTED_FEATURES, AdapterInfo, adapters, devices  # noqa: F401
from ._args import check_timeout
from ._device_parts import DeviceParts, held_as
from ._device_parts import current as _current
from ._pools import MemoryPool, StagingPools, Workers
from ._queue import LOSS, Submitter, wait
from ._version import __version__
from .errors import ArgumentError, DeviceError, DeviceLostError

_CLOSE_WAIT_S = 30.0
# close() waits at most this long for threads recording work on the device to submit it (a
# recording takes microseconds; a thread stopped inside one, e.g. in a debugger, must not keep
# the device open for ever)
_RECORDING_WAIT_S = 5.0
log = logging.getLogger("wgcompute")


# -- the Device --------------------------------------------------------------------------------

_open: dict[int, Device] = {}  # id -> every open Device (closed and lost ones leave)
_open_lock = threading.Lock()
_ordinals = iter(range(1 << 62))


class Device(DeviceParts):
    """A logical GPU device and everything wgcompute keeps for it.

    ``wgc.device(...)`` hands out an adapter's open device (the default device is one), or a
    new one (``new=True``; ``Device.from_wgpu`` adopts one). Buffers, commands, pipelines,
    streams and surfaces belong to one device. ``with d:`` makes it the current device for a
    block. ``close()`` waits for the device's work, releases every GPU object and stops its
    threads. A lost device fails its pending commands with DeviceLostError; its objects then
    raise it."""

    def __init__(self, adapter, gpu_device, *, owned: bool = True, hold_clocks=None):
        self.ordinal = next(_ordinals)
        self.adapter = adapter
        self.gpu_device = gpu_device
        self.features = frozenset(gpu_device.features)
        self.limits = dict(gpu_device.limits)
        self.name = adapter.info["device"]
        self.backend = adapter.info["backend_type"]
        self.is_gpu = _adapters._is_gpu(adapter.info)
        self._owned = owned
        self.shared = False  # the device wgc.device() hands out for its adapter (device())
        self.label = f"device {self.ordinal} ({self.name}, {self.backend})"
        self.link = _native.link(gpu_device)
        self.submitter = Submitter(self.link, self.label)
        self.staging = StagingPools(gpu_device, self.link, self.submitter, self.label,
                                    self.wrap)
        self.workers = Workers(self.label)
        # freed array results (operators' outputs) kept for reuse by size class
        self.memory_pool = MemoryPool(gpu_device, self.label,
                                      adapter_type=adapter.info["adapter_type"])
        self.memory_pool.on_release = self._forget_binds
        self.staging.make_room = self.memory_pool.release
        # What the upper layers cache for this device (they fill these):
        self.pipelines: dict = {}  # PipelineKey -> compiled pipeline (kernels)
        self.pipelines_lock = threading.Lock()
        self.binds: OrderedDict = OrderedDict()  # bound kernel runs (commands)
        self.binds_lock = threading.Lock()
        self.commands: dict = {}  # id -> pending Command
        self.finished: OrderedDict = OrderedDict()  # id -> finished command's record
        self.extras: dict = {}  # other per-device caches (present pipelines, ...)
        self.autotune: dict = {}  # problem -> the tile configuration chosen on this device
        self.autotune_generation = 0  # grows when background tuning changed a choice
        self.stats = {"pipelines_created": 0, "bind_groups_created": 0,
                      "uniform_buffers_created": 0, "buffers_created": 0}
        self.alive = True  # False once lost or closed: every object of it then refuses work
        self.dead: DeviceError | None = None
        self.closed = False
        self.submitter.probe = self._probe
        self._buffers: weakref.WeakSet = weakref.WeakSet()  # live Buffers (close frees them)
        self._init_memory()  # memory_stats' counts (_device_parts)
        self._closables: weakref.WeakSet = weakref.WeakSet()  # streams, maps, pipelines...
        # weakref(owner) -> the state it keeps on this device (state_for): never keyed by id()
        self._states: dict = {}
        self._lock = threading.RLock()
        # One entry per thread between its check of the device and its submit (recording a
        # command buffer from bind groups it names by handle): close() releases nothing while
        # one is there. list.append / list.pop are atomic: no lock on the hot path.
        self._recording: list = []
        self.lazy = None  # the open batch of queued dispatches (wgcompute._lazy makes it)
        try:  # held by default where it can be (clocks.Keeper says how)
            self._clocks = clocks.Keeper(adapter.info, self.name, hold_clocks, self.ordinal)
        except clocks.ClocksUnavailable as e:
            raise DeviceError(f"hold_clocks: cannot hold {self.name}'s clocks: {e}") from None
        with _open_lock:
            _open[id(self)] = self

    @classmethod
    def from_wgpu(cls, gpu_device, adapter=None) -> Device:
        """Adopt a wgpu GPUDevice that a user or pygfx already has: wgcompute computes on it
        beside them. close() releases wgcompute's objects but leaves the device itself to its
        owner. (wgcompute's poll policy replaces wgpu-py's blocking poll thread function.)"""
        if not isinstance(gpu_device, wgpu.GPUDevice):
            raise ArgumentError(f"gpu_device: expected a wgpu.GPUDevice, got "
                                f"{type(gpu_device).__name__}")
        adapter = adapter if adapter is not None else gpu_device.adapter
        _adapters._one_gl_device(adapter, _open)
        return cls(adapter, gpu_device, owned=False)

    # -- the GPU's clocks -----------------------------------------------------------------------
    def clocks(self) -> list:
        """The clocks of the GPU behind this device now (NVIDIA, through NVML: ``pip install
        nvidia-ml-py``): a ClockReading per matching GPU. Raises DeviceError where they
        cannot be read."""
        try:
            return clocks.read(self.adapter.info)
        except clocks.ClocksUnavailable as e:
            raise DeviceError(f"clocks: {e}") from None

    @property
    def clocks_held(self) -> bool:
        return self._clocks.held

    def after_wait(self) -> None:
        """Called when a wait for this device's work ended (the GPU just ran it): see
        clocks.Keeper.after_wait (a warning, once, when the driver had the GPU idling)."""
        if self._clocks.watch:
            self._clocks.after_wait()

    # -- what it is ------------------------------------------------------------------------------
    @property
    def queue(self):
        return self.gpu_device.queue

    def submit(self, command_buffers, *, fence: bool = True, sync: bool = False,
               batch: bool = False, upload: bool | str = False, poll: bool = True):
        """The one way work reaches this device's queue. Returns the submission's Fence (None
        with ``fence=False``: staging copies whose buffer map is their completion), or with
        ``sync=True`` (one command buffer) what ``submitter.wait_sync`` polls for from this
        thread. Never waits for the GPU. The open batch of queued operators goes first
        (queue order is program order), and an error of its work raises here; ``batch``:
        this is that batch; ``upload``: staging copies into a buffer (a trace of a replayed
        model may hold them: the buffer keeps what they wrote), "fresh" into a new one (ops
        held by automatic fusion stay held: none can touch it); ``poll=False``: the poll
        thread is not woken for it: the caller polls for it right away (a synchronize, a
        read) or the batch's next flush does (Submitter.reap)."""
        lazy = self.lazy
        if lazy is not None and not batch:
            if not upload and lazy.capture is not None:
                lazy.capture.saw_submit()
            if lazy.due():
                if not sync:  # one submission: the batch, then these
                    submit = self.submitter.submit if poll else partial(self.submitter.submit,
                                                                        poll=False)
                    return lazy.submit_after(command_buffers, fence, submit,
                                             held=upload != "fresh")
                lazy.before_submit()
        if sync:
            (cb,) = command_buffers
            return self.submitter.submit_sync(cb)
        return self.submitter.submit(command_buffers, fence, poll)

    def submit_pass_sync(self, calls, batch: bool = False):
        """``submit((one_pass(calls),), sync=True)`` in one native sequence (run_kernel's
        path): the open batch goes first (``batch``: these are that batch's calls); returns
        what ``submitter.wait_sync`` polls for."""
        lazy = self.lazy
        if lazy is not None and not batch:
            if lazy.capture is not None:
                lazy.capture.saw_submit()
            if lazy.due():
                lazy.before_submit()
        return self.submitter.submit_pass_sync(calls)

    def has(self, feature: str) -> bool:
        return feature in self.features

    def limit(self, name: str) -> int:
        return int(self.limits[name])

    def info(self) -> dict:
        """name, vendor, backend, adapter_type, gpu, driver, versions, native calls, features,
        limits."""
        info = self.adapter.info
        return {
            "name": info["device"],
            "vendor": _adapters._vendor(info),
            "backend": info["backend_type"],
            "adapter_type": info["adapter_type"],
            "gpu": self.is_gpu,
            "driver": info.get("description", ""),
            "version": __version__,
            "wgpu_version": wgpu.__version__,
            "native": _native.MODE,
            "native_note": _native.NOTE,
            "clocks_held": self.clocks_held,
            "state": self.state,
            "features": sorted(self.features),
            "limits": dict(self.limits),
        }

    @property
    def state(self) -> str:
        """"open", "lost" or "closed"."""
        if self.closed:
            return "closed"
        return "open" if self.alive else "lost"

    def __repr__(self) -> str:
        state = "" if self.alive else f" {self.state}"
        return f"<wgc.Device {self.ordinal} {self.name!r} {self.backend}{state}>"

    # -- liveness --------------------------------------------------------------------------------
    def check(self, argument: str = "device") -> None:
        """Raise DeviceLostError / DeviceError if this device can no longer be used. Probes
        the device if wgpu reported a loss since the last check, or its GPUDevice was
        destroyed."""
        if self.submitter.seen_epoch != LOSS.epoch or self.link.destroyed():
            self._probe()
        if not self.alive:
            raise type(self.dead)(f"{argument}: {self.dead}")

    def _probe(self) -> None:
        """Find out whether the GPU device is gone (a 4-byte buffer cannot be made on a lost
        device): after wgpu reported a loss, after a native error, at a batch stage's first
        fill, and every quarter second of a long wait (a lost device's fences may never
        complete). (An empty command buffer finished and never submitted would tell as well,
        but wgpu-native kept ~90 KB for each while a staging buffer was mapped.)"""
        self.submitter.seen_epoch = LOSS.epoch
        if not self.alive:
            return
        if self.link.destroyed():  # GPUDevice.destroy() from outside: no native call after it
            self.mark_lost("its wgpu device was destroyed")
            return
        try:
            self.gpu_device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_DST).destroy()
        except Exception as e:
            if _native.is_lost_error(e):
                self.mark_lost(str(e).strip().splitlines()[-1].strip())

    def probe_native(self) -> None:
        """Raise DeviceLostError if the GPU device is gone: for the few places where
        wgpu-native would abort the process rather than report an error."""
        self._probe()
        self.check()

    def mark_lost(self, reason: str) -> None:
        """The GPU is gone: fail every pending command with DeviceLostError, refuse later work
        on this device's objects; the default device is opened afresh on next use."""
        with self._lock:
            if not self.alive:
                return
            # dead first: a check() that sees alive False raises type(self.dead)
            self.dead = DeviceLostError(
                f"{self.label} was lost ({reason}); its buffers, pipelines and streams can no "
                f"longer be used: open a new device (the default one reopens by itself)")
            self.alive = False
        self.submitter.kill(self.dead)
        self._end_batch(run=False)
        _forget(self)
        self._drop_caches()

    def wrap(self, error: BaseException, what: str) -> DeviceError:
        """A native error raised while doing ``what`` on this device, as a WgComputeError:
        DeviceLostError if the device turns out to be lost (it is probed: errors are rare, and
        a loss is often only reported at the device's next poll)."""
        if self.alive:
            if _native.is_lost_error(error):
                self.mark_lost(str(error).strip().splitlines()[-1].strip())
            elif not self.closed:
                self._probe()
        if not self.alive:
            return type(self.dead)(f"{what}: {self.dead}")
        return DeviceError(f"{what} on {self.label}: {error}")

    # -- ownership ---------------------------------------------------------------------------------
    def adopt(self, obj) -> None:
        """Close ``obj`` (``obj.close()``) when this device closes: streams, stream maps,
        pipelines, surfaces register themselves."""
        self._closables.add(obj)

    def state_for(self, owner, make):
        """What ``owner`` (a model, a stream map...) keeps on this device: ``make(device)`` on
        the first call, then the same object until the device closes (which calls its
        ``close()``, if it has one), is lost (which forgets it) or ``drop_state(owner)``.
        Held no longer than ``owner`` (a weak key): an upper layer's per-device weights or
        clones are owned by the device they live on, never cached by ``id(device)``."""
        state = self._states.get(weakref.ref(owner))  # a plain dict: this is a hot path
        if state is None:
            with self._lock:
                state = self._states.get(weakref.ref(owner))
                if state is None:
                    self.check()  # a closed or lost device would never release it
                    state = make(self)
                    states = self._states  # the callback holds the dict, not the device
                    self._states[weakref.ref(owner, lambda r: states.pop(r, None))] = state
        return state

    def drop_state(self, owner):
        """Forget ``owner``'s state on this device and return it (None if it had none): the
        caller releases it."""
        with self._lock:
            return self._states.pop(weakref.ref(owner), None)

    def live_buffers(self) -> int:
        return sum(1 for b in list(self._buffers) if not b.freed)

    def release_memory_pool(self) -> int:
        """Give back the GPU memory this device keeps for reuse by array results (freed
        results of operators such as ``a + b``, those finished work held included); returns
        the bytes released."""
        self.submitter.reap()
        return self.memory_pool.release()

    def _forget_binds(self) -> None:
        with self.binds_lock:
            self.binds.clear()

    def _drop_caches(self) -> None:
        with self.pipelines_lock:
            self.pipelines.clear()
        with self.binds_lock:
            self.binds.clear()
        self.extras.clear()
        # forgotten, not closed: a loss can be found by a thread that holds an owner's lock
        self._states.clear()

    def close(self, timeout: float | None = _CLOSE_WAIT_S) -> None:
        """Close the device: its streams finish the work they were given, then the device
        stops taking work (from then on every use of it or its objects raises DeviceError),
        waits for the threads that are recording work on it to submit it (at most 5 s), then
        waits (at most ``timeout`` s) for all submitted work, closes its stream maps,
        pipelines and surfaces and what upper layers keep on it (``state_for``), frees its
        buffers and staging, stops its threads and releases
        the wgpu device (unless adopted with from_wgpu). Closing twice is harmless; closing
        while other threads compute on the device is safe: their work ends, or fails with
        DeviceError."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        # Streams first: they submit what they were given before close(), in their threads.
        for obj in list(self._closables):
            if getattr(obj, "finish_on_close", False):
                _close_quietly(obj)
        with self._lock:
            was_alive = self.alive
            if was_alive:  # new work is refused from here on (its check sees alive False)
                self.dead = DeviceError(f"{self.label} is closed")
                self.alive = False
        # Threads that passed their check before that may be recording a command buffer from
        # bind groups named by handle: nothing is released under them.
        self._wait_recorders(_RECORDING_WAIT_S)
        for obj in list(self._closables):
            _close_quietly(obj)
        if was_alive:
            self._end_batch(run=True)  # the queued operators run before the device closes
            self._wait_idle(timeout)
        with self._lock:
            states = self._states.copy()  # one C call: an owner's death cannot change it midway
            self._states.clear()
        for state in states.values():  # the owners' weights and bound runs, while staging is open
            if hasattr(state, "close"):
                _close_quietly(state)
        self.submitter.kill(self.dead)
        self._end_batch(run=False)
        _forget(self)
        self.staging.close()
        self.workers.close()
        for b in list(self._buffers):
            b._device_closed()
        self.memory_pool.close()
        self._drop_caches()
        self.commands.clear()
        self.finished.clear()
        if hasattr(self.link, "close"):
            self.link.close()
        self._clocks.release()
        # Destroying the device would unmap the staging that result arrays still lend from
        # (stream_map's leased results): then the device goes when its last buffer does.
        if self._owned and was_alive and self.staging.leases_out() == 0:
            try:
                self.gpu_device.destroy()
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _wait_idle(self, timeout) -> None:
        """Wait for everything submitted so far, the synchronous runs' too: a fence submitted
        after it (the queue runs submissions in order)."""
        try:
            fence = self.submit([self.link.encoder().finish()])
        except Exception:  # noqa: BLE001 - lost meanwhile: nothing will finish
            return
        try:
            wait(fence, timeout)
        except DeviceError:  # lost while waiting: nothing submitted will finish, close goes on
            pass


def _close_quietly(obj) -> None:
    try:
        obj.close()
    except Exception:  # noqa: BLE001 - a broken stream must not keep the device open
        pass


def _forget(dev: Device) -> None:
    """``dev`` is lost or closed: it leaves the open devices, and stops being the default."""
    global _default
    with _open_lock:
        _open.pop(id(dev), None)
        if _default is dev:
            _default = None


def _on_lost_reported(_message: str) -> None:
    # Runs inside wgpu's lost callback (maybe inside wgpuDeviceDestroy): no wgpu call here,
    # only a note that each device checks (probes) at its next use or while a caller waits.
    LOSS.epoch += 1


_native.on_device_lost(_on_lost_reported)


# -- opening devices ---------------------------------------------------------------------------

def device(which=None, *, backend: str | None = None, hold_clocks: bool | None = None,
           new: bool = False) -> Device:
    """An adapter's open device (opened on the first call, again after a close or a loss):
    ``device()`` the default device, ``device(0)`` by index in ``devices()``, ``device("H200")``
    by a part of its name, ``device(backend="vulkan")`` the best adapter of a backend (vulkan,
    metal, d3d12, gl). ``hold_clocks=True`` keeps an NVIDIA GPU at full clock while the device
    is open (default: WGCOMPUTE_HOLD_CLOCKS; an open device that differs raises ArgumentError).
    ``new=True`` opens another logical device on the adapter, the caller's to close."""
    backend = _adapters._check_options(backend, hold_clocks, new)
    if which is None and backend is None and not new and _default is not None:
        return held_as(_default, hold_clocks)
    adapter = _adapters._default_adapter() if which is None and backend is None else \
        _adapters._find_adapter(which, backend, "which")
    if new:
        return _open_device(adapter, hold_clocks)
    with _default_lock:  # one open device per adapter, whichever thread asks first
        dev = _shared_on(adapter)
        if dev is None:
            dev = _open_device(adapter, hold_clocks)
            dev.shared = True
    return held_as(dev, hold_clocks)


def _open_device(adapter, hold_clocks) -> Device:
    gpu_device = _adapters._request(adapter, "wgcompute", _open)
    try:
        return Device(adapter, gpu_device, hold_clocks=hold_clocks)
    except BaseException:
        gpu_device.destroy()
        raise


def _shared_on(adapter) -> Device | None:
    """The device ``device()`` hands out for ``adapter``: the default one, or one it opened."""
    return _adapters._open_on(adapter, [_default, *(d for d in _open.values() if d.shared)])


_default: Device | None = None
_default_lock = threading.RLock()


def default_device() -> Device:
    """The process default device, opened on first use (again after it was lost or closed):
    the adapter WGCOMPUTE_ADAPTER / WGCOMPUTE_BACKEND name, else the high-performance one.
    It is ``device(i)`` for its adapter i."""
    global _default
    dev = _default
    if dev is not None:
        return dev
    with _default_lock:
        if _default is None:
            adapter = _adapters._default_adapter()
            dev = _shared_on(adapter)
            if dev is None:
                dev = _open_device(adapter, None)
                dev.shared = True
            _default = dev
        return _default


def default_opened() -> bool:
    return _default is not None


def set_default_device(dev: Device) -> None:
    """Make ``dev`` the process default device (a worker process pinned to one GPU)."""
    global _default
    check_device(dev, "dev").check("dev")
    with _default_lock:
        _default = dev


def current_device() -> Device:
    """The device in effect: the innermost ``with d:`` (or ``use_device``) block's, else the
    default."""
    dev = _current.get()
    if dev is not None:
        return dev
    dev = _default
    return dev if dev is not None else default_device()


def use_device(dev: Device) -> Device:
    """``with wgc.use_device(d):`` is ``with d:``: d is the current device in the block (a
    context variable: threads and asyncio tasks each see their own) and stays open after."""
    check_device(dev, "dev").check("dev")
    return dev


def synchronize(device: Device | None = None, timeout: float | None = None) -> None:
    """Block until the work given to ``device`` (default: the current device; none opened yet:
    nothing to wait for) has completed: see Device.synchronize."""
    dev = check_device(device) if device is not None else _current.get() or _default
    if dev is None:
        check_timeout(timeout)
    else:
        dev.synchronize(timeout)


def memory_stats(device: Device | None = None) -> dict:
    """``device``'s (default: the current device's) Device.memory_stats()."""
    return resolve(device).memory_stats()


def check_device(dev, argument: str = "device") -> Device:
    if not isinstance(dev, Device):
        raise ArgumentError(f"{argument}: expected a wgc.Device (wgc.device(...)), got "
                            f"{type(dev).__name__}")
    return dev


def resolve(device, argument: str = "device") -> Device:
    """``device`` if given (checked), else the current device."""
    if device is None:
        return current_device()
    dev = check_device(device, argument)
    if not dev.alive:
        dev.check(argument)
    return dev


def open_devices() -> list[Device]:
    return list(_open.values())


def device_info() -> dict:
    """The current device's info(): name, vendor, backend, adapter_type, gpu, versions,
    features, limits."""
    return current_device().info()


def is_gpu() -> bool:
    """True only when the current device is a real GPU (not lavapipe or another CPU adapter)."""
    return current_device().is_gpu


def version() -> str:
    return __version__


@atexit.register
def _shutdown() -> None:
    """At interpreter exit, stop every device's streams and threads before Python tears the
    modules down (a stream thread still calling wgpu-native then crashed the process)."""
    for dev in list(_open.values()):
        for obj in list(dev._closables):
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - exiting
                pass
        try:
            dev.staging.close()
            dev.workers.close()
        except Exception:  # noqa: BLE001 - exiting
            pass
