"""The optional extras of pyproject.toml (image, window, ml, dask, nvidia): which package each
module comes from, and the one way a missing one is reported (MissingExtraError)."""

from __future__ import annotations

import importlib

from .errors import MissingExtraError

# top-level module -> (the package pip installs, the extra that brings it)
PACKAGES = {
    "imageio": ("imageio", "image"), "tqdm": ("tqdm", "image"),
    "rendercanvas": ("rendercanvas", "window"), "glfw": ("glfw", "window"),
    "onnx": ("onnx", "ml"), "onnxruntime": ("onnxruntime", "ml"), "PIL": ("pillow", "ml"),
    "dask": ("dask[array]", "dask"), "distributed": ("distributed", "dask"),
    "pynvml": ("nvidia-ml-py", "nvidia"), "cuda": ("cuda-python", "nvidia"),
}


def install_hint(extra: str) -> str:
    return f'pip install "wgcompute[{extra}]"'


def missing(module: str, feature: str, error: ImportError) -> MissingExtraError:
    """The MissingExtraError for ``module`` failing to import with ``error``."""
    package, extra = PACKAGES[module.split(".")[0]]
    top = module.split(".")[0]
    if error.name is None or error.name.split(".")[0] == top:
        why = "which is not installed"
    else:  # installed, but something it needs is not
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        why = f"which does not import ({first})"
    return MissingExtraError(f"{feature} needs {package}, {why}: {install_hint(extra)}",
                             extra=extra, package=package, name=error.name or module)


def require(module: str, feature: str):
    """``module`` imported, or a MissingExtraError naming ``feature`` and the extra to
    install. Cheap once imported (sys.modules)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise missing(module, feature, e) from e
