"""What the parent and its worker processes share: adapters by index, batches a worker loads
itself (load_each), pickling of work and of errors, and the POSIX shared memory batches and
results travel through (created, mapped, unlinked, swept)."""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import shared_memory

try:
    import _posixshmem
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None

import numpy as np

from . import _adapters
from .errors import ArgumentError, DeviceError, WgComputeError

LEASE_MIN = 1 << 20  # results this large are handed over as the shared memory itself
_SHM_DIR = "/dev/shm"  # where POSIX shared memory lives on Linux (checked for space, swept)
_START_TIMEOUT_S = 300.0  # a worker's import and device opening (a first CUDA context: ~s)
NO_NOTE = ("wgcompute-no-note",)  # a batch loaded without a note (a picklable marker)
STOP = None


# -- which adapters ------------------------------------------------------------------------------
def usable_adapters() -> list[int]:
    """Indices (in wgc.adapters()) of the adapters to put a worker process on: every GPU, or
    the CPU adapters when there is none. An OpenGL adapter is left out when another backend
    is there (wgpu lists most GPUs twice: Vulkan and OpenGL). WGCOMPUTE_BACKEND and
    WGCOMPUTE_ADAPTER, when set, choose among them as they choose the default device."""
    found = _adapters.adapters()
    backend = os.environ.get("WGCOMPUTE_BACKEND", "").strip().lower()
    name = os.environ.get("WGCOMPUTE_ADAPTER", "").strip().lower()
    if backend or name:
        want = _adapters.BACKENDS.get(backend)
        if backend and want is None:
            raise ArgumentError(f"WGCOMPUTE_BACKEND: expected one of "
                                f"{', '.join(_adapters.BACKENDS)}, got {backend!r}")
        chosen = [i for i, a in enumerate(found)
                  if (want is None or a["backend"] == want) and name in a["name"].lower()]
        gpus = [i for i in chosen if found[i]["gpu"]]
        return gpus or chosen
    native = [i for i, a in enumerate(found) if a["backend"] != "OpenGL"] or \
        list(range(len(found)))
    gpus = [i for i in native if found[i]["gpu"]]
    return gpus or native


def adapter_index(dev, argument: str) -> int:
    """The enumeration index of the adapter ``dev`` (a wgc.Device) was opened on."""
    found = _adapters._adapters()
    for i, a in enumerate(found):
        if a is dev.adapter:
            return i
    same = [i for i, a in enumerate(found) if a.info == dev.adapter.info]
    if len(same) != 1:
        raise ArgumentError(f"{argument}: cannot tell which of the adapters {same} {dev.label} "
                            f"is on; give its index in wgc.devices() instead")
    return same[0]


# -- batches a worker loads itself ----------------------------------------------------------------
class LoadEach:
    """Batches made by ``fn(item)`` for each of ``items``: in one process on ``threads``
    threads ahead of the GPU; with several worker processes in the worker that runs the batch
    (only the items travel). ``fn`` may return an array, or ``(array, note)``: the map then
    yields ``(result, note)`` (a note is any small picklable object, e.g. which files of a
    batch failed to decode)."""

    def __init__(self, fn, items, threads: int = 2):
        if not callable(fn):
            raise ArgumentError(f"fn: expected a callable loading one batch, got "
                                f"{type(fn).__name__}")
        try:
            iter(items)
        except TypeError:
            raise ArgumentError(f"items: expected an iterable (file names, indices), got "
                                f"{type(items).__name__}") from None
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ArgumentError(f"threads: expected a positive int, got {threads!r}")
        self.fn = fn
        self.items = items
        self.threads = threads

    def __repr__(self) -> str:
        return f"<wgc.LoadEach {getattr(self.fn, '__name__', self.fn)!r}>"

    def __iter__(self):
        """The loaded batches in order (``(array, note)`` where fn gives a note)."""
        with ThreadPoolExecutor(self.threads, thread_name_prefix="wgcompute-load") as pool:
            ahead: list = []
            items = iter(self.items)
            for item in items:
                ahead.append(pool.submit(self.fn, item))
                if len(ahead) > self.threads:
                    yield ahead.pop(0).result()
            for fut in ahead:
                yield fut.result()


def load_each(fn, items, threads: int = 2) -> LoadEach:
    """Batches that ``fn(item)`` loads, for stream_map: read ahead on ``threads`` threads, and
    with ``processes=True`` read by the worker process that runs them (the items travel, not
    the data). ``fn`` must pickle (a module-level function, or any callable with cloudpickle
    installed)."""
    return LoadEach(fn, items, threads)


def no_note(note) -> bool:
    return isinstance(note, tuple) and note == NO_NOTE


class LoadFailed:
    """A batch whose loading failed, in place of its array: the map raises ``error`` at it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def loaded(fut):
    """(array, note) of a load, or (LoadFailed, no note) when it raised."""
    try:
        return split_note(fut.result())
    except Exception as e:  # noqa: BLE001 - this batch's error, raised at its place
        return LoadFailed(e), NO_NOTE


def local_batches(loads: LoadEach, notes):
    """A LoadEach read in this process for stream_map: the arrays (LoadFailed where fn raised),
    their notes appended to ``notes`` in the same order."""
    with ThreadPoolExecutor(loads.threads, thread_name_prefix="wgcompute-load") as pool:
        ahead: list = []
        for item in loads.items:
            ahead.append(pool.submit(loads.fn, item))
            if len(ahead) > loads.threads:
                arr, note = loaded(ahead.pop(0))
                notes.append(note)
                yield arr
        for fut in ahead:
            arr, note = loaded(fut)
            notes.append(note)
            yield arr


def split_note(value):
    """(array, note) from what a LoadEach function returned."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ArgumentError(f"fn: returned a tuple of {len(value)} items; expected an "
                                f"array or (array, note)")
        return value
    return value, NO_NOTE


# -- pickling what travels ------------------------------------------------------------------------
def dumps(obj, argument: str) -> bytes:
    """``obj`` pickled for a worker process: by reference, else by value through cloudpickle."""
    try:
        return pickle.dumps(obj, protocol=5)
    except Exception as e:
        first = e
    try:
        import cloudpickle
    except ImportError:
        raise ArgumentError(f"{argument}: {obj!r} does not pickle ({first}); worker processes "
                            f"need it pickled: define it at module level, or install "
                            f"cloudpickle") from None
    try:
        return cloudpickle.dumps(obj, protocol=5)
    except Exception as e:
        raise ArgumentError(f"{argument}: {obj!r} does not pickle ({e})") from None


class _RemoteTraceback(Exception):
    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


def pack_error(e: BaseException) -> tuple:
    """An exception as it travels back: pickled whole where it comes back equal, else its
    class and message (rebuilt without calling its __init__)."""
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    notes = [n for n in getattr(e, "__notes__", ()) if "(raised by stream_map" not in n]
    try:
        with contextlib.suppress(AttributeError):
            del e.__notes__
        data = pickle.dumps(e, protocol=5)
        pickle.loads(data)
        return ("pickle", data, notes, tb)
    except Exception:  # noqa: BLE001 - whatever does not pickle travels as text
        cls = type(e)
        return ("parts", cls.__module__, cls.__qualname__, str(e), notes, tb)


def unpack_error(payload) -> BaseException:
    if payload[0] == "pickle":
        _, data, notes, tb = payload
        e = pickle.loads(data)
    else:
        _, module, qualname, message, notes, tb = payload
        cls = getattr(sys.modules.get(module), qualname, None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            cls = WgComputeError
            message = f"{qualname}: {message}"
        e = cls.__new__(cls)
        BaseException.__init__(e, message)
    for n in notes:
        e.add_note(n)
    e.__cause__ = _RemoteTraceback(f"\n\"\"\"\n{tb}\"\"\"")
    return e


# -- shared memory --------------------------------------------------------------------------------
def _check_space(nbytes: int, what: str) -> None:
    """Refuse, with the numbers, shared memory the file system cannot hold: tmpfs gives pages
    on first write, and a write past its size kills the process (SIGBUS) instead of failing."""
    if not os.path.isdir(_SHM_DIR):
        return
    st = os.statvfs(_SHM_DIR)
    free = st.f_bavail * st.f_frsize
    if nbytes > free:
        raise DeviceError(f"{what}: needs {nbytes:,} bytes of shared memory and {_SHM_DIR} has "
                          f"{free:,} free; make batches smaller, take results as they come, "
                          f"or give {_SHM_DIR} more room")


def create_shm(name: str, nbytes: int, what: str) -> shared_memory.SharedMemory:
    _check_space(nbytes, what)
    return shared_memory.SharedMemory(name=name, create=True, size=max(1, nbytes))


def unlink_shm(name: str) -> None:
    """Remove segment ``name`` if it is still there (its mappings stay valid)."""
    try:
        shm = shared_memory.SharedMemory(name=name)
    except (FileNotFoundError, OSError):
        return
    with contextlib.suppress(FileNotFoundError, OSError):
        shm.unlink()
    with contextlib.suppress(BufferError, OSError):
        shm.close()


def leftover_shm(prefix: str) -> list[str]:
    """Names of segments starting with ``prefix`` still in /dev/shm (Linux)."""
    try:
        return sorted(n for n in os.listdir(_SHM_DIR) if n.startswith(prefix))
    except OSError:
        return []


def shm_view(shm, shape, dt: str) -> np.ndarray:
    return np.ndarray(shape, np.dtype(dt), buffer=shm.buf)


_kept: list = []  # where segments cannot be mapped apart from SharedMemory (not POSIX)


def map_shm(name: str) -> mmap.mmap:
    """A mapping of segment ``name`` of its own, for arrays over it: numpy keeps the mapping
    alive (as the arrays' base) but holds no export, so SharedMemory.close(), which a
    SharedMemory object also calls when it is collected, would unmap the memory under them.
    Nothing closes this one: it is unmapped when the last array over it is gone."""
    if _posixshmem is None:
        shm = shared_memory.SharedMemory(name=name)
        _kept.append(shm)
        return shm.buf
    fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


# -- the parent side ------------------------------------------------------------------------------
