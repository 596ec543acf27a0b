"""Work as data: a kernel with params, a Pipeline (its recipe), a chain of kernel steps or a
callable, turned into a small hashable Work that pickles, and the registry of those kinds."""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

import wgcompute as wgc

from ..buffer import normalize_shape
from ..dtypes import DTYPES
from ..dtypes import dtype as resolve_dtype
from ..kernels import registry
from ..kernels.core.base import Kernel, Meta
from ..kernels.core.registry import CustomKernel, KernelRecipe
from ..kernels.image.image import ImageKernel, auto_radius
from ..recipes import PipelineRecipe, check, freeze, thaw

__all__ = ["Work", "WorkKind", "work", "register_work_kind", "work_kinds"]


@dataclass(frozen=True)
class Work:
    """What runs on every chunk or file, as data: its ``kind`` (a registered WorkKind's
    name), the kind's ``recipe`` and ``params``, all hashable. It pickles small, compares
    by content, and a worker builds it on its device once (then reuses it)."""

    kind: str
    recipe: Any
    params: tuple = ()

    @property
    def _kind(self) -> WorkKind:
        return _KINDS[self.kind]

    def output_spec(self, shape, dtype) -> tuple[tuple[int, ...], str]:
        """The result's shape and dtype (a wgcompute dtype name) for an input of ``shape``
        and ``dtype``; checks the input fits, without touching a GPU."""
        return self._kind.output_spec(self, tuple(int(d) for d in shape),
                                      resolve_dtype(dtype, "dtype").name)

    def halo(self):
        """How far the work reads around an element, per axis (a dict), or None when that is
        unknown (then map_overlap needs depth=)."""
        return self._kind.halo(self)

    def lane_key(self, shape, dtype):
        """Inputs with equal keys share one stream_map on a worker."""
        return self._kind.lane_key(self, shape, dtype)

    def stream_args(self, shape, dtype) -> dict:
        """stream_map's arguments (work, params, out_shape, out_dtype) for inputs of this
        shape and dtype; builds what it needs on this process's device (cached)."""
        return self._kind.stream_args(self, shape, dtype)

    @property
    def image(self) -> bool:
        """Runs image kernels, which see axes 0 and 1 as rows and columns and the rest as
        one pixel: those axes must not be split."""
        return self._kind.image(self)

    def digest(self) -> str:
        return hashlib.sha256(pickle.dumps(self, protocol=5)).hexdigest()

    def __dask_tokenize__(self):
        return self.digest()

    def __repr__(self) -> str:
        return f"<wgc.dask.Work {self.kind}: {self._kind.describe(self)}>"


class WorkKind:
    """One kind of work. Subclass it and pass an instance to register_work_kind: ``accepts``
    tells whether an object is of this kind; ``make`` turns it into a Work (client side, no
    GPU needed); the rest answer for a Work of this kind. ``stream_args`` runs on the worker
    and returns what wgc.stream_map takes (it may build and cache GPU objects there)."""

    name = ""

    def accepts(self, obj) -> bool:
        raise NotImplementedError

    def make(self, obj, params: dict | None, like) -> Work:
        raise NotImplementedError

    def output_spec(self, w: Work, shape, dtype):
        raise NotImplementedError

    def stream_args(self, w: Work, shape, dtype) -> dict:
        raise NotImplementedError

    def lane_key(self, w: Work, shape, dtype):
        return w

    def halo(self, w: Work):
        return None

    def image(self, w: Work) -> bool:
        return False

    def describe(self, w: Work) -> str:
        return repr(w.recipe)


_KINDS: dict[str, WorkKind] = {}


def register_work_kind(kind: WorkKind) -> WorkKind:
    """Add a kind of work that wgc.dask accepts (the later-registered kinds are asked
    first). Returns ``kind``."""
    if not isinstance(kind, WorkKind) or not kind.name:
        raise wgc.ArgumentError(f"kind: expected a named wgc.dask.WorkKind instance, got "
                                f"{kind!r}")
    _KINDS.pop(kind.name, None)
    _KINDS[kind.name] = kind
    return kind


def work_kinds() -> list[str]:
    return list(_KINDS)


def work(obj, params: dict | None = None, *, like=None) -> Work:
    """``obj`` as a Work: a kernel name or Kernel (with ``params``), a wgc.Pipeline (or its
    recipe), a list of steps ``[(kernel, params), ...]`` run as one pipeline, or a
    callable ``fn(inp, out)`` as wgc.stream_map takes it. ``like`` = (shape, dtype) of a
    typical input (a chain of steps needs it to lay out its buffers)."""
    if isinstance(obj, Work):
        if params:
            raise wgc.ArgumentError("params: already part of the Work")
        return obj
    if params is not None and not isinstance(params, dict):
        raise wgc.ArgumentError(f"params: expected a dict, got {type(params).__name__}")
    for kind in reversed(list(_KINDS.values())):
        if kind.accepts(obj):
            return kind.make(obj, params, like)
    raise wgc.ArgumentError(f"work: expected a kernel name, a wgc.Kernel, a wgc.Pipeline, a "
                            f"list of (kernel, params) steps or a callable(inp, out), got "
                            f"{type(obj).__name__} (kinds: {', '.join(_KINDS)})")


# -- built-in kinds --------------------------------------------------------------------------
def _kernel(ref) -> Kernel:
    if isinstance(ref, KernelRecipe):
        k = registry._kernels.get(ref.name)
        if isinstance(k, CustomKernel) and k.recipe() == ref:
            return k
        return registry.kernel_from_recipe(ref)
    return registry.get(ref)


def _ref(k: Kernel):
    return k.recipe() if isinstance(k, CustomKernel) else k.name


def _name(ref) -> str:
    return ref.name if isinstance(ref, KernelRecipe) else ref


# Element-wise kernels read nothing around an element; stencils read their radius.
_POINTWISE = {"relu", "scale", "copy", "invert", "brightness_contrast", "threshold",
              "grayscale"}


def _stencil_radius(name: str, params: dict, const_shapes=()) -> int | None:
    if name in _POINTWISE:
        return 0
    if name in ("gaussian_blur", "sharpen"):
        r = params.get("radius")
        return auto_radius(float(params.get("sigma", 1.0))) if r is None else int(r)
    if name == "blur":
        return int(params.get("radius", 1))
    if name == "sobel":
        return 1
    if name == "convolve2d" and const_shapes:
        return max(const_shapes[0]) // 2
    return None


def _image_halo(r):
    return None if r is None else {0: r, 1: r}


class KernelKind(WorkKind):
    """A kernel of one input and one output, run with params."""

    name = "kernel"

    def accepts(self, obj) -> bool:
        return isinstance(obj, (str, Kernel))

    def make(self, obj, params, like) -> Work:
        k = registry.get(obj)
        if len(k.inputs) != 1 or k.output is None:
            raise wgc.ArgumentError(f"work: kernel {k.name!r} takes {len(k.inputs)} inputs; a "
                                    f"kernel here takes one (use a wgc.Pipeline for more)")
        return Work(self.name, _ref(k), freeze(params or {}))

    def output_spec(self, w, shape, dtype):
        k = _kernel(w.recipe)
        meta = Meta(shape, dtype)
        params = k.resolve_params(thaw(w.params), DTYPES[dtype])
        out_shape, out_dtype = k.output_spec([meta], params)
        out = Meta(tuple(out_shape), resolve_dtype(out_dtype).name)
        if out.dtype not in k.dtypes:  # what binding would refuse on every worker
            raise wgc.DtypeError(f"{k.name}: dtype {out.dtype} is not supported (the chunks "
                                 f"are {dtype}); expected one of {', '.join(k.dtypes)}")
        check(k, [meta], out, params)
        return out.shape, out.dtype

    def stream_args(self, w, shape, dtype):
        return {"work": _kernel(w.recipe).name, "params": thaw(w.params)}

    def halo(self, w):
        return _image_halo(_stencil_radius(_name(w.recipe), thaw(w.params)))

    def image(self, w):
        return isinstance(_kernel(w.recipe), ImageKernel)

    def describe(self, w):
        ps = ", ".join(f"{k}={v!r}" for k, v in w.params)
        return f"{_name(w.recipe)}({ps})"


class PipelineKind(WorkKind):
    """A wgc.Pipeline, as its recipe; built per input shape where its buffers' shapes follow
    from the input (a chain of kernels), else for its own input shape only."""

    name = "pipeline"

    def accepts(self, obj) -> bool:
        return isinstance(obj, (wgc.Pipeline, PipelineRecipe))

    def make(self, obj, params, like) -> Work:
        if params:
            raise wgc.ArgumentError("params: a Pipeline's stages hold their params")
        recipe = obj if isinstance(obj, PipelineRecipe) else PipelineRecipe.of(obj)
        return Work(self.name, recipe)

    def output_spec(self, w, shape, dtype):
        return w.recipe.output_spec(shape, dtype)

    def stream_args(self, w, shape, dtype):
        return {"work": w.recipe.build(shape, dtype)}

    def lane_key(self, w, shape, dtype):
        return (w, tuple(shape), str(dtype))

    def halo(self, w):
        total = 0
        slots = w.recipe.slots
        for st in w.recipe.stages:
            if st.op == "barrier":
                continue
            if st.op == "copy_buffer":
                continue
            consts = [slots[i].shape for i in st.inputs[1:] if slots[i].data is not None]
            r = _stencil_radius(_name(st.kernel), thaw(st.params), consts)
            if r is None:
                return None
            total += r
        return _image_halo(total)

    def image(self, w):
        return any(st.op == "run_kernel" and isinstance(_kernel(st.kernel), ImageKernel)
                   for st in w.recipe.stages)

    def describe(self, w):
        return repr(w.recipe)


class ChainKind(PipelineKind):
    """A list of steps ``[(kernel, params), ...]`` (a name alone has no params; a third
    item lists numpy arrays given as extra inputs, e.g. convolve2d's weights): one pipeline
    whose buffers follow the input's shape."""

    name = "chain"

    def accepts(self, obj) -> bool:
        return isinstance(obj, (list, tuple)) and bool(obj)

    def make(self, obj, params, like) -> Work:
        if params:
            raise wgc.ArgumentError("params: give each step its own: [(kernel, params), ...]")
        steps = []
        for i, step in enumerate(obj):
            if isinstance(step, (str, Kernel)):
                step = (step,)
            if not isinstance(step, (list, tuple)) or not 1 <= len(step) <= 3:
                raise wgc.ArgumentError(f"work[{i}]: expected (kernel, params) or (kernel, "
                                        f"params, [extra inputs]), got {step!r}")
            k = registry.get(step[0])
            p = step[1] if len(step) > 1 and step[1] is not None else {}
            extra = [np.asarray(a) for a in (step[2] if len(step) > 2 else ())]
            steps.append((k, p, extra))
        shape, dtype = like if like is not None else ((64, 64, 4), "u8")
        return Work(self.name, PipelineRecipe.chain(steps, shape, dtype))


class CallableKind(WorkKind):
    """A callable ``fn(inp, out)`` queuing GPU work from buffer ``inp`` into ``out``
    (shaped like ``inp``, or ``out_shape`` / ``out_dtype`` from params: a classifier's
    (N, classes) for every batch), as wgc.stream_map runs it. It travels pickled (by
    reference, or by value through cloudpickle)."""

    name = "callable"

    def accepts(self, obj) -> bool:
        return callable(obj) and not isinstance(obj, (type, Kernel, wgc.Pipeline))

    def make(self, obj, params, like) -> Work:
        params = dict(params or {})
        bad = set(params) - {"out_dtype", "out_shape"}
        if bad:
            raise wgc.ArgumentError(f"params: a callable takes only out_dtype and out_shape, "
                                    f"got {', '.join(sorted(bad))}")
        if "out_dtype" in params:
            params["out_dtype"] = resolve_dtype(params["out_dtype"], "out_dtype").name
        if "out_shape" in params:
            params["out_shape"] = normalize_shape(params["out_shape"], "out_shape")
        import cloudpickle

        return Work(self.name, cloudpickle.dumps(obj), freeze(params))

    def output_spec(self, w, shape, dtype):
        params = dict(w.params)
        return params.get("out_shape", shape), params.get("out_dtype", dtype)

    def stream_args(self, w, shape, dtype):
        params = dict(w.params)
        return {"work": _unpickled(w.recipe), "out_dtype": params.get("out_dtype"),
                "out_shape": params.get("out_shape")}

    def describe(self, w):
        return f"{_unpickled(w.recipe)!r}"


_fns: dict[bytes, Any] = {}


def _unpickled(data: bytes):
    fn = _fns.get(data)
    if fn is None:
        fn = _fns[data] = pickle.loads(data)
    return fn


for _kind in (CallableKind(), ChainKind(), PipelineKind(), KernelKind()):
    register_work_kind(_kind)
