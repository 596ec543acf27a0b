"""The one tuner: a kernel family describes what it would tune as TuneProblems; ``tune`` times
the missing ones before a kernel is bound, ``choice`` only looks them up (keys stay pure).

Choices live in autotune.py (per device, and in autotune.json per adapter). ``bind`` calls
``prepare`` once, after the checks and before the kernel's ``passes`` and ``key``: a first
use of a shape tunes there (when tuning is on), and ``key`` then only reads the choice."""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import autotune
from ...runtime import Device

log = logging.getLogger("wgcompute")


@dataclass(frozen=True)
class TuneProblem:
    """One choice to make: among ``candidates`` (configuration names) for the problem stored
    under ``key`` in autotune.json (e.g. "matmul f32 large r4"), ``default`` when untuned.
    ``measure(name) -> seconds`` times one candidate on the GPU (only ``tune`` calls it)."""

    family: str
    key: str
    candidates: tuple[str, ...]
    default: str
    measure: Callable[[str], float] = field(compare=False, repr=False)

    @property
    def fallback(self) -> str:
        """The untuned choice: ``default`` if it is a candidate, else the first candidate."""
        return self.default if self.default in self.candidates else self.candidates[0]


# Problems made per device and kept (see memoized); past this many, the kept ones are dropped
PROBLEM_MEMO_SIZE = 4096


def memoized(make):
    """``make(...)`` (a kernel's method or a family's function) building a TuneProblem from
    hashable sizes, dtypes and a device given positionally, made once per device and argument
    values: its candidate lists come from the adapter's limits, which do not change, and a
    queued product asks for its problem each time it binds. The choice is looked up anew
    (``choice``) at every use, so tuning and autotune_reset are seen at once."""

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        for device in reversed(args):  # (the device comes late: sizes, dtype, device, ...)
            if isinstance(device, Device):
                break
        else:
            return make(*args, **kwargs)
        memo = device.extras.get("tune_problems")
        if memo is None:
            memo = device.extras.setdefault("tune_problems", {})
        key = (make, tuple([None if a is device else a for a in args]),
               tuple(sorted(kwargs.items())) if kwargs else ())
        try:
            return memo[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable argument: made each time
            return make(*args, **kwargs)
        got = make(*args, **kwargs)
        if len(memo) >= PROBLEM_MEMO_SIZE:
            memo.clear()
        memo[key] = got
        return got

    return wrapper


def choice(device, problem: TuneProblem) -> str:
    """The configuration name to use for ``problem`` on ``device``: the remembered choice if
    it is still a candidate, else the default. Looks up only: never times anything."""
    cached = autotune.lookup(device, problem.key)
    return cached if cached in problem.candidates else problem.fallback


def tune(device, problems) -> None:
    """Time the candidates of each problem that has no remembered choice on ``device`` (a
    candidate that raises is skipped) and remember the fastest. Nothing when tuning is off
    (autotune.enabled: CPU adapters, WGCOMPUTE_AUTOTUNE=0) or a problem has one candidate."""
    if not autotune.enabled(device):
        return
    for problem in problems:
        if len(problem.candidates) < 2 or \
                autotune.lookup(device, problem.key) in problem.candidates:
            continue
        timings = {}
        for name in problem.candidates:
            try:
                timings[name] = float(problem.measure(name))
            except Exception as e:  # a config the driver rejects is simply not a candidate
                log.info("wgcompute autotune: %s candidate %s failed: %s", problem.key, name, e)
        if not timings:
            continue  # choice() gives the default
        best = min(timings, key=timings.get)
        log.info("wgcompute autotune: %s -> %s (%s)", problem.key, best,
                 ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in sorted(timings.items())))
        autotune.remember(device, problem.key, best)


def prepare(kernel, inputs, output, params: dict, device) -> None:
    """Tune what binding ``kernel`` to these buffers will ask ``choice`` for (``bind`` calls
    this before the kernel's ``passes`` and ``key``): on the caller in mode "now"; in mode
    "background" the missing problems go to the device's tuning thread and this binding uses
    the defaults. Costs one check when tuning is off."""
    how = autotune.mode(device)
    if how == "off":
        return
    problems = kernel.tune_problems(inputs, output, params)
    if how == "now":
        tune(device, problems)
        return
    missing = [p for p in problems if len(p.candidates) > 1
               and autotune.lookup(device, p.key) not in p.candidates]
    if missing:
        _tuner(device).add(missing)


class _Tuner:
    """A device's background tuning: one daemon thread timing the problems handed to it, one
    at a time (each problem once), off every caller's path. When its queue runs dry after
    remembering a choice, the device's ``autotune_generation`` grows and its bind cache is
    dropped, so later bindings (and the bound runs of owners that watch the generation) use
    the tuned configurations."""

    def __init__(self, device):
        self.device = device
        self.jobs: queue.Queue = queue.Queue()
        self.queued: set[str] = set()
        self.lock = threading.Lock()
        self.idle = threading.Event()
        self.idle.set()
        self.thread = threading.Thread(target=self._loop, name="wgcompute-autotune",
                                       daemon=True)
        self.thread.start()

    def add(self, problems) -> None:
        with self.lock:
            for p in problems:
                if p.key not in self.queued:
                    self.queued.add(p.key)
                    self.idle.clear()
                    self.jobs.put(p)

    def _loop(self) -> None:
        changed = False
        while True:
            problem = self.jobs.get()
            dev = self.device
            if dev.closed or not dev.alive:
                with self.lock:
                    self.queued.clear()
                    self.idle.set()
                return
            try:
                tune(dev, [problem])
                changed = True
            except Exception as e:  # noqa: BLE001 - a failed timing leaves the default in use
                log.info("wgcompute autotune: background tuning of %s failed: %s",
                         problem.key, e)
            with self.lock:
                self.queued.discard(problem.key)
                if self.jobs.empty():
                    if changed:
                        dev.autotune_generation += 1
                        dev._forget_binds()
                        changed = False
                    self.idle.set()


_tuners_lock = threading.Lock()


def _tuner(device) -> _Tuner:
    t = getattr(device, "_tuner", None)
    if t is None:
        with _tuners_lock:
            t = getattr(device, "_tuner", None)
            if t is None:
                t = device._tuner = _Tuner(device)
    return t


def wait(device, timeout: float | None = None) -> bool:
    """Block until ``device``'s background tuning has nothing left to time (True), or
    ``timeout`` seconds passed (False)."""
    t = getattr(device, "_tuner", None)
    return True if t is None else t.idle.wait(timeout)
