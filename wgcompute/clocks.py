"""What the GPU driver does to a device's clocks, read through NVML (nvidia-ml-py), and the one
lever wgcompute has on it: a CUDA context held while the device is open (cuda-python).

Measured on an H100 (Vulkan, driver 580.159): the SM clock falls to its idle 345 of 1980 MHz
within ~0.5 s of light load and comes back only after ~0.5-1 s of sustained load, so bursts of
work after a pause run at the idle clock (a 5x5 blur 4x slower, 22,000 against 88,000 Mpix/s);
what the process had allocated made no difference. While a CUDA context exists, the driver keeps
the clock at 1980 MHz (docs/architecture.md, "Steady speed")."""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass

NVIDIA = 0x10DE
# NVML's clock event reason bits (nvmlClocksEventReason*), as nvidia-smi names them
_REASONS = {0x1: "idle", 0x2: "applications clocks setting", 0x4: "software power cap",
            0x8: "hardware slowdown", 0x10: "sync boost", 0x20: "software thermal slowdown",
            0x40: "hardware thermal slowdown", 0x80: "hardware power brake",
            0x100: "display clock setting"}

_lock = threading.Lock()
_nvml = None  # the pynvml module once initialised, False if unavailable


class ClocksUnavailable(RuntimeError):
    """NVML or CUDA is not there for this adapter (not NVIDIA, or a package is missing)."""


@dataclass(frozen=True)
class ClockReading:
    """One NVIDIA GPU's clocks now, as the driver reports them."""

    gpu: str
    sm_mhz: int
    sm_max_mhz: int
    mem_mhz: int
    mem_max_mhz: int
    reasons: tuple[str, ...]  # why the clocks are below their maximum ("idle", ...)

    @property
    def sm_fraction(self) -> float:
        return self.sm_mhz / self.sm_max_mhz if self.sm_max_mhz else 1.0

    def __str__(self) -> str:
        why = f" ({', '.join(self.reasons)})" if self.reasons else ""
        return (f"{self.gpu}: SM {self.sm_mhz} of {self.sm_max_mhz} MHz, memory "
                f"{self.mem_mhz} of {self.mem_max_mhz} MHz{why}")


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pynvml():
    """pynvml, initialised once; raises ClocksUnavailable without it or a driver."""
    global _nvml
    with _lock:
        if _nvml is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                _nvml = pynvml
            except Exception as e:  # not installed, no NVIDIA driver, no GPU
                _nvml = False
                _pynvml.error = (f"NVML is not available ({e}); pip install \"wgcompute[nvidia]\"")
        if _nvml is False:
            raise ClocksUnavailable(_pynvml.error)
        return _nvml


_pynvml.error = ""


def _matches(info: dict, nv, handle) -> bool:
    """Whether NVML's GPU ``handle`` is the adapter described by ``info`` (wgpu's adapter
    info): the same PCI device id where wgpu gives one, the same name otherwise."""
    device_id = int(info.get("device_id") or 0)
    if device_id:
        pci = nv.nvmlDeviceGetPciInfo(handle)
        return (int(pci.pciDeviceId) >> 16) == device_id
    name = _text(nv.nvmlDeviceGetName(handle)).lower()
    return info.get("device", "").lower().startswith(name)


def _nvidia(info: dict) -> None:
    if int(info.get("vendor_id") or 0) != NVIDIA and "nvidia" not in \
            str(info.get("device", "")).lower():
        raise ClocksUnavailable(f"{info.get('device')!r} is not an NVIDIA GPU")


def gpus_for(info: dict) -> list:
    """NVML handles of the NVIDIA GPUs that may be the adapter ``info`` describes (several
    when identical GPUs sit in one machine: wgpu does not give the PCI bus)."""
    _nvidia(info)
    nv = _pynvml()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    found = [h for h in handles if _matches(info, nv, h)]
    if not found:
        raise ClocksUnavailable(f"NVML finds no GPU matching {info.get('device')!r}")
    return found


def read(info: dict) -> list[ClockReading]:
    """The clocks of the GPU(s) behind adapter ``info`` now."""
    _nvidia(info)
    nv = _pynvml()
    get_reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nv.nvmlDeviceGetCurrentClocksThrottleReasons
    out = []
    for h in gpus_for(info):
        bits = int(get_reasons(h))
        out.append(ClockReading(
            _text(nv.nvmlDeviceGetName(h)),
            int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
            int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
            tuple(name for bit, name in _REASONS.items() if bits & bit)))
    return out


def _cuda():
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # cuda-python before 12.6
        except ImportError as e:
            raise ClocksUnavailable(f"holding the clocks needs cuda-python ({e}); "
                                    f"pip install \"wgcompute[nvidia]\"") from None
    return driver


def _check(cu, result, what: str):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise ClocksUnavailable(f"CUDA {what} failed ({err})")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


class Hold:
    """A CUDA primary context retained on each GPU behind adapter ``info`` while the wgcompute
    device is open: the NVIDIA driver then keeps the SM clock at its maximum between bursts of
    work. Costs the context's memory (some hundred MB of GPU memory) and its creation
    (~0.2-1 s); ``release()`` gives it back."""

    def __init__(self, info: dict):
        _nvidia(info)
        nv = _pynvml()
        cu = _cuda()
        _check(cu, cu.cuInit(0), "cuInit")
        self._cu = cu
        self._devices = []
        try:
            for h in gpus_for(info):
                bus = _text(nv.nvmlDeviceGetPciInfo(h).busId)
                dev = _check(cu, cu.cuDeviceGetByPCIBusId(bus.encode()), f"device {bus}")
                _check(cu, cu.cuDevicePrimaryCtxRetain(dev), f"context on {bus}")
                self._devices.append(dev)
        except BaseException:
            self.release()
            raise
        self.gpus = len(self._devices)

    def release(self) -> None:
        devices, self._devices = self._devices, []
        for dev in devices:
            try:
                self._cu.cuDevicePrimaryCtxRelease(dev)
            except Exception:  # noqa: BLE001 - at interpreter exit CUDA may be gone
                pass


_CHECK_S = 10.0  # a device looks at its GPU's clocks at most this often after a wait
# The default hold starts this long after the device opens: importing cuda-python and making
# the context (~0.9 s on an H200 host, most of it Python imports taking the GIL) ran beside a
# process's first upload and submit and made them ~85 ms slower (first_submit: 813 against
# 729 ms without the hold); a script done within this time never needed the clocks held.
HOLD_DELAY_S = 0.5
log = logging.getLogger("wgcompute")


class Keeper:
    """What one device does about its GPU's clocks. By default (``want`` None and
    WGCOMPUTE_HOLD_CLOCKS unset) it holds them wherever that can be done (an NVIDIA GPU with
    the nvidia extra installed), making the CUDA context on a thread of its own so that opening
    the device does not wait; elsewhere it does nothing. ``want=True`` holds them or raises
    ClocksUnavailable; ``want=False`` or WGCOMPUTE_HOLD_CLOCKS=0 turns holding off, and
    WGCOMPUTE_HOLD_CLOCKS=1 asks for it on every device (a log line where it cannot). Where
    the clocks are not held, ``after_wait`` warns once when the driver had the GPU idling."""

    def __init__(self, info: dict, name: str, want, ordinal: int = 0):
        if want is not None and not isinstance(want, bool):
            from .errors import ArgumentError

            raise ArgumentError(f"hold_clocks: expected True, False or None, got {want!r}")
        self._info = info
        self._name = name
        self._hold: Hold | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._released = False
        self._cancel = threading.Event()  # set by release(): a hold not started yet never is
        self._next_check = 0.0
        # only NVIDIA GPUs are watched (NVML); off for the rest, and once a warning was given
        self.watch = "nvidia" in name.lower() or int(info.get("vendor_id") or 0) == NVIDIA
        env = os.environ.get("WGCOMPUTE_HOLD_CLOCKS", "").strip().lower()
        if want is False or want is None and env in ("0", "false", "no", "off"):
            return
        if want is None and not env:  # the default: where the means exist, quietly
            if self.watch:
                self.watch = False  # no idle-clock warning while the context is made
                self._thread = threading.Thread(target=self._hold_later, daemon=True,
                                                name=f"wgcompute-clocks-{ordinal}")
                self._thread.start()
            return
        try:
            self._hold = Hold(info)
        except ClocksUnavailable as e:
            if want:
                raise
            log.info("wgcompute: WGCOMPUTE_HOLD_CLOCKS: not for %s: %s", name, e)
            return
        self.watch = False  # held: nothing to warn about

    @property
    def held(self) -> bool:
        return self._hold is not None

    def _hold_later(self) -> None:
        if not self._cancel.wait(HOLD_DELAY_S):
            self._hold_quietly()

    def _hold_quietly(self) -> None:
        try:
            hold = Hold(self._info)
        except Exception as e:  # noqa: BLE001 - no extra, no driver: the device works on
            log.debug("wgcompute: not holding %s's clocks: %s", self._name, e)
            self.watch = True  # the idle-clock warning names the remedies
            return
        with self._lock:
            if self._released:
                hold.release()
                return
            self._hold = hold

    def release(self) -> None:
        """Give the context back (waits for one being made)."""
        with self._lock:
            self._released = True
        self._cancel.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    def after_wait(self) -> None:
        """At most every 10 s, until it has warned once: was the GPU at its idle clock?"""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + _CHECK_S
        try:
            readings = read(self._info)
        except Exception:  # noqa: BLE001 - no NVML: nothing to watch with
            self.watch = False
            return
        slow = [r for r in readings if r.sm_fraction < 0.5 and "idle" in r.reasons]
        if slow:
            self.watch = False
            warnings.warn(
                f"wgcompute: {slow[0]} just after running this device's work. The NVIDIA "
                f"driver idles the SM clock between bursts of Vulkan work, and short kernels "
                f"then run several times slower (a 5x5 blur 4x). wgcompute holds the clock up "
                f"by default where cuda-python and nvidia-ml-py are installed (pip install "
                f"\"wgcompute[nvidia]\"); or lock the clocks with `nvidia-smi -lgc` (root).",
                RuntimeWarning, stacklevel=4)
