"""The one error tree of wgcompute: every failure a user can see is a WgComputeError.

Messages name the argument at fault and what was expected."""

from __future__ import annotations


class WgComputeError(Exception):
    """Base class of every error wgcompute raises."""


class ArgumentError(WgComputeError, ValueError):
    """An argument has the wrong type or value (not a shape or dtype problem)."""


class ShapeError(WgComputeError, ValueError):
    """Shapes do not fit: a buffer's shape, or two buffers' shapes against each other."""


class DtypeError(WgComputeError, TypeError):
    """A dtype is unknown, does not match, or data cannot be represented in it exactly."""


class UnsupportedDtypeError(DtypeError):
    """The dtype exists but this adapter lacks the feature a kernel needs for it."""

    def __init__(self, message: str, feature: str | None = None):
        super().__init__(message)
        self.feature = feature


class KernelNotFoundError(WgComputeError, KeyError):
    """No kernel of that name is registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class ShaderCompileError(WgComputeError):
    """A WGSL shader failed to compile; the message shows the source with line numbers."""

    def __init__(self, label: str, source: str, compiler_message: str):
        self.label = label
        self.source = source
        self.compiler_message = compiler_message
        numbered = "\n".join(f"{i:4d} | {line}" for i, line in enumerate(source.splitlines(), 1))
        super().__init__(
            f"shader {label!r} does not compile:\n{compiler_message.strip()}\n\nsource:\n{numbered}"
        )


class BufferFreedError(WgComputeError):
    """A buffer was used after free()."""


class IndexingError(WgComputeError, IndexError):
    """An index is out of range, or of a kind buffers do not take (advanced indexing)."""


class DeviceError(WgComputeError):
    """No usable adapter, the device was lost or closed, or the GPU refused an operation."""


class DeviceLostError(DeviceError):
    """The device was lost (driver reset, ``destroy()``): its pending commands failed with
    this error and its objects can no longer be used. Other devices keep working; the default
    device is opened afresh on next use."""


class CommandFailedError(WgComputeError):
    """An asynchronous command failed; ``cause`` holds the reason."""

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


class ConvergenceError(WgComputeError, ArithmeticError):
    """An iterative method (a Jacobi SVD's sweeps) did not converge within its bound of
    iterations; its results would not be accurate, so none are returned."""


class PipelineError(WgComputeError):
    """A pipeline stage is invalid; the message names the stage index."""


class TimeoutError(WgComputeError, TimeoutError):  # noqa: A001 - also a builtins.TimeoutError
    """wait() ran out of time before the command finished."""


class SurfaceError(WgComputeError):
    """A surface (window or offscreen canvas) could not be created or used."""


class ModelError(WgComputeError):
    """A model cannot be loaded or run: unsupported operators (``unsupported`` lists every
    one as (op type, node name, opset, reason)), a malformed graph, or inputs it cannot take."""

    def __init__(self, message: str, unsupported=()):
        super().__init__(message)
        self.unsupported = list(unsupported)


class MissingExtraError(WgComputeError, ImportError):
    """A feature needs a package of one of wgcompute's optional extras, and it is not
    installed (or does not import); the message names the feature and the command that
    installs it, e.g. ``pip install "wgcompute[ml]"``. ``extra`` and ``package`` say which;
    ``name`` (as ImportError's) is the module that failed to import."""

    def __init__(self, message: str, *, extra: str = "", package: str = "",
                 name: str | None = None):
        super().__init__(message, name=name)
        self.extra = extra
        self.package = package


class MissingExtraAttributeError(WgComputeError, AttributeError):
    """``wgc.dask`` read while its extra is missing: an AttributeError, so that
    ``hasattr(wgc, "dask")`` is False, with the same message as the MissingExtraError that
    is its ``__cause__`` (an exception cannot be both an ImportError and an AttributeError)."""
