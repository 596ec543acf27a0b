"""Pipelines: many stages (kernels, copies, barriers) on one device, validated when added and
recorded into ONE command encoder and ONE submit; built once, run many times with no new GPU
objects."""

from __future__ import annotations

from typing import Any

import numpy as np
import wgpu

from . import transfers
from ._args import check_buffer_list
from .buffer import Buffer, NotInstalled, check_buffer, empty
from .commands import (
    Command,
    check_copy,
    copy_calls,
    copy_dispatch,
    prepare_output,
    record_copy,
    run_blocking,
    submit_command,
    submit_work,
)
from .errors import ArgumentError, DeviceError, PipelineError, WgComputeError
from .kernels import Dispatch, bind, registry
from .runtime import Device, resolve

_OPS = ("run_kernel", "copy_buffer", "barrier")

_STAGE_KEYS = {"op", "kernel", "inputs", "output", "params"}

# a Pipeline as data (Pipeline.recipe, pickling) is wgcompute.recipes' work, and recipes builds
# Pipelines: it installs itself here when imported (wgcompute's __init__ imports it)
_recipes: Any = NotInstalled("wgcompute.recipes", "Pipeline.recipe() and pickling a Pipeline")


def install_recipes(module: Any) -> None:
    """Called by wgcompute.recipes as it is imported."""
    global _recipes
    _recipes = module


class _Stage:
    __slots__ = ("spec", "op", "dispatch", "inputs", "output", "name")

    def __init__(self, spec, op, name, inputs, output, dispatch=None):
        self.spec = spec
        self.op = op
        self.name = name
        self.inputs = inputs
        self.output = output
        self.dispatch: Dispatch | None = dispatch


class Pipeline:
    """An ordered list of stages (dicts: op, kernel, inputs, output, params).

    ``run()`` records every stage into one command encoder, submits once and waits;
    ``submit()`` does the same and returns a Command at once. Stages are validated when
    added; bind groups and params buffers are created then, once. A pipeline and its buffers
    live on one device (``device``: the current one when it was made)."""

    _shared = False  # built from a recipe and cached (wgcompute.recipes): not to be changed

    def __init__(self, label: str = "pipeline", device: Device | None = None):
        if not isinstance(label, str):
            raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
        self.label = label
        self.device = resolve(device)
        self.device.adopt(self)
        self._stages: list[_Stage] = []
        self._freed = False
        self._query = None  # (query_set, resolve buffer, capacity) for profile=True
        self._plan = None  # (stages, their raw recording steps), made on first encode
        self._buffer_list = None  # buffers(), made on first use

    def __repr__(self) -> str:
        names = " | ".join(s.name for s in self._stages)
        state = " freed" if self._freed else ""
        if not self.device.alive:
            state += f" ({self.device.state} device)"
        return f"<wgc.Pipeline {self.label!r} {len(self._stages)} stage(s): {names}{state}>"

    def __len__(self) -> int:
        return len(self._stages)

    @property
    def stage_count(self) -> int:
        return len(self._stages)

    @property
    def stages(self) -> list[dict]:
        """The stage dicts as added (copies)."""
        return [dict(s.spec) for s in self._stages]

    def _check_open(self) -> None:
        self.device.check("pipeline")
        if self._freed:
            raise PipelineError(f"{self!r} was freed")

    def _check_own(self) -> None:
        if self._shared:
            raise PipelineError(f"{self!r} was built from a recipe and is shared by everything "
                                f"that unpickled it; build your own to change it")

    # -- as data --------------------------------------------------------------------------
    def recipe(self):
        """The pipeline as data (wgcompute.recipes.PipelineRecipe): buffer placeholders,
        stages, and the contents of constants, which are read back (this blocks)."""
        return _recipes.PipelineRecipe.of(self)

    def __reduce__(self):
        # a Pipeline holds GPU buffers: it travels as its recipe, built again (once) there
        return _recipes.pipeline_from_recipe, (self.recipe(),)

    def add(self, stage: dict | None = None, **kwargs) -> Pipeline:
        """Validate and append a stage; returns the pipeline for chaining.

        ``p.add({"op": "run_kernel", "kernel": "relu", "inputs": [a], "output": b})``, or the
        same as keywords: ``p.add(kernel="relu", inputs=[a], output=b)``. A run_kernel stage
        without an output gets a new buffer (its ``stages[i]["output"]``)."""
        self._check_open()
        self._check_own()
        if stage is None:
            stage = kwargs
        elif kwargs:
            raise ArgumentError("stage: pass a dict or keywords, not both")
        index = len(self._stages)
        if not isinstance(stage, dict):
            raise PipelineError(f"stage {index}: expected a dict like {{'op': 'run_kernel', "
                                f"'kernel': ..., 'inputs': [...], 'output': buf}}, got "
                                f"{type(stage).__name__}")
        try:
            built = self._build(stage)
        except WgComputeError as e:
            if isinstance(e, DeviceError) and (self.device.closed or not self.device.alive):
                raise  # the device closed or was lost meanwhile: no fault of the stage
            err = PipelineError(f"stage {index} ({stage.get('kernel', stage.get('op'))}): {e}")
            err.stage = index
            err.cause = e
            raise err from e
        self._stages.append(built)
        self._plan = self._buffer_list = None
        return self

    def _on_device(self, named) -> None:
        for name, b in named:
            if isinstance(b, Buffer) and b._dev is not self.device:
                raise DeviceError(f"{name} is on {b._dev.label}, but the pipeline is on "
                                  f"{self.device.label} (copy with buf.to(device), or make the "
                                  f"pipeline with device=)")

    def _build(self, spec: dict) -> _Stage:
        extra = set(spec) - _STAGE_KEYS
        if extra:
            raise ArgumentError(f"unknown key(s) {', '.join(sorted(map(str, extra)))}; "
                                f"expected {', '.join(sorted(_STAGE_KEYS))}")
        op = spec.get("op", "run_kernel")
        if op not in _OPS:
            raise ArgumentError(f"op {op!r} is not one of {', '.join(_OPS)}")
        spec = dict(spec, op=op)
        if op == "barrier":
            return _Stage(spec, op, "barrier", [], None)
        inputs = spec.get("inputs")
        inputs = [] if inputs is None else inputs
        check_buffer_list(inputs)
        self._on_device([(f"inputs[{i}]", b) for i, b in enumerate(inputs)] +
                        [("output", spec.get("output"))])
        if op == "copy_buffer":
            if len(inputs) != 1:
                raise ArgumentError("copy_buffer needs inputs=[source]")
            check_copy(inputs[0], spec.get("output"))
            # a large copy is a kernel (shader copy) and stays inside the compute pass
            return _Stage(spec, op, "copy_buffer", list(inputs), spec["output"],
                          copy_dispatch(inputs[0], spec["output"]))
        if "kernel" not in spec:
            raise ArgumentError("run_kernel needs a 'kernel'")
        kernel = registry.get(spec["kernel"])
        if not inputs and spec.get("output") is None:
            raise ArgumentError(f"{kernel.name} has no input to derive an output from; pass "
                                f"output=")
        output = prepare_output(kernel, inputs, spec.get("output"), spec.get("params"))
        spec["output"] = output
        d = bind(kernel, list(inputs), output, spec.get("params"))
        return _Stage(spec, op, kernel.name, list(inputs), output, d)

    def set_params(self, stage_index: int, **params) -> None:
        """Change a kernel stage's params for the next runs (no re-validation of buffers)."""
        self._check_open()
        self._check_own()
        if not isinstance(stage_index, int) or not 0 <= stage_index < len(self._stages):
            raise ArgumentError(f"stage_index: expected 0..{len(self._stages) - 1}, got "
                                f"{stage_index!r}")
        st = self._stages[stage_index]
        if st.dispatch is None:
            raise ArgumentError(f"stage_index: stage {stage_index} is a {st.op}, it has no "
                                f"params")
        try:
            st.dispatch.set_params(**params)
        except WgComputeError as e:
            raise PipelineError(f"stage {stage_index} ({st.name}): {e}") from e
        self._plan = None
        st.spec["params"] = dict(st.dispatch.params)

    # -- recording --------------------------------------------------------------------------
    def buffers(self) -> list[Buffer]:
        """Every buffer the stages use, each once (in first-use order)."""
        return list(self._buffers())

    def _buffers(self) -> list[Buffer]:
        if self._buffer_list is None:
            out = {}
            for s in self._stages:
                for b in s.inputs:
                    out[id(b)] = b
                if s.output is not None:
                    out[id(s.output)] = s.output
            self._buffer_list = list(out.values())
        return self._buffer_list

    def _check_buffers(self) -> None:
        if not any(b._freed for b in self._buffers()):
            return
        for i, s in enumerate(self._stages):
            for b in s.inputs + ([s.output] if s.output is not None else []):
                if b._freed:  # the stages were checked at add(): only freeing can undo that
                    try:
                        check_buffer(b, f"stage {i} ({s.name})")
                    except WgComputeError as e:
                        raise PipelineError(str(e)) from e

    def encode(self, encoder, profile_query=None) -> None:
        """Record every stage into ``encoder`` (the device's own, or wgpu-py's for surfaces and
        profiling): consecutive kernels share one compute pass (WebGPU orders dispatches
        inside a pass); a copy or barrier ends the pass."""
        if not (hasattr(encoder, "record_calls") or
                callable(getattr(encoder, "begin_compute_pass", None))):
            raise ArgumentError(f"encoder: expected a command encoder (the device's, or a "
                                f"wgpu GPUCommandEncoder), got {type(encoder).__name__}")
        # The stages as they are now, held while recording: their Dispatches own the bind
        # groups the raw calls name by handle, and a free() from another thread (the device
        # closing) must not release them under the recording.
        stages = self._stages
        if profile_query is None and hasattr(encoder, "record_calls"):
            for step in self._recording(stages):
                record_copy(encoder, step)
            return
        cpass = None
        for i, s in enumerate(stages):
            if s.dispatch is not None:
                if cpass is None or profile_query is not None:
                    kw = {}
                    if profile_query is not None:
                        kw["timestamp_writes"] = {"query_set": profile_query,
                                                  "beginning_of_pass_write_index": 2 * i,
                                                  "end_of_pass_write_index": 2 * i + 1}
                    if cpass is not None:
                        cpass.end()
                    cpass = encoder.begin_compute_pass(**kw)
                s.dispatch.encode(cpass)
                continue
            if cpass is not None:
                cpass.end()
                cpass = None
            if s.op == "copy_buffer":
                n = (s.inputs[0].nbytes + 3) // 4 * 4
                if n:
                    encoder.copy_buffer_to_buffer(s.inputs[0].gpu_buffer, 0,
                                                  s.output.gpu_buffer, 0, n)
        if cpass is not None:
            cpass.end()

    def _recording(self, stages: list[_Stage]) -> list:
        """The stages as recording steps, made once per change: a list of raw dispatch
        calls per compute pass (``record_calls``, which sets the pipeline only when the kernel
        changes), or (source, destination, bytes) for an encoder copy. Walking the stages
        and their Dispatches at every run cost about 1 µs of Python per stage more."""
        cached = self._plan  # one read: the steps and the stages whose Dispatches own them
        if cached is not None and cached[0] is stages:
            return cached[1]
        plan, calls = [], None
        for s in stages:
            if s.dispatch is not None:
                if calls is None:
                    calls = []
                    plan.append(calls)
                calls.extend(s.dispatch.raw_calls())
                continue
            calls = None  # a copy or a barrier ends the pass
            if s.op == "copy_buffer":
                step = copy_calls(s.inputs[0], s.output, None)
                if step is not None:
                    plan.append(step)
        plan = [step for step in plan if type(step) is not list or step]
        if stages is self._stages:
            self._plan = (stages, plan)
        return plan

    def submit(self) -> Command[None]:
        """Record all stages into one command buffer, submit once, return the Command."""
        self._check_open()
        self._check_buffers()
        return submit_work(self.label, self.device, self.encode, self._buffers())

    def _submit_as(self, cmd: Command) -> Command:
        """Submit the stages as the work of ``cmd``, made earlier holding this pipeline's
        buffers (a stream's queued run): those it holds may have been freed since and still
        serve; a buffer a stage took on after that must not be freed."""
        self._check_open()
        held = {id(b) for b in cmd._buffers}
        if any(b._freed and id(b) not in held for b in self._buffers()):
            self._check_buffers()
        return submit_command(cmd, self.encode)

    def run(self, profile: bool = False):
        """Run every stage (one submit) and wait. With ``profile=True`` (needs the adapter's
        timestamp-query feature) returns each stage's GPU time in milliseconds."""
        if not isinstance(profile, bool):
            raise ArgumentError(f"profile: expected True or False, got {profile!r}")
        if profile:
            return self._run_profiled()
        self._check_open()
        self._check_buffers()
        run_blocking(f"pipeline {self.label!r}", self.device, self._buffers(), self.encode)
        return None

    def _run_profiled(self) -> list[float | None]:
        self._check_open()
        self._check_buffers()
        dev = self.device
        if not dev.has("timestamp-query"):
            raise ArgumentError(f"profile: {dev.name} lacks the 'timestamp-query' feature")
        n = len(self._stages)
        if n == 0:
            return []
        count = 2 * n
        if self._query is None or self._query[2] < count:
            qs = dev.gpu_device.create_query_set(label=f"{self.label}-timestamps",
                                                 type=wgpu.QueryType.timestamp, count=count)
            rbuf = dev.gpu_device.create_buffer(
                label=f"{self.label}-timestamps", size=8 * count,
                usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            self._query = (qs, rbuf, count)
        qs, resolve_buf, _ = self._query

        def record(enc):
            self.encode(enc, profile_query=qs)
            enc.resolve_query_set(qs, 0, count, resolve_buf, 0)

        submit_work(self.label, dev, record, self._buffers(), full=True).wait()
        ticks = transfers.download(dev, resolve_buf, 0, 8 * count).view(np.uint64)
        out = []
        for i, s in enumerate(self._stages):
            if s.dispatch is None:
                out.append(None)
                continue
            t0, t1 = int(ticks[2 * i]), int(ticks[2 * i + 1])
            out.append(max(t1 - t0, 0) / 1e6)  # wgpu reports nanoseconds
        return out

    def free(self) -> None:
        """Drop the stages' bind groups and params buffers (buffers stay the caller's)."""
        self._check_own()
        self._stages = []
        self._plan = self._buffer_list = None
        self._freed = True
        if self._query is not None:
            try:
                self._query[1].destroy()
            except Exception:  # noqa: BLE001 - the device is gone
                pass
            self._query = None

    close = free  # what the device calls when it closes

    def clone(self, device: Device) -> Pipeline:
        """The same stages on ``device``: every buffer the stages use is copied there (blocks:
        their contents travel through host memory), in the stages' order. stream_map prepares a
        Pipeline this way for each device it is given."""
        self._check_open()
        out = Pipeline(self.label, device)
        mapping: dict[int, Buffer] = {}

        def moved(b):
            if b is None:
                return None
            if id(b) not in mapping:
                mapping[id(b)] = b.to(device) if b.nbytes else empty(b.shape, b.dtype,
                                                                     b.label, device=device)
            return mapping[id(b)]

        for st in self._stages:
            spec = dict(st.spec)
            spec["inputs"] = [moved(b) for b in st.inputs]
            if st.output is not None:
                spec["output"] = moved(st.output)
            out.add(spec)
        return out


def pipeline(label: str = "pipeline", device: Device | None = None) -> Pipeline:
    """A new, empty pipeline on ``device`` (default: the current device)."""
    if not isinstance(label, str):
        raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
    return Pipeline(label, device)


def _check_pipeline(p) -> Pipeline:
    if not isinstance(p, Pipeline):
        raise ArgumentError(f"pipeline: expected a wgc.Pipeline, got {type(p).__name__}")
    return p


def pipeline_add(p: Pipeline, stage: dict) -> Pipeline:
    return _check_pipeline(p).add(stage)


def pipeline_run(p: Pipeline, profile: bool = False):
    return _check_pipeline(p).run(profile=profile)


def free_pipeline(p: Pipeline) -> None:
    _check_pipeline(p).free()
