"""The autotuner's memory: which kernel configuration won on a device's adapter, kept by the
Device for its life and on disk per adapter (name + driver + wgcompute version), and the switch
that clears it (autotune_reset).

The tuner itself is kernels/core/tuning.py: it times a kernel family's candidates before the
kernel is bound and stores the winner here, in ``autotune.json`` under the user cache folder
(platformdirs; ``WGCOMPUTE_CACHE_DIR`` overrides it), updated under a file lock so that several
processes (a cluster's workers) can tune at once; a lookup reads the file again only once it
changed (looked at every 50 ms at most: another process's choice is seen that much later).
Tuning runs only on real GPUs: on CPU adapters (lavapipe) timings say nothing about a GPU, so
the family's default is used at once.

When it runs (``mode``): on a GPU, in the background by default: a first use never waits for
timings, it runs the family's default at once while a thread of the device times the
candidates; once they are remembered the device's ``autotune_generation`` grows and what was
bound with defaults is bound again on next use (a Model rebinds its runs). ``wgcompute tune
MODEL.onnx`` tunes ahead of time. ``WGCOMPUTE_AUTOTUNE=0`` disables tuning everywhere, ``=1``
tunes at first use, on the caller (even on lavapipe), ``=background`` in the background (even
on lavapipe)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time

from ._version import __version__
from .runtime import Device, open_devices

log = logging.getLogger("wgcompute")
_LOCK_TIMEOUT_S = 10.0


def cache_dir() -> str:
    """The folder holding autotune.json."""
    folder = os.environ.get("WGCOMPUTE_CACHE_DIR")
    if folder:
        return folder
    import platformdirs  # here, as filelock below: `import wgcompute` loads neither

    return platformdirs.user_cache_dir("wgcompute")


def cache_path() -> str:
    return os.path.join(cache_dir(), "autotune.json")


def adapter_key(device: Device) -> str:
    """Which adapter a choice belongs to: device name, driver and wgcompute version."""
    info = device.adapter.info
    return f"{info['device']} | {info.get('description', '')} | wgcompute {__version__}"


MODES = ("off", "now", "background")
_FLAGS = {"0": "off", "off": "off", "1": "now", "now": "now", "background": "background"}


def mode(device: Device) -> str:
    """How tuning runs on ``device``: "off", "now" (on the caller, before its first use
    binds) or "background" (the default on real GPUs); WGCOMPUTE_AUTOTUNE chooses."""
    flag = os.environ.get("WGCOMPUTE_AUTOTUNE", "").strip().lower()
    if flag:
        got = _FLAGS.get(flag)
        if got is None:
            from .errors import ArgumentError

            raise ArgumentError(f"WGCOMPUTE_AUTOTUNE: expected 0, 1, now or background, got "
                                f"{flag!r}")
        return got
    return "background" if device.is_gpu else "off"


def enabled(device: Device) -> bool:
    """Whether tuning measures candidates at all (mode is not "off")."""
    return mode(device) != "off"


def _load(path: str | None = None) -> tuple[dict, list[str]]:
    """The cache file's well-formed entries ({adapter key: {problem: config name}}, all str)
    and what was dropped as malformed. A missing file is empty and fine."""
    try:
        with open(path or cache_path(), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}, []
    except (OSError, ValueError) as e:
        return {}, [f"the file is not readable JSON ({e})"]
    if not isinstance(data, dict):
        return {}, [f"the file holds a {type(data).__name__}, not an object"]
    clean, dropped = {}, []
    for adapter, choices in data.items():
        if not isinstance(choices, dict):
            dropped.append(f"{adapter!r} holds a {type(choices).__name__}, not an object")
            continue
        good = {p: c for p, c in choices.items() if isinstance(p, str) and isinstance(c, str)}
        dropped += [f"{adapter!r} / {p!r} holds a {type(c).__name__}, not a name"
                    for p, c in choices.items() if p not in good]
        clean[adapter] = good
    return clean, dropped


_warned: set[str] = set()  # cache files this process has warned about (once each)

# The file as last parsed: a lookup that misses (no tuned choice: always so on CPU adapters,
# and on a GPU until tuning finished) runs at every binding, and parsing the file each time
# cost most of a queued matmul's host time. The parse is reused while the file's (mtime,
# size, inode) stay the same, looked at no more often than every _RECHECK_S: a file written
# by another process is seen that much later at most; this process's own writes (remember,
# autotune_reset) drop the parse at once.
_RECHECK_S = 0.05
# A file changed this recently may change again within the clock tick of its mtime with the
# same size: such a parse is not trusted past the next look at the file.
_RACY_NS = 50_000_000
# WGCOMPUTE_CACHE_DIR (None: unset) -> [path, signature, data, time looked at, racy]; the path
# is found again (platformdirs) only when the file is looked at
_parsed: dict = {}
_parsed_lock = threading.Lock()


def _signature(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _forget_parsed() -> None:
    with _parsed_lock:
        _parsed.clear()


def _cached() -> dict:
    """The cache file's well-formed entries, parsed again only when the file changed."""
    folder = os.environ.get("WGCOMPUTE_CACHE_DIR")
    entry = _parsed.get(folder)
    now = time.perf_counter()
    if entry is not None and now - entry[3] < _RECHECK_S:
        return entry[2]
    path = cache_path()
    sig = _signature(path)
    if entry is not None and entry[0] == path and sig == entry[1] and not entry[4]:
        entry[3] = now
        return entry[2]
    data = _read(path)
    racy = sig is not None and time.time_ns() - sig[0] < _RACY_NS
    with _parsed_lock:
        _parsed[folder] = [path, sig, data, now, racy]
    return data


def _read(path: str | None = None) -> dict:
    """The cache file's well-formed entries. Malformed ones (a hand edit, another program's
    file) never break work: they are dropped, said once, and the file is rewritten without
    them; tuning then goes on as if they had never been there."""
    data, dropped = _load(path)
    if dropped:
        path = cache_path()
        if path not in _warned:  # said and rewritten once (a read-only file stays quiet)
            _warned.add(path)
            log.warning("wgcompute: the autotune cache %s was malformed (%s); rewrote it "
                        "without those entries (their choices will be tuned again)", path,
                        "; ".join(dropped[:5]) + (f"; and {len(dropped) - 5} more"
                                                  if len(dropped) > 5 else ""))
            _update(lambda current: None)
    return data


def _update(change) -> None:
    """Read-modify-write the shared file under a file lock, replaced atomically (a concurrent
    reader sees the old or the new file, whole); ``change(data)`` edits the well-formed
    entries in place."""
    from filelock import FileLock, Timeout

    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        with FileLock(cache_path() + ".lock", timeout=_LOCK_TIMEOUT_S):
            data, _ = _load()
            change(data)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".autotune-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, cache_path())
            _forget_parsed()
    except (OSError, Timeout) as e:  # a read-only home must not break computing
        log.warning("wgcompute: could not write the autotune cache %s: %s", cache_path(), e)


def remember(device: Device, problem: str, best: str) -> None:
    """Keep ``best`` as the choice for ``problem`` on ``device`` and in the shared file."""
    device.autotune[problem] = best
    _update(lambda data: data.setdefault(adapter_key(device), {}).__setitem__(problem, best))


def lookup(device: Device, problem: str) -> str | None:
    """The remembered winner's name for ``problem`` on ``device``'s adapter, or None."""
    got = device.autotune.get(problem)
    if got is None:
        got = _cached().get(adapter_key(device), _NONE).get(problem)
        if got is not None:
            device.autotune[problem] = got
    return got


_NONE: dict = {}


def stored(device: Device) -> dict:
    """The choices the cache file holds for ``device``'s adapter (problem -> configuration)."""
    return dict(_cached().get(adapter_key(device), {}))


def autotune_reset() -> None:
    """Forget every tuned choice (all adapters, every open device): delete the cache file.
    The next call that needs a choice tunes again."""
    from filelock import FileLock, Timeout

    for dev in open_devices():
        dev.autotune.clear()
    _forget_parsed()
    try:
        with FileLock(cache_path() + ".lock", timeout=_LOCK_TIMEOUT_S):
            os.remove(cache_path())
            _forget_parsed()
    except FileNotFoundError:
        pass
    except (OSError, Timeout) as e:
        log.warning("wgcompute: could not remove the autotune cache %s: %s", cache_path(), e)
