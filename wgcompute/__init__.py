"""wgcompute: a Python GPU compute engine on WebGPU (wgpu-py).

Objects first (Device, Buffer, Command, Pipeline, Stream), plus a thin functional facade
(``buffer / run_kernel / submit / poll / wait / pipeline_add``) working on the current device.
Importing wgcompute creates no device; the first call that needs the GPU opens the default one."""

from __future__ import annotations

import operator as _operator
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import (
    _fusion_auto,  # noqa: F401 - installs automatic fusion (WGCOMPUTE_FUSE)
    array_api,  # the array API standard's namespace: wgc.array_api
)
from . import array as _array
from . import array_api as _xp
from . import recipes as _recipes  # noqa: F401 - installs Pipeline.recipe() and pickling
from ._lazy import enqueue as _enqueue
from ._lazy import set_eager
from ._version import __version__
from .buffer import (
    Buffer,
    asnumpy,
    buffer,
    buffer_from_binary,
    buffer_zeros,
    empty,
    from_numpy,
    live_buffers,
    to_numpy,
)
from .buffer import check_buffer as _check_buffer
from .commands import Command, Status, poll, run_kernel, run_kernel_async, submit, wait
from .commands import prepare_output as _prepare_output
from .dtypes import DTYPES
from .dtypes import dtype as _dtype_of
from .errors import (
    ArgumentError,
    BufferFreedError,
    CommandFailedError,
    ConvergenceError,
    DeviceError,
    DeviceLostError,
    DtypeError,
    IndexingError,
    KernelNotFoundError,
    MissingExtraAttributeError,
    MissingExtraError,
    ModelError,
    PipelineError,
    ShaderCompileError,
    ShapeError,
    SurfaceError,
    TimeoutError,
    UnsupportedDtypeError,
    WgComputeError,
)
from .kernels import Kernel, Param, register_kernel
from .kernels import names as _kernel_names
from .kernels import registry as _registry
from .kernels.core import custom as _custom
from .pipeline import Pipeline, free_pipeline, pipeline, pipeline_add, pipeline_run
from .runtime import (
    AdapterInfo,
    Device,
    adapters,
    current_device,
    default_device,
    device,
    device_info,
    devices,
    is_gpu,
    memory_stats,
    set_default_device,
    synchronize,
    use_device,
    version,
)
from .runtime import resolve as _resolve
from .stream_map import (  # here, not on first use: wgc.stream_map is the function, not the module
    DeviceProcesses,
    LoadEach,
    ProcessMap,
    StreamMap,
    device_processes,
    load_each,
    stream_map,
)
from .timeline import Timeline

__all__ = [
    "__version__", "array_api", "image", "ml", "Buffer", "Command", "Status", "Kernel", "Param",
    "DTYPES",
    # errors
    "WgComputeError", "ArgumentError", "ShapeError", "DtypeError", "UnsupportedDtypeError",
    "KernelNotFoundError", "ShaderCompileError", "BufferFreedError", "IndexingError",
    "DeviceError",
    "DeviceLostError", "CommandFailedError", "PipelineError", "TimeoutError", "SurfaceError",
    "ModelError", "MissingExtraError", "MissingExtraAttributeError", "ConvergenceError",
    # devices
    "Device", "AdapterInfo", "devices", "device", "use_device", "set_default_device",
    "current_device", "default_device", "device_info", "is_gpu", "version", "adapters",
    "synchronize", "memory_stats",
    # buffers
    "buffer", "buffer_from_binary", "buffer_zeros", "empty", "from_numpy", "to_numpy",
    "asnumpy",
    "read", "read_list", "read_binary", "shape", "dtype", "size", "free", "free_many",
    "live_buffers",
    # kernels
    "kernels", "kernel_info", "kernels_stats", "register_kernel", "run_kernel",
    "ElementwiseKernel", "ReductionKernel",
    "run_kernel_async", "add",
    "sub", "multiply", "divide", "scale", "relu", "matmul",
    # reductions: sum, max, min, mean and argmax are the array namespace's (every axis by
    # default); reduce_* run one reduction kernel along the last axis by default
    "sum", "max", "min", "mean", "argmax", "reduce_sum", "reduce_max", "reduce_min",
    "reduce_mean", "reduce_argmax", "softmax",
    "autotune_reset", "autotune_wait", "transpose", "fill", "astype", "fuse",
    # commands
    "submit", "poll", "wait", "set_eager",
    # pipelines
    "Pipeline", "pipeline", "pipeline_add", "pipeline_run", "free_pipeline",
    # streams and transfers
    "Stream", "Event", "Timeline", "StreamMap", "create_stream", "stream_map", "upload",
    "release_staging", "device_processes", "DeviceProcesses", "ProcessMap", "load_each",
    "LoadEach",
    # surfaces
    "create_surface", "set_pixels", "present", "run_to_surface",
]


# -- buffer functions ------------------------------------------------------------------------
def read(buf: Buffer) -> bytes:
    """The buffer's contents as bytes (blocks until ready)."""
    return _check_buffer(buf, "buf").read()


def read_binary(buf: Buffer) -> bytes:
    """Same as read(): the raw little-endian bytes."""
    return read(buf)


def read_list(buf: Buffer) -> list:
    """The buffer's contents as a (nested) Python list."""
    return _check_buffer(buf, "buf").tolist()


def shape(buf: Buffer) -> tuple[int, ...]:
    return _check_buffer(buf, "buf").shape


def dtype(buf: Buffer) -> str:
    """The buffer's dtype name ("f32", ...) as a plain str (``buf.dtype`` is the DType)."""
    return _check_buffer(buf, "buf").dtype.name


def size(buf: Buffer) -> int:
    """Size in bytes (``buf.size`` counts elements, ``buf.nbytes`` is this)."""
    return _check_buffer(buf, "buf").nbytes


def free(buf: Buffer) -> None:
    """Release the buffer's GPU memory (deferred while a command still uses it)."""
    if not isinstance(buf, Buffer):
        raise ArgumentError(f"buf: expected a wgc.Buffer, got {type(buf).__name__}")
    buf.free()


def free_many(bufs) -> None:
    """Free every buffer of ``bufs`` (checked first: nothing is freed if one is not a Buffer)."""
    if isinstance(bufs, Buffer) or not isinstance(bufs, Iterable) or isinstance(bufs, str):
        raise ArgumentError(f"bufs: expected a list of wgc.Buffer, got {type(bufs).__name__}")
    bufs = list(bufs)
    for i, b in enumerate(bufs):
        if not isinstance(b, Buffer):
            raise ArgumentError(f"bufs[{i}]: expected a wgc.Buffer, got {type(b).__name__}")
    for b in bufs:
        b.free()


# -- kernels --------------------------------------------------------------------------------
_custom.runner = run_kernel  # what a kernel object runs through when called


def kernels() -> list[str]:
    """Names of every registered kernel."""
    return _kernel_names()


def kernel_info(name: str) -> Kernel:
    """The Kernel object behind a name (inputs, params, dtypes, description)."""
    return _registry.get(name)


def kernels_stats(device: Device | None = None) -> dict:
    """Counters of GPU objects the kernel machinery created on ``device`` (default: the
    current one): pipelines, bind groups, params buffers, and buffers (memory allocated for
    arrays, results and temporaries; memory reused from the pool is not counted). A second
    identical run leaves them unchanged."""
    from .runtime import resolve

    return dict(resolve(device).stats)


def _whole(name: str, inputs: list, out: Buffer | None, params=None) -> Buffer:
    """A builtin that writes every element of its output, queued as the operators are: a new
    output is memory from the device's pool, as ``a + b``'s is (a fresh WebGPU buffer is
    zero-filled first: 9.6 against 0.34 ms for a 64M-element f32 add on an H100)."""
    if out is None:
        out = _prepare_output(_registry.get(name), inputs, None, params, pooled=True)
    return _enqueue(name, inputs, out, params)


def sub(a: Buffer, b: Buffer, out: Buffer | None = None) -> Buffer:
    """out = a - b, broadcast as numpy does (dtypes must match)."""
    return _whole("elementwise_sub", [a, b], out)


def scale(inp: Buffer, scalar, out: Buffer | None = None) -> Buffer:
    """out = inp * scalar."""
    return _whole("scale", [inp], out, {"scalar": scalar})


def relu(inp: Buffer, out: Buffer | None = None, slope: float = 0.0) -> Buffer:
    """out = max(inp, 0), or inp * slope where inp < 0 (leaky ReLU)."""
    if out is None and type(inp) is Buffer and type(slope) in (int, float) and slope == 0:
        return _array.relu(inp, slope, "inp")  # (the operators' short path)
    return _whole("relu", [inp], out, {"slope": slope})


def transpose(a: Buffer, out: Buffer | None = None, *, axes=None) -> Buffer:
    """a with its axes permuted, as numpy's transpose: reversed (a 2-D a becomes a.T), or in
    the order ``axes`` gives. Always a new buffer (or ``out``): a 2-D product runs the tiled
    transpose kernel, other permutations a strided copy."""
    return _array.transpose(a, out, axes=axes)


def fill(out: Buffer, value) -> Buffer:
    """Set every element of ``out`` to ``value`` (converted exactly to out's dtype)."""
    return _enqueue("fill", [], out, {"value": value})

# -- reductions (wgc.sum/max/min come from __getattr__ below: no builtin is shadowed here) ----
def _reduce(name: str, x: Buffer, axis, out: Buffer | None, keepdims: bool = False):
    _check_buffer(x, "x")
    params = {"axis": axis, "keepdims": keepdims}
    if out is None:
        shape, dt = _registry.get(name).output_spec([x], params)
        out = empty(shape, dt, label=f"{name}-out", device=x.device)
    return _enqueue(name, [x], out, params)


def reduce_sum(x: Buffer, axis: int | tuple[int, ...] | None = -1, out: Buffer | None = None,
               keepdims: bool = False) -> Buffer:
    """Sum over ``axis``: the last axis (-1, the default), any axis or tuple of axes, or
    everything (None: shape ()); ``keepdims`` keeps reduced axes as 1, as numpy does.
    Integers wrap around in their own dtype; u8 sums into u32. An empty axis sums to 0."""
    return _reduce("sum", x, axis, out, keepdims)


def reduce_max(x: Buffer, axis: int | tuple[int, ...] | None = -1, out: Buffer | None = None,
               keepdims: bool = False) -> Buffer:
    """Maximum over ``axis`` (as reduce_sum's); same dtype. An empty axis is a ShapeError."""
    return _reduce("max", x, axis, out, keepdims)


def reduce_min(x: Buffer, axis: int | tuple[int, ...] | None = -1, out: Buffer | None = None,
               keepdims: bool = False) -> Buffer:
    """Minimum over ``axis`` (as reduce_sum's); same dtype. An empty axis is a ShapeError."""
    return _reduce("min", x, axis, out, keepdims)


def reduce_mean(x: Buffer, axis: int | tuple[int, ...] | None = -1, out: Buffer | None = None,
                keepdims: bool = False) -> Buffer:
    """Mean over ``axis`` (as reduce_sum's): f64 for f64, f16 for f16, f32 for f32 and every
    integer dtype (accumulated in f32). The mean of an empty axis is nan, as in numpy."""
    return _reduce("mean", x, axis, out, keepdims)


def reduce_argmax(x: Buffer, axis: int | None = -1, out: Buffer | None = None,
                  keepdims: bool = False) -> Buffer:
    """u32 index of the first maximum along one axis (-1, the default, or any int), or in
    the flattened buffer (axis=None). An empty axis is a ShapeError."""
    return _reduce("argmax", x, axis, out, keepdims)


# -- the names shared with the array namespace: the same functions (wgc.sum(x) is xp.sum(x):
# every axis by default, the standard's dtypes), with wgcompute's explicit output ``out`` as
# an extension (the result written into that buffer: its dtype and shape) ---------------------
def _into(where: str, r: Buffer, out: Buffer) -> Buffer:
    _check_buffer(out, "out")
    if out.dtype != r.dtype:
        raise DtypeError(f"{where}: out is {out.dtype}; the result is {r.dtype}")
    if out.shape != r.shape:
        raise ShapeError(f"{where}: out is {out.shape}; the result is {r.shape}")
    out[...] = r
    return out


def _f16(*xs) -> bool:
    """An f16 Buffer among ``xs``: a dtype outside the standard, which the namespace refuses;
    the Buffer's own operators and methods (the same rules) compute it."""
    return any(isinstance(x, Buffer) and x.dtype == "f16" for x in xs)


def _same(x1, x2, out, floats_only: bool = False) -> bool:
    """Both operands Buffers of out's dtype: the kernel writes out directly."""
    return (isinstance(x1, Buffer) and isinstance(x2, Buffer) and isinstance(out, Buffer)
            and x1.dtype == x2.dtype == out.dtype and (x1.dtype.kind == "f" or not floats_only))


def add(x1, x2, /, out: Buffer | None = None) -> Buffer:
    """x1 + x2: the array namespace's ``add`` (broadcasting, promotion, Python scalars);
    ``out``: written into that buffer instead of a new one."""
    if out is None:
        return _xp.add(x1, x2) if not _f16(x1, x2) else _operator.add(x1, x2)
    if _same(x1, x2, out):
        return _whole("elementwise_add", [x1, x2], out)
    return _into("add", _xp.add(x1, x2), out)


def multiply(x1, x2, /, out: Buffer | None = None) -> Buffer:
    """x1 * x2: the array namespace's ``multiply``; ``out`` as add's."""
    if out is None:
        return _xp.multiply(x1, x2) if not _f16(x1, x2) else _operator.mul(x1, x2)
    if _same(x1, x2, out):
        return _whole("elementwise_multiply", [x1, x2], out)
    return _into("multiply", _xp.multiply(x1, x2), out)


def divide(x1, x2, /, out: Buffer | None = None) -> Buffer:
    """x1 / x2: the array namespace's ``divide`` (true division: integers give floats);
    ``out`` as add's."""
    if out is None:
        return _xp.divide(x1, x2) if not _f16(x1, x2) else _operator.truediv(x1, x2)
    if _same(x1, x2, out, floats_only=True):
        return _whole("elementwise_divide", [x1, x2], out)
    return _into("divide", _xp.divide(x1, x2), out)


def matmul(x1, x2, /, out: Buffer | None = None, precision: str | None = None) -> Buffer:
    """x1 @ x2: the array namespace's ``matmul`` ((..., M, K) @ (..., K, N), batch dimensions
    broadcast, a 1-D x1 a row and a 1-D x2 a column). ``out`` as add's; for f16,
    ``precision="mixed"`` sums each 8-16 wide k slice in f16 (faster, looser: see the matmul
    kernel's docs); the default sums in f32."""
    if out is None and precision is None and not _f16(x1, x2):
        return _xp.matmul(x1, x2)
    return _enqueue("matmul", [x1, x2], out, None if precision is None else
                    {"precision": precision})


def astype(x, dtype, /, *, copy: bool = True, device=None, casting: str | None = None,
           rounding: str | None = None, out: Buffer | None = None) -> Buffer:
    """``x`` converted to ``dtype``: the array namespace's ``astype`` (numpy's conversion:
    floats to integers truncate and saturate, nan gives 0, wider integers keep their low bits).
    ``casting="exact"`` refuses any change of value instead (a DtypeError naming the first
    value; ``rounding`` 'trunc', 'round', 'floor' or 'ceil' lets floats go to integers), as
    ``Buffer.astype`` does by default; ``out``: written into that buffer."""
    if not isinstance(copy, bool):
        raise ArgumentError(f"copy: expected True or False, got {copy!r}")
    target = _dtype_of(dtype, "dtype")
    standard = target.name != "f16" and getattr(x, "dtype", None) != "f16"
    if casting is None and rounding is None and out is None and standard:
        return _xp.astype(x, target, copy=copy, device=device)
    _check_buffer(x, "x")
    if device is not None and _resolve(device) is not x.device:
        raise ArgumentError("astype: device= with casting, rounding or out; move x first "
                            "(x.to(device))")
    if not copy and casting is None and out is None and x.dtype == target:
        return x
    return _array.astype(x, target, rounding=rounding,
                         casting="unsafe" if casting is None else casting, out=out)


def _sum(x, /, *, axis=None, dtype=None, keepdims: bool = False,
         out: Buffer | None = None) -> Buffer:
    """The sum over ``axis`` (every axis by default): the array namespace's ``sum``."""
    r = _xp.sum(x, axis=axis, dtype=dtype, keepdims=keepdims) if not _f16(x) else \
        x.sum(axis=axis, keepdims=keepdims)
    return r if out is None else _into("sum", r, out)


def _max(x, /, *, axis=None, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
    """The maximum over ``axis`` (every axis by default): the array namespace's ``max``."""
    r = _xp.max(x, axis=axis, keepdims=keepdims) if not _f16(x) else \
        x.max(axis=axis, keepdims=keepdims)
    return r if out is None else _into("max", r, out)


def _min(x, /, *, axis=None, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
    """The minimum over ``axis`` (every axis by default): the array namespace's ``min``."""
    r = _xp.min(x, axis=axis, keepdims=keepdims) if not _f16(x) else \
        x.min(axis=axis, keepdims=keepdims)
    return r if out is None else _into("min", r, out)


def mean(x, /, *, axis=None, keepdims: bool = False, out: Buffer | None = None) -> Buffer:
    """The mean over ``axis`` (every axis by default) of a floating-point array: the array
    namespace's ``mean``."""
    r = _xp.mean(x, axis=axis, keepdims=keepdims) if not _f16(x) else \
        x.mean(axis=axis, keepdims=keepdims)
    return r if out is None else _into("mean", r, out)


def argmax(x, /, *, axis: int | None = None, keepdims: bool = False,
           out: Buffer | None = None) -> Buffer:
    """The index of the first maximum (of the flattened array by default, or along ``axis``):
    the array namespace's ``argmax``."""
    r = _xp.argmax(x, axis=axis, keepdims=keepdims) if not _f16(x) else \
        x.argmax(axis=axis, keepdims=keepdims)
    return r if out is None else _into("argmax", r, out)


def softmax(x: Buffer, axis: int | None = -1, out: Buffer | None = None) -> Buffer:
    """exp(x - max) / sum(exp(x - max)) along the last axis (axis=-1) or over every element
    (axis=None); f32 or f16 (computed in f32), same shape."""
    _check_buffer(x, "x")
    return _enqueue("softmax", [x], out, {"axis": axis})


_BUILTIN_NAMED = {"sum": _sum, "max": _max, "min": _min}

# what a first use imports (module, name in it; None: the module itself): `import wgcompute`
# loads only what computing on a Buffer needs
_ON_FIRST_USE = {
    "image": ("image", None),  # wgc.image: image files, numpy conversions, --pipeline text
    "fuse": ("_fusion", "fuse"),
    "ElementwiseKernel": ("kernels.user.elementwise", "ElementwiseKernel"),
    "ReductionKernel": ("kernels.user.reduction", "ReductionKernel"),
    **{n: ("streams", n) for n in ("Event", "Stream", "create_stream", "release_staging",
                                   "upload")},
}

if TYPE_CHECKING:  # what __getattr__ hands out, spelled for type checkers and editors only
    from . import dask as dask
    from . import image as image
    from . import ml as ml
    from ._fusion import fuse as fuse
    from .kernels.user.elementwise import ElementwiseKernel as ElementwiseKernel
    from .kernels.user.reduction import ReductionKernel as ReductionKernel
    from .streams import Event as Event
    from .streams import Stream as Stream
    from .streams import create_stream as create_stream
    from .streams import release_staging as release_staging
    from .streams import upload as upload

    sum = _sum  # noqa: A001
    max = _max  # noqa: A001
    min = _min  # noqa: A001


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_BUILTIN_NAMED) | set(_ON_FIRST_USE) | {"dask", "ml"})


def __getattr__(name: str):
    # wgc.sum / wgc.max / wgc.min resolve here (PEP 562), so they never shadow the builtins
    # for code in this module; wgc.dask and wgc.ml too, so that `import wgcompute` loads
    # neither dask nor onnx
    if name == "dask":  # wgc.dask: Dask clusters, imported on first use (needs wgcompute[dask])
        try:
            import wgcompute.dask  # not `from . import`: that would look the name up here again
        except MissingExtraError as e:  # an AttributeError here: hasattr(wgc, "dask") is False
            raise MissingExtraAttributeError(str(e)) from e
        return wgcompute.dask
    if name == "ml":  # wgc.ml: ONNX inference, imported on first use (needs wgcompute[ml])
        import importlib

        return importlib.import_module(".ml", __name__)
    where = _ON_FIRST_USE.get(name)
    if where is not None:
        import importlib

        module = importlib.import_module(f".{where[0]}", __name__)
        value = module if where[1] is None else getattr(module, where[1])
        globals()[name] = value  # found directly from now on
        return value
    try:
        return _BUILTIN_NAMED[name]
    except KeyError:
        raise AttributeError(f"module 'wgcompute' has no attribute {name!r}") from None


def autotune_wait(device: Device | None = None, timeout: float | None = None) -> bool:
    """Wait until ``device``'s (default: the current one's) background tuning has timed every
    configuration handed to it (True), or ``timeout`` seconds passed (False). Nothing to wait
    for when tuning runs on the caller or is off."""
    from ._args import check_timeout
    from .kernels.core import tuning
    from .runtime import resolve

    return tuning.wait(resolve(device), check_timeout(timeout))


def autotune_reset() -> None:
    """Forget the tile configurations the autotuner chose (the on-disk cache for every
    adapter); the next matmul that needs one tunes again on a real GPU."""
    from .autotune import autotune_reset as _reset

    _reset()


# -- surfaces (wgcompute.surface imports rendercanvas: loaded on first use) -----------------
def create_surface(width: int, height: int, title: str = "wgcompute", offscreen=None,
                   device: Device | None = None):
    """A Surface showing GPU buffers: a glfw window, or an offscreen canvas when there is no
    display or ``offscreen=True`` (see wgcompute.surface.Surface). Needs the window extra
    (rendercanvas, and glfw for a window)."""
    from ._extras import require

    require("rendercanvas", "wgc.create_surface")
    from .surface import create_surface as _create_surface

    return _create_surface(width, height, title, offscreen, device)


def set_pixels(surface, data):
    """Set the image a surface shows: numpy or Buffer, (H, W[, C]), u8 or f32."""
    from .surface import set_pixels as _set_pixels

    return _set_pixels(surface, data)


def present(surface) -> None:
    """Draw the surface's image to its window (or offscreen canvas)."""
    from .surface import present as _present

    _present(surface)


def run_to_surface(kernel, inputs, output, surface, params=None, *, present: bool = True):
    """Run a kernel (or a Pipeline) and show its output without reading it back to the CPU;
    returns the Command."""
    from .surface import run_to_surface as _run_to_surface

    return _run_to_surface(kernel, inputs, output, surface, params, present=present)
