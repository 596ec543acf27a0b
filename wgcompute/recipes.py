"""Pipelines as data: a recipe of buffer placeholders, stages and constants that pickles
small, compares by content, and is built on this process's device once per input shape."""

from __future__ import annotations

import hashlib
import pickle
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .buffer import buffer as _new_buffer
from .buffer import empty
from .dtypes import DTYPES
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, PipelineError, ShapeError, WgComputeError
from .kernels import registry
from .kernels.core.base import Meta
from .kernels.core.registry import CustomKernel, KernelRecipe, kernel_from_recipe
from .pipeline import Pipeline, install_recipes

__all__ = ["Slot", "StageSpec", "PipelineRecipe", "freeze", "thaw", "check",
           "pipeline_from_recipe"]


def freeze(value):
    """Params as hashable data: dicts become sorted (key, value) tuples, lists tuples."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(freeze(v) for v in value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def thaw(params: tuple) -> dict:
    return dict(params)


@dataclass(frozen=True)
class Slot:
    """One buffer of the pipeline as a placeholder: the shape and dtype it had; ``derived``
    when that is what the stage first writing it makes of its inputs (so another input shape
    gives another shape); ``data`` the contents of a constant (read before any stage writes
    it: filter weights, a bias)."""

    shape: tuple[int, ...]
    dtype: str
    derived: bool = False
    data: bytes | None = None


@dataclass(frozen=True)
class StageSpec:
    """A stage with its buffers as slot indices; ``kernel`` a built-in's name or a custom
    kernel's KernelRecipe."""

    op: str
    kernel: str | KernelRecipe | None
    inputs: tuple[int, ...]
    output: int | None
    params: tuple


def _kernel_of(ref):
    """The Kernel a stage names (a custom kernel is registered here on first use)."""
    if isinstance(ref, KernelRecipe):
        k = registry._kernels.get(ref.name)
        if isinstance(k, CustomKernel) and k.recipe() == ref:
            return k
        return kernel_from_recipe(ref)
    return registry.get(ref)


@dataclass(frozen=True)
class PipelineRecipe:
    """A Pipeline as data. ``input`` is the slot each batch is copied into (the first
    stage's first input), ``result`` the slot read back (the last stage's output). A
    Pipeline pickles as its recipe; building one is cached per (recipe, input shape,
    dtype) in the receiving process."""

    label: str
    slots: tuple[Slot, ...]
    stages: tuple[StageSpec, ...]
    input: int
    result: int

    # -- from a Pipeline -------------------------------------------------------------------
    @classmethod
    def of(cls, pipeline: Pipeline) -> PipelineRecipe:
        """The recipe of ``pipeline``. Blocks to read back its constants (buffers a stage
        reads before any stage writes them), whose contents travel with the recipe."""
        if not isinstance(pipeline, Pipeline):
            raise ArgumentError(f"pipeline: expected a wgc.Pipeline, got "
                                f"{type(pipeline).__name__}")
        pipeline._check_open()
        specs = pipeline.stages
        if not specs or not specs[0].get("inputs") or specs[-1].get("output") is None:
            raise PipelineError(f"{pipeline!r}: a recipe needs a first stage with an input and "
                                f"a last stage with an output")
        index: dict[int, int] = {}
        bufs, written, constant, derived = [], set(), set(), set()

        def slot(b) -> int:
            if id(b) not in index:
                index[id(b)] = len(bufs)
                bufs.append(b)
            return index[id(b)]

        first_input = slot(specs[0]["inputs"][0])
        stages = []
        for spec in specs:
            op = spec["op"]
            ins = tuple(slot(b) for b in spec.get("inputs") or ())
            for i in ins:
                if i not in written and i != first_input:
                    constant.add(i)
            out = None if spec.get("output") is None else slot(spec["output"])
            kernel = None
            params = freeze(spec.get("params") or {})
            if op == "run_kernel":
                k = registry.get(spec["kernel"])
                kernel = k.recipe() if isinstance(k, CustomKernel) else k.name
            if out is not None and out not in written and out not in constant:
                b = bufs[out]
                if _derive(op, kernel, [bufs[i] for i in ins], thaw(params)) == \
                        (b.shape, b.dtype):
                    derived.add(out)
            if out is not None:
                written.add(out)
            stages.append(StageSpec(op, kernel, ins, out, params))
        slots = tuple(Slot(b.shape, b.dtype, i in derived,
                           b.read() if i in constant else None) for i, b in enumerate(bufs))
        return cls(pipeline.label, slots, tuple(stages), first_input,
                   index[id(specs[-1]["output"])])

    @classmethod
    def chain(cls, steps, shape, dtype, label: str = "chain") -> PipelineRecipe:
        """The recipe of kernels run one after another, each on the previous one's output:
        ``steps`` are (kernel, params, extra inputs) with the extra inputs numpy arrays
        (constants such as convolve2d's weights). ``shape``/``dtype`` lay it out for a first
        input; every buffer but the constants follows the input's shape."""
        shape = tuple(int(d) for d in shape)
        dtype = resolve_dtype(dtype, "dtype").name
        slots = [Slot(shape, dtype)]
        stages = []
        cur = 0
        for n, (kernel, params, extra) in enumerate(steps):
            k = registry.get(kernel)
            ins = [cur]
            for a in extra:
                a = np.ascontiguousarray(a)
                slots.append(Slot(a.shape, resolve_dtype(a.dtype, f"steps[{n}]").name,
                                  data=a.tobytes()))
                ins.append(len(slots) - 1)
            want = _derive("run_kernel", k, [Meta(slots[i].shape, slots[i].dtype)
                                             for i in ins], dict(params or {}))
            if want is None:
                raise ShapeError(f"steps[{n}] ({k.name}): cannot shape its output from "
                                 f"{', '.join(f'{slots[i].dtype} {slots[i].shape}' for i in ins)}")
            slots.append(Slot(want[0], want[1], derived=True))
            cur = len(slots) - 1
            ref = k.recipe() if isinstance(k, CustomKernel) else k.name
            stages.append(StageSpec("run_kernel", ref, tuple(ins), cur, freeze(params or {})))
        if not stages:
            raise ArgumentError("steps: expected at least one (kernel, params) step")
        recipe = cls(label, tuple(slots), tuple(stages), 0, cur)
        recipe.plan(shape, dtype)  # every stage checked now, on the client
        return recipe

    # -- shapes for another input ----------------------------------------------------------
    @property
    def input_spec(self) -> tuple[tuple[int, ...], str]:
        """The input shape and dtype the pipeline was made with."""
        s = self.slots[self.input]
        return s.shape, s.dtype

    def plan(self, shape, dtype) -> list[tuple[tuple[int, ...], str]]:
        """(shape, dtype) of every slot when the input is ``shape``/``dtype``: derived slots
        follow, the others keep theirs; every stage is checked (no GPU work). Raises
        ShapeError naming the stage that cannot take the new shapes."""
        shape = tuple(int(d) for d in shape)
        dtype = resolve_dtype(dtype, "dtype").name
        specs: list = [None] * len(self.slots)
        specs[self.input] = (shape, dtype)
        for i, s in enumerate(self.slots):
            if i != self.input and not s.derived:
                specs[i] = (s.shape, s.dtype)
        for n, st in enumerate(self.stages):
            if st.op == "barrier":
                continue
            metas = [Meta(*specs[i]) for i in st.inputs]
            try:
                kernel = None if st.op == "copy_buffer" else _kernel_of(st.kernel)
                want = _derive(st.op, kernel, metas, thaw(st.params))
                if specs[st.output] is None:
                    if want is None:
                        raise ShapeError("its output's shape cannot be derived")
                    specs[st.output] = want
                out = Meta(*specs[st.output])
                if kernel is None:
                    if out.size != metas[0].size or out.dtype != metas[0].dtype:
                        raise ShapeError(f"copies {metas[0].dtype} {metas[0].shape} into "
                                         f"{out.dtype} {out.shape}")
                else:
                    check(kernel, metas, out, kernel.resolve_params(
                        thaw(st.params), DTYPES[metas[0].dtype if metas else out.dtype]))
            except WgComputeError as e:
                name = st.op if st.kernel is None else getattr(st.kernel, "name", st.kernel)
                raise ShapeError(f"pipeline {self.label!r} stage {n} ({name}) cannot take an "
                                 f"input of {dtype} {shape}: {e}") from e
        return specs

    def output_spec(self, shape, dtype) -> tuple[tuple[int, ...], str]:
        """The result's shape and dtype for an input of ``shape``/``dtype``."""
        return self.plan(shape, dtype)[self.result]

    def build(self, shape=None, dtype=None) -> Pipeline:
        """The pipeline for inputs of ``shape``/``dtype`` (by default the original ones),
        built on this process's device on first use and cached: the same Pipeline comes back
        for the same recipe and input, shared, so it must not be changed (set_params, add
        and free refuse)."""
        if shape is None:
            shape, dtype = self.input_spec
        shape = tuple(int(d) for d in shape)
        dtype = resolve_dtype(dtype or self.input_spec[1], "dtype").name
        key = (self, shape, dtype)
        # One lock for building too: two threads asking for the same new pipeline must not
        # both allocate it. (With a runtime per device this cache belongs to the Device.)
        with _built_lock:
            p = _built.get(key)
            if p is not None:
                _built.move_to_end(key)
                return p
            p = self._build(shape, dtype)
            _built[key] = p
            while len(_built) > _BUILT_MAX:
                _built.popitem(last=False)  # its users keep it; the collector frees it
        return p

    def _build(self, shape, dtype) -> Pipeline:
        specs = self.plan(shape, dtype)
        bufs = []
        for i, (s, (sh, dt)) in enumerate(zip(self.slots, specs)):
            label = f"{self.label}-slot{i}"
            bufs.append(empty(sh, dt, label=label) if s.data is None else
                        _new_buffer(s.data, sh, dt, label=label))
        p = Pipeline(self.label)
        for st in self.stages:
            stage = {"op": st.op}
            if st.op != "barrier":
                stage["inputs"] = [bufs[i] for i in st.inputs]
                stage["output"] = bufs[st.output]
            if st.op == "run_kernel":
                stage["kernel"] = _kernel_of(st.kernel).name
                stage["params"] = thaw(st.params)
            p.add(stage)
        p._shared = True
        return p

    # -- identity ------------------------------------------------------------------------------
    def digest(self) -> str:
        """A hex SHA-256 of the recipe's content (Dask uses it as the work's token)."""
        return hashlib.sha256(pickle.dumps(self, protocol=5)).hexdigest()

    def __dask_tokenize__(self):
        return self.digest()

    def __repr__(self) -> str:
        names = " | ".join(st.op if st.kernel is None else getattr(st.kernel, "name", st.kernel)
                           for st in self.stages)
        shape, dtype = self.input_spec
        return f"<wgc.PipelineRecipe {self.label!r} {dtype} {shape}: {names}>"


def check(kernel, inputs, output, params) -> None:
    """kernel.check on shapes and dtypes alone (Metas): a check that needs the buffers or
    the device (binding limits of the adapter that will run it) is left to the run."""
    try:
        kernel.check(inputs, output, params)
    except (AttributeError, TypeError):
        pass


def _derive(op, kernel, inputs, params):
    """(shape, dtype) the stage would give its output by itself, or None."""
    if op == "copy_buffer":
        return (inputs[0].shape, inputs[0].dtype) if inputs else None
    if op != "run_kernel" or not inputs:
        return None
    k = _kernel_of(kernel) if isinstance(kernel, (str, KernelRecipe)) else kernel
    try:
        shape, dt = k.output_spec(list(inputs), k.resolve_params(params, DTYPES[inputs[0].dtype]))
    except WgComputeError:
        return None
    return tuple(shape), resolve_dtype(dt).name


_built: OrderedDict = OrderedDict()
_built_lock = threading.Lock()
_BUILT_MAX = 16  # pipelines kept per process; each holds its buffers


def pipeline_from_recipe(recipe: PipelineRecipe) -> Pipeline:
    """What unpickling a Pipeline gives: this process's cached build of the recipe."""
    return recipe.build()


# Pipeline.recipe() and pickling a Pipeline call this module (pipeline.py cannot import it:
# this module builds Pipelines)
install_recipes(sys.modules[__name__])
