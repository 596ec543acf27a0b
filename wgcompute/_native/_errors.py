"""What the native calls raise themselves (besides wgpu's own GPUError)."""


class NativeError(RuntimeError):
    """A native call failed (a buffer that should be mapped is not, a module not created)."""
