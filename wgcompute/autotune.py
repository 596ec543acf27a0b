"""The autotuner's memory: which kernel configuration won on this adapter, cached on disk per
adapter (name + driver + wgcompute version), and the switch that clears it (autotune_reset).

A kernel family hands ``choose()`` its candidates and a function that times one; the winner
is stored under ``$XDG_CACHE_HOME/wgcompute/autotune.json`` (``~/.cache`` by default; the
``WGCOMPUTE_CACHE_DIR`` env var overrides the folder). Tuning runs only on real GPUs: on CPU
adapters (lavapipe) timings say nothing about a GPU, so the family's default is used at once.
``WGCOMPUTE_AUTOTUNE=0`` disables tuning everywhere, ``=1`` forces it (even on lavapipe)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading

from ._version import __version__
from .device import get_device

log = logging.getLogger("wgcompute")
_lock = threading.Lock()
_memory: tuple[str, dict] | None = None  # (path, contents) of the cache file, read once


def cache_dir() -> str:
    """The folder holding autotune.json."""
    explicit = os.environ.get("WGCOMPUTE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "wgcompute")


def cache_path() -> str:
    return os.path.join(cache_dir(), "autotune.json")


def adapter_key() -> str:
    """Which adapter a choice belongs to: device name, driver and wgcompute version."""
    info = get_device().adapter.info
    return f"{info['device']} | {info.get('description', '')} | wgcompute {__version__}"


def enabled() -> bool:
    """Whether choose() measures candidates (True on real GPUs unless WGCOMPUTE_AUTOTUNE=0)."""
    flag = os.environ.get("WGCOMPUTE_AUTOTUNE", "").strip()
    if flag == "0":
        return False
    if flag == "1":
        return True
    return get_device().is_gpu


def _load() -> dict:
    global _memory
    path = cache_path()
    if _memory is None or _memory[0] != path:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}  # missing or corrupt: start afresh, it is only a cache
        _memory = (path, data)
    return _memory[1]


def _save(data: dict) -> None:
    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".autotune-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, cache_path())  # atomic: a concurrent reader sees old or new, whole
    except OSError as e:  # a read-only home must not break computing
        log.warning("wgcompute: could not write the autotune cache %s: %s", cache_path(), e)


def lookup(problem: str) -> str | None:
    """The cached winner's name for ``problem`` on this adapter, or None."""
    with _lock:
        return _load().get(adapter_key(), {}).get(problem)


def choose(problem: str, candidates: list[str], default: str, measure) -> str:
    """The name of the configuration to use for ``problem`` (e.g. "matmul f32 large").

    A cached choice that is still a candidate wins; otherwise, if tuning is enabled,
    ``measure(name) -> seconds`` times each candidate (a candidate that raises is skipped)
    and the fastest is cached; otherwise ``default``."""
    cached = lookup(problem)
    if cached in candidates:
        return cached
    if not enabled() or len(candidates) < 2:
        return default if default in candidates else candidates[0]
    timings = {}
    for name in candidates:
        try:
            timings[name] = float(measure(name))
        except Exception as e:  # a config the driver rejects is simply not a candidate
            log.info("wgcompute autotune: %s candidate %s failed: %s", problem, name, e)
    if not timings:
        return default if default in candidates else candidates[0]
    best = min(timings, key=timings.get)
    log.info("wgcompute autotune: %s -> %s (%s)", problem, best,
             ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in sorted(timings.items())))
    with _lock:
        data = _load()
        data.setdefault(adapter_key(), {})[problem] = best
        _save(data)
    return best


def autotune_reset() -> None:
    """Forget every tuned choice (all adapters): delete the cache file and the in-memory copy.
    The next call that needs a choice tunes again."""
    global _memory
    with _lock:
        _memory = None
        try:
            os.remove(cache_path())
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("wgcompute: could not remove the autotune cache %s: %s", cache_path(), e)
