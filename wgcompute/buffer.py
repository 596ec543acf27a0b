"""Buffer: a typed, shaped array living in GPU memory, and the functions that create one
from lists, numpy arrays or bytes. Reads block (they are named read); nothing else waits."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import numpy as np

from . import _buffer_memory, transfers
from ._buffer_memory import _ALIGN, _USAGE, BufferMemory, _alloc, _new_id, new_gpu_buffer  # noqa: F401
from ._buffer_numpy import NotInstalled, NumpyMethods, install_array_ops  # noqa: F401
from ._pools import result_class
from .dtypes import DType, convert_exact, list_to_array
from .dtypes import dtype as resolve_dtype
from .errors import (
    ArgumentError,
    BufferFreedError,
    DtypeError,
    ShapeError,
)
from .runtime import Device, resolve

if TYPE_CHECKING:  # commands sit above buffers: named for type checkers only
    from .commands import Command, HostCommand

_RAW_FORMATS = ("B", "b", "c")  # memoryviews of these are raw bytes; others carry values

# -- the layers above, installed from above ------------------------------------------------
# A Buffer's operators, views, indexing, reductions and astype are methods, as numpy's, and so
# are read_async/write_async; the work is done above this layer (array.py runs the kernels,
# commands.py submits). Each of those modules installs itself when imported (array.py into
# _buffer_numpy.py, which holds the operators), and wgcompute's __init__ imports both, so this
# module imports nothing above it.
class AsyncTransfers(Protocol):
    """What Buffer.read_async/write_async call: wgcompute.commands, installed by it."""

    def read_async(self, buf: Buffer) -> HostCommand: ...
    def write_async(self, buf: Buffer, data: Any) -> Command[Buffer]: ...


_commands: AsyncTransfers = NotInstalled(  # type: ignore[assignment]
    "wgcompute.commands", "Buffer.read_async and write_async")


def install_async_transfers(ops: AsyncTransfers) -> None:
    """Called by wgcompute.commands as it is imported."""
    global _commands
    _commands = ops


def live_buffers() -> int:
    """How many Buffers exist and are not freed (for leak checks and bounded-memory tests)."""
    return _buffer_memory.live_count()


def normalize_shape(shape, argument: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, Iterable) or isinstance(shape, (str, bytes, dict, set, frozenset)):
        raise ShapeError(f"{argument}: expected a tuple of non-negative ints, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ShapeError(f"{argument}: expected a tuple of non-negative ints, got {shape!r}")
        out.append(int(d))
    return tuple(out)


class Buffer(BufferMemory, NumpyMethods):
    """An n-dimensional array of one dtype in the memory of one device.

    ``shape``, ``dtype`` and ``device`` describe it; ``read()``, ``to_numpy()``, ``tolist()``
    copy it back (they block until every command writing it has finished). ``free()``
    releases the GPU memory; a buffer freed while a submitted command still uses it stays
    alive until that command completes. Usable as a context manager (frees on exit)."""

    __slots__ = ("_gpu", "_shape", "_dt", "_label", "_freed", "_holds", "_lock", "_id",
                 "_dev", "_key", "_pool_serial", "__weakref__")
    _base = None  # a view's buffer (BufferView); None: this buffer owns its memory
    _offset = 0  # a view's first element in its base
    # numpy's operators defer to Buffer's (ndarray + buf calls buf.__radd__), and numpy's
    # ufuncs refuse a Buffer instead of silently reading it back
    __array_ufunc__ = None

    def __array_function__(self, func, types, args, kwargs):
        """numpy's functions (np.sum, np.concatenate, np.reshape, ...) refuse a Buffer, all
        alike, instead of reading it back to the host behind the caller's back: the array
        namespace has the standard's functions on the GPU, and np.asarray(buf) reads it."""
        name = getattr(func, "__name__", "function")
        raise DtypeError(
            f"numpy.{name}: wgcompute arrays stay on the GPU; use the array namespace's "
            f"functions (xp = x.__array_namespace__(), i.e. wgcompute.array_api, e.g. "
            f"xp.{_STANDARD_NAMES.get(name, name)}(...)) or read the array into numpy first "
            f"(x.to_numpy() or np.asarray(x))")

    def __init__(self, gpu_buffer, shape: tuple[int, ...], dt: DType, label: str = "",
                 device: Device | None = None, pool_serial: int = 0):
        self._dev = device
        self._gpu = gpu_buffer
        self._shape = shape
        self._dt = dt
        self._label = label
        self._freed = False
        # memory from the device's pool goes back there when freed; its bind key names the
        # memory, so a result reusing it finds the kernel runs bound to it (commands.bound)
        self._pool_serial = pool_serial
        # One entry per submitted command still using the buffer. list.append and list.pop
        # are atomic, so retaining costs no lock (a pipeline of 100 stages retains 101
        # buffers per run); only the last release of a freed buffer takes _lock.
        self._holds: list = []
        self._lock = threading.Lock()
        self._id = _new_id(True)
        self._key = (pool_serial, shape, dt.name) if pool_serial else self._id
        if device is not None:
            device.track(self)

    # -- metadata (never touches the GPU) -------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> DType:
        """The dtype, named as wgcompute spells it: f32, f64, f16, s8, s16, s32, s64, u8, u16,
        u32, u64, bool or c64.
        ``buf.dtype == "f32"`` holds, it prints as f32, and ``np.dtype(buf.dtype)`` is
        numpy's float32."""
        return self._dt

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """Bytes of data (elements × item size; u8 counts one byte each)."""
        return self.size * self._dt.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element (numpy's itemsize)."""
        return self._dt.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Bytes from one element to the next along each axis, as numpy counts them. A buffer
        and every view of one are contiguous (row-major); numpy gives an empty array all-zero
        strides, and so does this."""
        if not self.size:
            return (0,) * len(self._shape)
        out, step = [], self._dt.itemsize
        for d in reversed(self._shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    @property
    def label(self) -> str:
        return self._label

    @property
    def device(self) -> Device:
        """The wgc.Device whose memory holds this buffer."""
        return self._dev

    @property
    def freed(self) -> bool:
        return self._freed

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d buffer")
        return self._shape[0]

    def __repr__(self) -> str:
        state = " freed" if self._freed else ("" if self._dev.alive else f" ({self._dev.state} "
                                                                         f"device)")
        label = f" {self._label!r}" if self._label else ""
        size = _fmt_bytes(self.nbytes)
        return f"<wgc.Buffer{label} {self._dt.name} shape={self._shape} {size}{state}>"

    # -- GPU access (holding, binding and freeing the memory: BufferMemory) ------------
    @property
    def gpu_buffer(self):
        """The underlying wgpu GPUBuffer (for interop with raw wgpu-py code)."""
        self._check("buffer")
        return self._gpu

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    # -- reading -----------------------------------------------------------------------
    def read(self) -> bytes:
        """The buffer's bytes (blocks until ready)."""
        return self._download().tobytes()

    def _download(self) -> np.ndarray:
        self._pin()
        try:
            return transfers.download(self._dev, self._gpu, 0, self.nbytes)
        finally:
            self._release()

    def to_numpy(self) -> np.ndarray:
        """A new numpy array with the buffer's contents (blocks until ready)."""
        return self._download().view(self._dt.numpy).reshape(self._shape)

    def tolist(self) -> list:
        return self.to_numpy().tolist()

    def get(self) -> np.ndarray:
        """CuPy's spelling of to_numpy(): a new numpy array (blocks until ready)."""
        return self.to_numpy()

    def __array__(self, dtype=None, copy=None):
        if copy is False:  # numpy's protocol: copy=False must fail when a copy is needed
            raise ValueError("wgc.Buffer: its data is in GPU memory; reading it is a copy")
        a = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            a = a.astype(dtype)
        return a

    # -- writing -----------------------------------------------------------------------
    def write(self, data) -> None:
        """Replace the contents with ``data`` (same number of elements; converted exactly).

        Returns once ``data`` has been copied out; later commands see the new contents."""
        self._check()
        arr = _to_array(data, self._dt, "data")
        if arr.size != self.size:
            raise ShapeError(f"data: has {arr.size} elements, buffer {self._shape} holds "
                             f"{self.size}")
        if arr.size:
            self._pin()
            try:
                transfers.upload(self._dev, self._gpu, 0, arr, fence=False)
            finally:
                self._release()

    # commands sit above buffers in the layers: they install the async variants' work
    def write_async(self, data) -> Command[Buffer]:
        """Like write(), but returns a Command that completes once the GPU has the bytes."""
        return _commands.write_async(self, data)

    def read_async(self) -> HostCommand:
        """Start reading back without blocking; returns a Command whose result (``wait()``,
        ``await``) is the numpy array, as of the commands submitted before this call."""
        return _commands.read_async(self)

    @overload
    def to(self, device: Literal["cpu"]) -> np.ndarray: ...
    @overload
    def to(self, device: Device) -> Buffer: ...

    def to(self, device: Device | Literal["cpu"]) -> Buffer | np.ndarray:
        """A copy of this buffer on ``device`` (the same one if it already lives there), or
        with ``"cpu"`` (torch's spelling) its contents as a new numpy array. Blocks: the
        bytes travel through host memory."""
        if isinstance(device, str) and device == "cpu":
            self._check("self")
            return self.to_numpy()
        if not isinstance(device, Device):
            raise ArgumentError(f"device: expected a wgc.Device (wgc.device(...)) or 'cpu' "
                                f"(a numpy array), got {device!r}")
        device.check("device")
        self._check("self")
        if device is self._dev:
            return self
        return buffer(self.to_numpy(), self._shape, self._dt, self._label, device=device)

    def __reduce__(self):
        raise ArgumentError(
            f"{self!r}: a GPU buffer does not pickle (it cannot be sent to another process); "
            f"send its contents (buf.to_numpy(), a numpy array) and make a buffer there")


class BufferView(Buffer):
    """A buffer that is part of another's memory: ``reshape``, ``view`` and contiguous
    slices make one without copying. Kernels read it where it lies when its offset is a
    multiple of the adapter's min-storage-buffer-offset-alignment, and through a GPU copy
    otherwise; no kernel writes into it. Freeing the base invalidates its views (using one
    then raises BufferFreedError); freeing a view leaves the base alone."""

    __slots__ = ("_base", "_offset")

    def __init__(self, base: Buffer, shape: tuple[int, ...], byte_offset: int = 0,
                 dt: DType | None = None):
        root = base._base if base._base is not None else base
        self._base = root
        self._offset = base._offset + byte_offset
        self._dev = root._dev
        self._gpu = None  # the memory is the base's
        self._shape = shape
        self._dt = dt if dt is not None else base._dt
        self._label = root._label
        self._freed = False
        self._holds = root._holds  # a use of the view holds the base's memory
        self._lock = threading.Lock()
        self._pool_serial = 0
        self._id = _new_id(False)
        self._key = self._id

    @property
    def base(self) -> Buffer:
        """The buffer whose memory this view is part of."""
        return self._base

    def __repr__(self) -> str:
        state = " freed" if self._freed or self._base._freed else ""
        label = f" of {self._base._label!r}" if self._base._label else ""
        return (f"<wgc.Buffer view{label} {self._dt.name} shape={self._shape} "
                f"{_fmt_bytes(self.nbytes)} at byte {self._offset}{state}>")

    @property
    def gpu_buffer(self):
        raise ArgumentError(f"{self!r} is part of another buffer's memory and has no GPU "
                            f"buffer of its own; take view.copy() for one")

    def _check(self, argument: str = "buffer") -> None:
        if self._freed or self._base._freed or not self._dev.alive:
            self._refuse(argument)

    def _refuse(self, argument: str) -> None:
        if not self._dev.alive:
            self._dev.check(argument)
        if self._freed:
            raise BufferFreedError(f"{argument}: {self!r} was freed; it cannot be used any more")
        raise BufferFreedError(f"{argument}: {self!r} is a view of a buffer that was freed")

    def _pin(self, argument: str = "buffer", suffix: str = "") -> None:
        self._holds.append(None)
        if self._freed or self._base._freed or not self._dev.alive:
            self._release()
            self._refuse(argument + suffix)

    def _release(self) -> None:
        self._holds.pop()
        root = self._base
        if root._freed and not self._holds:
            root._drop_memory()

    def free(self) -> None:
        """Stop using this view (the base and its memory stay)."""
        self._freed = True

    def _device_closed(self) -> None:
        self._freed = True

    def __del__(self):
        pass

    def _binding(self, argument: str = "buffer"):
        self._check(argument)
        return self._base._gpu, self._offset

    def _held_binding(self, argument: str = "buffer"):
        gpu = self._base._gpu
        if gpu is None or not self._dev.alive:
            self._refuse(argument)
        return gpu, self._offset

    def _bindable(self) -> bool:
        return self._offset % self._dev.limit("min-storage-buffer-offset-alignment") == 0

    def _download(self) -> np.ndarray:
        start = self._offset // 4 * 4  # copies move whole 4-byte words
        skip = self._offset - start
        self._pin()
        try:
            raw = transfers.download(self._dev, self._base._gpu, start, skip + self.nbytes)
        finally:
            self._release()
        return raw[skip:]

    def write(self, data) -> None:
        """Replace the view's elements (its base's memory) with ``data``. The view must
        start and end on 4-byte boundaries (GPU copies move whole words)."""
        self._check()
        if self._offset % 4 or self.nbytes % 4:
            raise ArgumentError(f"{self!r}: writes move whole 4-byte words, and this view "
                                f"starts or ends inside one; write the base instead")
        arr = _to_array(data, self._dt, "data")
        if arr.size != self.size:
            raise ShapeError(f"data: has {arr.size} elements, view {self._shape} holds "
                             f"{self.size}")
        if arr.size:
            self._pin()
            try:
                transfers.upload(self._dev, self._base._gpu, self._offset, arr, fence=False)
            finally:
                self._release()

    def to(self, device):
        if device is self._dev:
            return self
        return super().to(device)


# numpy's names that the array API standard spells otherwise (for the refusal's hint)
_STANDARD_NAMES = {"concatenate": "concat", "transpose": "permute_dims", "power": "pow",
                   "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2",
                   "cumsum": "cumulative_sum", "cumprod": "cumulative_prod", "invert":
                   "bitwise_invert", "left_shift": "bitwise_left_shift", "right_shift":
                   "bitwise_right_shift", "absolute": "abs", "unique": "unique_values"}


def result_buffer(shape: tuple[int, ...], dt: DType, dev: Device, label: str = "",
                  nbytes: int = -1, size: int = 0) -> Buffer:
    """A buffer for a result that a kernel overwrites whole (operators' outputs): memory
    from the device's pool when it holds some of the size class, not zeroed; freed, the
    memory goes back to the pool. ``nbytes`` and ``size`` (its class): when known."""
    pool = dev.memory_pool
    if nbytes < 0:
        nbytes = math.prod(shape) * dt.itemsize
    if pool.limit <= 0:
        return Buffer(_alloc(dev, shape, dt, label), shape, dt, label, dev)
    gpu, serial = pool.take(nbytes, size)
    if gpu is None:
        size = size or result_class(nbytes)
        if size > dev.limit("max-buffer-size"):
            return Buffer(_alloc(dev, shape, dt, label), shape, dt, label, dev)
        try:
            gpu = new_gpu_buffer(dev, label or "wgcompute-result", size)
        except Exception as e:
            raise dev.wrap(e, f"shape: could not allocate {shape} {dt.name} ({nbytes} "
                              f"bytes)") from e
        serial = pool.serial()
    return Buffer(gpu, shape, dt, label, dev, pool_serial=serial)


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def empty(shape, dtype="f32", label: str = "", *, device: Device | None = None) -> Buffer:
    """A new buffer with zeroed contents (WebGPU zero-initialises every allocation), on
    ``device`` (default: the current device)."""
    shape = normalize_shape(shape)
    dt = resolve_dtype(dtype)
    dev = resolve(device)
    return Buffer(_alloc(dev, shape, dt, label), shape, dt, label, dev)


def _to_array(data, dt: DType, argument: str) -> np.ndarray:
    if isinstance(data, Buffer):
        data._check(argument)
        if data._dt != dt:
            raise DtypeError(f"{argument}: buffer is {data.dtype}, expected {dt.name}")
        return data.to_numpy()
    if isinstance(data, np.ndarray):
        return convert_exact(data, dt, argument)
    if isinstance(data, memoryview) and data.format not in _RAW_FORMATS:
        return convert_exact(np.asarray(data), dt, argument)  # typed: values, not bytes
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data).cast("B")
        if mv.nbytes % dt.itemsize:
            raise ShapeError(f"{argument}: {mv.nbytes} bytes is not a whole number of "
                             f"{dt.name} items ({dt.itemsize} bytes each)")
        if dt.kind == "b":  # a bool is the byte 0 or 1: others are refused
            return convert_exact(np.frombuffer(mv, dtype=np.uint8), dt, argument)
        return np.frombuffer(mv, dtype=dt.numpy)
    if isinstance(data, (list, tuple)):
        return list_to_array(data, dt, argument)
    if isinstance(data, (int, float, np.number)) and not isinstance(data, bool):
        return list_to_array(data, dt, argument)
    if hasattr(data, "__array__") or hasattr(data, "__array_interface__"):
        return convert_exact(np.asarray(data), dt, argument)
    raise ArgumentError(f"{argument}: expected a list, numpy array or bytes, got "
                        f"{type(data).__name__}")


def buffer(data, shape=None, dtype=None, label: str = "", *, device: Device | None = None
           ) -> Buffer:
    """Create a GPU buffer from a (nested) list, a numpy array or bytes, on ``device``
    (default: the current device).

    ``dtype`` defaults to the array's own dtype for numpy input and to "f32" otherwise.
    ``shape`` defaults to the data's shape; when given, its element count must match.
    Values that the dtype cannot hold exactly are an error, never silently cast."""
    if dtype is None:
        if isinstance(data, memoryview) and data.format not in _RAW_FORMATS:
            data = np.asarray(data)
        if isinstance(data, np.ndarray):
            dt = resolve_dtype(data.dtype, "data")
        elif isinstance(data, Buffer):
            dt = data._dt
        else:
            dt = resolve_dtype("f32")
    else:
        dt = resolve_dtype(dtype)
    arr = _to_array(data, dt, "data")
    if shape is not None:
        shape = normalize_shape(shape)
        if math.prod(shape) != arr.size:
            raise ShapeError(f"shape: {shape} holds {math.prod(shape)} elements but data has "
                             f"{arr.size}")
    else:
        shape = tuple(arr.shape)
    dev = resolve(device)
    buf = Buffer(_alloc(dev, shape, dt, label, "data"), shape, dt, label, dev)
    if arr.size:
        try:
            transfers.upload(dev, buf._gpu, 0, arr, fence=False, fresh=True)
        except BaseException:
            buf.free()
            raise
    return buf


def buffer_from_binary(data, shape, dtype, label: str = "", *, device: Device | None = None
                       ) -> Buffer:
    """Create a buffer from raw little-endian bytes; their length must equal the shape's."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentError(f"data: expected bytes, bytearray or memoryview, got "
                            f"{type(data).__name__}")
    shape = normalize_shape(shape)
    dt = resolve_dtype(dtype)
    want = math.prod(shape) * dt.itemsize
    got = memoryview(data).nbytes
    if got != want:
        raise ShapeError(f"data: {got} bytes given, shape {shape} of {dt.name} needs {want}")
    return buffer(bytes(data) if not isinstance(data, bytes) else data, shape, dt, label,
                  device=device)


def buffer_zeros(shape, dtype="f32", label: str = "", *, device: Device | None = None
                 ) -> Buffer:
    """A zero-filled buffer."""
    return empty(shape, dtype, label, device=device)


def from_numpy(array: np.ndarray, label: str = "", *, device: Device | None = None) -> Buffer:
    """A buffer with the array's shape, dtype and contents (on ``device``, default: the
    current device)."""
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"array: expected a numpy array, got {type(array).__name__}")
    resolve_dtype(array.dtype, "array")
    return buffer(array, None, None, label, device=device)


def to_numpy(buf: Buffer) -> np.ndarray:
    check_buffer(buf, "buf")
    return buf.to_numpy()


def asnumpy(a) -> np.ndarray:
    """CuPy's ``asnumpy``: ``a`` as a numpy array. A Buffer is read back (a new array; blocks
    until ready), a numpy array is returned as it is, and a number, numpy scalar or (nested)
    list of numbers becomes the numpy array np.asarray makes of it."""
    if isinstance(a, Buffer):
        a._check("a")
        return a.to_numpy()
    if isinstance(a, np.ndarray):
        return a
    what = "expected a wgc.Buffer, a numpy array, a number or a list of numbers"
    if a is None or isinstance(a, (str, bytes, bytearray, dict, set, frozenset)):
        raise ArgumentError(f"a: {what}, got {type(a).__name__}")
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"a: {what}; numpy cannot make an array of {a!r} ({e})") from e
    if arr.dtype.kind not in "biufc":
        raise ArgumentError(f"a: {what}, got {type(a).__name__} {a!r}")
    return arr


def check_buffer(buf, argument: str) -> Buffer:
    if not isinstance(buf, Buffer):
        raise ArgumentError(f"{argument}: expected a wgc.Buffer, got {type(buf).__name__}")
    buf._check(argument)
    return buf
