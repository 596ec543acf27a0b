"""The one tuner: a kernel family describes what it would tune as TuneProblems; ``tune`` times
the missing ones before a kernel is bound, ``choice`` only looks them up (keys stay pure).

Choices live in autotune.py (per device, and in autotune.json per adapter). ``bind`` calls
``prepare`` once, after the checks and before the kernel's ``passes`` and ``key``: a first
use of a shape tunes there (when tuning is on), and ``key`` then only reads the choice."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import autotune

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
    this before the kernel's ``passes`` and ``key``). Costs one check when tuning is off."""
    if autotune.enabled(device):
        tune(device, kernel.tune_problems(inputs, output, params))
