"""The bad-input matrix: every public function and method (``wgcompute.__all__``, the methods
of Buffer, Command, Pipeline, Stream and Event, ``wgc.image``'s functions) is called with a
good set of arguments except one, which takes each bad value of its kind in turn: wrong
types and shapes and dtypes, None, nan/inf, negative and huge ints, empty containers, freed
buffers, dicts with non-str keys...

Each call must raise a WgComputeError whose message names that argument, or succeed where
the value is in fact valid (ACCEPTED lists those, each with its reason); never a raw
TypeError/KeyError/AttributeError and never a crash. tests/reliability_report.py runs the
same cases in a subprocess and counts what happened for docs/reliability.md."""

from __future__ import annotations

import inspect
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from conftest import lacks

import wgcompute as wgc


# -- values: made on use (a freed buffer needs the device; collection must not) --------------
@dataclass(frozen=True)
class Make:
    """A value built when the case runs; ``label`` is how the case is named."""

    label: str
    build: Callable[[], object]


def value_of(v):
    if isinstance(v, Make):
        return v.build()
    if type(v) is list:  # [freed Buffer] and friends
        return [value_of(x) for x in v]
    return v


def label_of(v) -> str:
    if isinstance(v, Make):
        return v.label
    if isinstance(v, np.ndarray):
        return f"ndarray{v.shape}{v.dtype}"
    if type(v) is list and any(isinstance(x, Make) for x in v):
        return "[" + ", ".join(label_of(x) for x in v) + "]"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def f32(n=4):
    return wgc.from_numpy(np.arange(n, dtype=np.float32))


def mat(r=4, c=4):
    return wgc.from_numpy(np.arange(r * c, dtype=np.float32).reshape(r, c))


def img(h=8, w=8):
    return wgc.image.from_numpy(np.full((h, w, 4), 100, np.uint8))


def freed_buffer():
    b = wgc.buffer([1.0, 2.0])
    b.free()
    return b


def closed_device():
    """A device opened and closed (skipped where a second device is refused: wgpu's GL
    backend opens one at a time)."""
    why = lacks("several-devices")
    if why is not None:
        pytest.skip(why)
    d = wgc.device(new=True)
    d.close()
    return d


def freed_pipeline():
    p = wgc.pipeline()
    p.free()
    return p


class Opaque:
    """An object of no type wgcompute knows."""

    def __repr__(self) -> str:
        return "Opaque()"


FREED = Make("freed Buffer", freed_buffer)
OPAQUE = Opaque()
NAN, INF = math.nan, math.inf

# The bad values of each kind of argument. Every kind also gets OPAQUE.
BAD: dict[str, list] = {
    "buffer": [None, 1.0, "buf", [1.0, 2.0], np.ones(4, np.float32), FREED,
               Make("u32 Buffer", lambda: wgc.buffer([1, 2, 3, 4], dtype="u32")),
               Make("Buffer (3,)", lambda: f32(3)), Make("empty Buffer (0,)", lambda: f32(0))],
    "matrix": [None, [[1.0]], FREED, Make("1-D Buffer", lambda: f32(4)),
               Make("Buffer (3, 5)", lambda: mat(3, 5)),
               Make("s32 Buffer (4, 4)", lambda: wgc.buffer(np.ones((4, 4), np.int32)))],
    "image": [None, np.zeros((8, 8, 4), np.uint8), FREED, Make("f32 Buffer (4,)", f32),
              Make("u8 Buffer (8, 8, 3)", lambda: wgc.buffer(np.zeros((8, 8, 3), np.uint8))),
              Make("s32 Buffer (8, 8, 4)", lambda: wgc.buffer(np.zeros((8, 8, 4), np.int32)))],
    "out": [1.0, "out", np.ones(4, np.float32), FREED,
            Make("u32 Buffer", lambda: wgc.buffer([1, 2, 3, 4], dtype="u32")),
            Make("Buffer (3,)", lambda: f32(3))],
    "buffers": [None, "ab", 3, {"a": 1}, Make("a Buffer, not a list", f32), [None], [1.0],
                [FREED], [np.ones(4, np.float32)], [], Make("3 Buffers", lambda: [f32()] * 3)],
    "shape": [None, "3", -1, (-1,), (2.5,), (True,), 2**64, (2**40,), [[2]], {2: 3}, NAN,
              (NAN,), ()],
    "dtype": [None, "f8", "", "F32", 3, np.longdouble, np.clongdouble, ["f32"]],
    "label": [None, 5, b"x", ["x"]],
    "number": [None, "1", [1.0], True, NAN, INF, -INF, 2**200, 1j, np.array([1.0, 2.0])],
    "timeout": [-1, NAN, INF, True, "1", [1], 1e300],
    "params": ["x", 5, [("scalar", 2.0)], {1: 0}, {"scalar": 2.0, 1: 0}, {None: 0},
               {"nope": 1}, {"scalar": None}, {"scalar": "2"}, {"scalar": NAN}],
    "kernel": [None, 1, "", "no_such_kernel", b"relu", ["relu"]],
    "data": [None, "abc", {1: 2}, [[1.0], [1.0, 2.0]], [1j], np.array(["x"]),
             np.array([1], np.longdouble), b"\0\0\0", [NAN], [2**200], [], FREED, set()],
    "bytes": [None, "abc", [0, 0, 0, 0], b"\0\0\0", b"", np.zeros(8, np.uint8), 8],
    "array": [None, [1.0, 2.0], "x", 5, np.array(["x"]), np.array([1j], np.clongdouble),
              np.array([1], np.longdouble), Make("a Buffer", f32)],
    "image_array": [None, [[1, 2]], np.zeros((4, 4), np.float32), np.zeros((4, 4, 5), np.uint8),
                    np.zeros(4, np.uint8), np.zeros((4, 4, 4), np.int32), Make("a Buffer", img)],
    "bool": [None, "yes", 2, 1.5, [True]],
    "callable": [None, 1, "f"],
    "processes": ["yes", 2.5, [True]],
    "process_devices": ["gpu", [None], 5.5, [], [99]],
    "items": [3, None],
    "path": [None, 3, b"x.png", "", ["x.png"], "\0.png"],
    "cmd": [None, "1", -1, 10**12, 1.5, True],
    "pipeline": [None, 1, "p", Make("freed Pipeline", freed_pipeline)],
    "stage": [None, 5, "relu", {}, {"op": 1}, {1: 2}, {"op": "run_kernel"},
              {"kernel": "relu", "inputs": 5}, {"kernel": "relu", "inputs": [None]},
              {"op": "copy_buffer", "inputs": []}, {"kernel": "relu", "params": {1: 0}}],
    "stage_index": [None, -1, 99, 1.0, True, "0"],
    "axis": [0, 1, -2, 2, (0, 0), 2.5, "x", True, [0], NAN],
    "axes": [(0, 0), (2, 0), (0,), "x", 1.5, (None, 1), True],
    "rounding": [1, "", "nearest", ["round"], True],
    "casting": [None, "", "same_kind", 1, ["exact"]],
    "channels": [None, 0, 2, 5, 3.5, "3", True],
    "depth": [None, 0, -1, 1.5, True, "3"],
    "batches": [None, 1, np.ones(4, np.float32), Make("a Buffer", f32), [None], ["x"],
                [np.array([1j], np.clongdouble)], [np.ones(4, np.longdouble)]],
    "event": [None, 1, "ev"],
    "surface": [None, 1, "window"],
    "text": [None, "", 5, "nope", "grayscale |", "resize(size=(-1, 2))", "blur(", "|"],
    "stages": [None, "grayscale", [None], [], [1]],
    "size": [None, 0, -1, 1.5, 2**40, True, "10"],
    "precision": [5, "fast", ""],
    "workgroup_size": [None, 0, -1, 1.5, True, "64"],
    "bindings": [None, 5, "x", [("o", "write")], [], [("o",)], {"o": 5},
                 [("a", "read_write"), ("b", "read_write")]],
    "kernel_params": [5, "n", {"n": "u64"}, {1: "u32"}, {"n": 5}],
    "dtypes": [None, 5, [], ["f8"], "f8", [None]],
    "grid": [5, "x"],
    "kernel_name": [None, 5, "", "1abc", "a b", "relu"],
    "source": [None, 5, b"x", "not wgsl at all", "/nonexistent/kernel.wgsl"],
    "fill_value": [None, "1", [1.0], 2**200, 1j, NAN],
    "timeline": [5, "t"],
    "work": [None, 5, "no_such_kernel", "elementwise_add", OPAQUE],
    "batch_tag": ["x", 1.5, [1]],
    "encoder": [None, 1],
    "spec": [None, 5, "relu", [], {}, {"op": "dance"}, {1: 2}, {"op": "run_kernel"},
             {"op": "run_kernel", "kernel": "relu", "inputs": 5},
             {"op": "copy_buffer", "inputs": [None], "output": None}],
    "dims": [None, 0, -1, 1.5, True, "8", 2**40],
    "title": [None, 5, b"x"],
    "bufs": [None, 3, Make("a Buffer, not a list", f32), [None], [1.0], "ab"],
    "device": [1, "gpu", Make("closed Device", closed_device),
               Make("an AdapterInfo", lambda: wgc.devices()[0])],
    "dev": [None, 1, "gpu", Make("closed Device", closed_device),
            Make("an AdapterInfo", lambda: wgc.devices()[0])],
    "devices": [5, "gpu", [], [None], [1], Make("a Device, not a list", wgc.current_device),
                [Make("closed Device", closed_device)]],
    "which": [-1, 99, 1.5, True, "no such adapter", [0], b"x"],
    "backend": [5, "", "cuda", ["vulkan"]],
    "hold_clocks": ["yes", 1, 1.5, [True]],
    "frame": [None, "1", 1.5, True, 99, -99],
    "load_dtype": [5, "", "u16", "F32", ["u8"]],
    "bits": [None, 12, "16", True, 16.0],
    "durations": ["x", -1, [10], [10, -1], [10, "x"], True],
    "loop": [-1, 1.5, "0", True],
    "frames": [None, "ab", [], [None], np.zeros((2, 4, 4, 4), np.uint8),
               [np.zeros((4, 4, 4), np.uint8), np.zeros((5, 4, 4), np.uint8)]],
    "file_image": [None, [[1, 2]], np.zeros(4, np.uint8), np.zeros((4, 4, 5), np.uint8),
                   np.zeros((4, 4), np.int16), np.zeros((4, 4, 3), np.float64)],
    "gif_path": [None, 3, b"x.gif", "", "\0.gif", "x.png"],
    "entry_point": [5, "", "no_such_function", b"main"],
    "typed_args": [None, 5, "x", "x: f8", "x: c64", "x T", "i: f32", "x: T, x: T", [5]],
    "wgsl_code": [None, 5, "", "${x}", b"x"],
    "reduce_type": [5, "f8", "bool", "S", "vec5<f32>"],
}
# what messages may call an argument besides its own name
# (a kernel's messages name its inputs by the kernel's own binding names: 'a', 'src'...)
ALIASES = {
    "out": ("out", "output"), "output": ("output",), "inputs": ("inputs", "input"),
    "a": ("a", "input"), "b": ("b", "input"), "inp": ("inp", "input"),
    "x": ("x", "input"), "image": ("image", "input"), "buf": ("buf", "buffer"),
    "params": ("params", "param"), "spec": ("spec", "op", "source", "destination", "inputs",
                                            "input", "output", "kernel", "params", "param"),
    "stage": ("stage",), "p": ("pipeline", "p"), "work": ("work", "kernel"),
    "name": ("name", "kernel"), "text": ("--pipeline", "text"),
    "source": ("source", "shader"), "value": ("value", "param 'value'"),
    "stages": ("stages",), "dev": ("dev",), "devices": ("devices",),
}


# -- what is called ----------------------------------------------------------------------------
@dataclass
class Target:
    """One public function or method: a good set of arguments, and each argument's kind."""

    name: str
    call: Callable[[dict], object]
    good: Callable[[], dict]
    kinds: dict[str, str]
    signature_of: object = None  # the function whose parameters ``kinds`` must cover
    skip_args: tuple[str, ...] = ()  # parameters not varied (say why where they are listed)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)


def fn(f, name=None):
    return lambda kw: f(**kw)


def positional(f, *names):
    """``f`` called with ``names`` by position (the array namespace's positional-only
    parameters), the rest by keyword."""
    def call(kw):
        return f(*[kw.pop(n) for n in names], **kw)
    return call


def method(cls_attr: str):
    return lambda kw: getattr(kw.pop("self"), cls_attr)(**kw)


def method_then_wait(attr):
    return lambda kw: _wait(getattr(kw.pop("self"), attr)(**kw))


def call_then_wait(f):
    return lambda kw: _wait(f(**kw))


def consume(kw):
    return list(wgc.stream_map(**kw))


def stream_then_sync(attr):
    def call(kw):
        s = kw.pop("self")
        r = getattr(s, attr)(**kw)
        s.sync()
        return r
    return call


SIMPLE_KERNEL = """
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = 1.0; }
}
"""


def _targets() -> list[Target]:
    T: list[Target] = []

    def add(name, call, good, kinds, sig=None, **kw):
        T.append(Target(name, call, good, kinds, sig, **kw))

    # buffers
    add("wgc.buffer", fn(wgc.buffer),
        lambda: {"data": [1.0, 2.0], "shape": None, "dtype": None, "label": "", "device": None},
        {"data": "data", "shape": "shape", "dtype": "dtype", "label": "label",
         "device": "device"}, wgc.buffer)
    add("wgc.buffer_from_binary", fn(wgc.buffer_from_binary),
        lambda: {"data": b"\0" * 8, "shape": (2,), "dtype": "f32", "label": "", "device": None},
        {"data": "bytes", "shape": "shape", "dtype": "dtype", "label": "label",
         "device": "device"},
        wgc.buffer_from_binary)
    for f in (wgc.buffer_zeros, wgc.empty):
        add(f"wgc.{f.__name__}", fn(f),
            lambda: {"shape": (3,), "dtype": "f32", "label": "", "device": None},
            {"shape": "shape", "dtype": "dtype", "label": "label", "device": "device"}, f)
    for f in (wgc.from_numpy, wgc.upload):
        add(f"wgc.{f.__name__}", fn(f),
            lambda: {"array": np.ones(3, np.float32), "label": "", "device": None},
            {"array": "array", "label": "label", "device": "device"}, f)
    for f in (wgc.to_numpy, wgc.read, wgc.read_list, wgc.read_binary, wgc.shape, wgc.dtype,
              wgc.size, wgc.free):
        add(f"wgc.{f.__name__}", fn(f), lambda: {"buf": f32()}, {"buf": "buffer"}, f)
    add("wgc.asnumpy", fn(wgc.asnumpy), lambda: {"a": f32()}, {"a": "buffer"}, wgc.asnumpy)
    add("wgc.free_many", fn(wgc.free_many), lambda: {"bufs": [f32(), f32()]},
        {"bufs": "bufs"}, wgc.free_many)
    # kernels
    add("wgc.kernel_info", fn(wgc.kernel_info), lambda: {"name": "relu"},
        {"name": "kernel"}, wgc.kernel_info)
    add("wgc.register_kernel", fn(wgc.register_kernel),
        lambda: {"name": f"bad_inputs_kernel_{next(_names)}", "source": SIMPLE_KERNEL,
                 "bindings": [("out", "read_write")], "params": None, "workgroup_size": 64,
                 "dtypes": ("f32",), "entry_point": None, "grid": None, "replace": False,
                 "checked": True},
        {"name": "kernel_name", "source": "source", "bindings": "bindings",
         "params": "kernel_params", "workgroup_size": "workgroup_size", "dtypes": "dtypes",
         "entry_point": "entry_point", "grid": "grid", "replace": "bool", "checked": "bool"},
        wgc.register_kernel)
    add("wgc.ElementwiseKernel", fn(wgc.ElementwiseKernel),
        lambda: {"in_params": "x: T, a: f32", "out_params": "z: T", "operation": "z = x;",
                 "name": "bad_inputs_ek", "preamble": ""},
        {"in_params": "typed_args", "out_params": "typed_args", "operation": "wgsl_code",
         "name": "kernel_name", "preamble": "wgsl_code"}, wgc.ElementwiseKernel)
    add("wgc.ReductionKernel", fn(wgc.ReductionKernel),
        lambda: {"in_params": "x: T", "out_params": "y: T", "map_expr": "x",
                 "reduce_expr": "a + b", "post_map_expr": "y = a;", "identity": "0",
                 "name": "bad_inputs_rk", "reduce_type": None, "preamble": ""},
        {"in_params": "typed_args", "out_params": "typed_args", "map_expr": "wgsl_code",
         "reduce_expr": "wgsl_code", "post_map_expr": "wgsl_code", "identity": "wgsl_code",
         "name": "kernel_name", "reduce_type": "reduce_type", "preamble": "wgsl_code"},
        wgc.ReductionKernel)
    for f in (wgc.run_kernel, wgc.run_kernel_async):
        add(f"wgc.{f.__name__}", call_then_wait(f),
            lambda: {"kernel": "scale", "inputs": [f32()], "output": None,
                     "params": {"scalar": 2.0}},
            {"kernel": "kernel", "inputs": "buffers", "output": "out", "params": "params"}, f)
    add("wgc.sub", fn(wgc.sub), lambda: {"a": f32(), "b": f32(), "out": None},
        {"a": "buffer", "b": "buffer", "out": "out"}, wgc.sub)
    for f in (wgc.add, wgc.multiply, wgc.divide):  # the array namespace's: x1, x2 positional
        add(f"wgc.{f.__name__}", positional(f, "x1", "x2"),
            lambda: {"x1": f32(), "x2": f32(), "out": None},
            {"x1": "buffer", "x2": "buffer", "out": "out"}, f)
    add("wgc.scale", fn(wgc.scale), lambda: {"inp": f32(), "scalar": 2.0, "out": None},
        {"inp": "buffer", "scalar": "number", "out": "out"}, wgc.scale)
    add("wgc.relu", fn(wgc.relu), lambda: {"inp": f32(), "out": None, "slope": 0.1},
        {"inp": "buffer", "out": "out", "slope": "number"}, wgc.relu)
    add("wgc.matmul", positional(wgc.matmul, "x1", "x2"),
        lambda: {"x1": mat(), "x2": mat(), "out": None, "precision": None},
        {"x1": "matrix", "x2": "matrix", "out": "out", "precision": "precision"}, wgc.matmul)
    add("wgc.transpose", fn(wgc.transpose), lambda: {"a": mat(), "out": None, "axes": None},
        {"a": "matrix", "out": "out", "axes": "axes"}, wgc.transpose)
    add("wgc.astype", positional(wgc.astype, "x", "dtype"),  # to f64, exact where it can
        lambda: {"x": f32(), "dtype": "f64" if lacks("f64") is None else "f32",
                 "rounding": None, "casting": "exact", "out": None, "copy": True,
                 "device": None},
        {"x": "buffer", "dtype": "dtype", "rounding": "rounding", "casting": "casting",
         "out": "out", "copy": "bool", "device": "device"}, wgc.astype)
    add("wgc.fill", fn(wgc.fill), lambda: {"out": f32(), "value": 2.0},
        {"out": "buffer", "value": "fill_value"}, wgc.fill)
    for name in ("sum", "max", "min", "reduce_sum", "reduce_max", "reduce_min", "mean",
                 "argmax", "reduce_mean", "reduce_argmax"):
        f = getattr(wgc, name)
        good = {"x": mat(), "axis": -1, "out": None, "keepdims": False}
        kinds = {"x": "matrix", "axis": "axis", "out": "out", "keepdims": "bool"}
        if name == "sum":
            good["dtype"], kinds["dtype"] = None, "dtype"
        add(f"wgc.{name}", fn(f) if name.startswith("reduce_") else positional(f, "x"),
            lambda good=good: {k: (mat() if k == "x" else v) for k, v in good.items()},
            kinds, f)
    add("wgc.autotune_wait", fn(wgc.autotune_wait), lambda: {"device": None, "timeout": 1.0},
        {"device": "device", "timeout": "timeout"}, wgc.autotune_wait)
    add("wgc.softmax", fn(wgc.softmax), lambda: {"x": mat(), "axis": -1, "out": None},
        {"x": "matrix", "axis": "axis", "out": "out"}, wgc.softmax)
    # commands
    add("wgc.submit", lambda kw: _wait(wgc.submit(**kw)),
        lambda: {"spec": {"op": "run_kernel", "kernel": "relu", "inputs": [f32()]}},
        {"spec": "spec"}, wgc.submit)
    add("wgc.poll", fn(wgc.poll), lambda: {"cmd": wgc.run_kernel_async("relu", [f32()])},
        {"cmd": "cmd"}, wgc.poll)
    add("wgc.wait", fn(wgc.wait), lambda: {"cmd": wgc.run_kernel_async("relu", [f32()]),
                                           "timeout": None},
        {"cmd": "cmd", "timeout": "timeout"}, wgc.wait)
    # pipelines
    for f in (wgc.pipeline, wgc.Pipeline):
        add(f"wgc.{f.__name__}", fn(f), lambda: {"label": "p", "device": None},
            {"label": "label", "device": "device"}, f)
    add("wgc.pipeline_add", fn(wgc.pipeline_add),
        lambda: {"p": wgc.pipeline(), "stage": {"kernel": "relu", "inputs": [f32()]}},
        {"p": "pipeline", "stage": "stage"}, wgc.pipeline_add)
    add("wgc.pipeline_run", fn(wgc.pipeline_run),
        lambda: {"p": _pipe(), "profile": False},
        {"p": "pipeline", "profile": "bool"}, wgc.pipeline_run)
    add("wgc.free_pipeline", fn(wgc.free_pipeline), lambda: {"p": _pipe()},
        {"p": "pipeline"}, wgc.free_pipeline)
    # streams
    for f in (wgc.create_stream, wgc.Stream):
        add(f"wgc.{f.__name__}", fn(f),
            lambda: {"label": "s", "timeline": None, "device": None},
            {"label": "label", "timeline": "timeline", "device": "device"}, f)
    add("wgc.stream_map", consume,
        lambda: {"work": "relu", "batches": [np.ones(4, np.float32)], "depth": 1,
                 "params": None, "out_shape": None, "out_dtype": None, "timeline": None,
                 "devices": None, "processes": False},
        {"work": "work", "batches": "batches", "depth": "depth", "params": "params",
         "out_shape": "shape", "out_dtype": "dtype", "timeline": "timeline",
         "devices": "devices", "processes": "processes"}, wgc.stream_map)
    # worker processes: refused before any process starts
    add("wgc.device_processes", lambda kw: wgc.device_processes(**kw).close(),
        lambda: {"devices": [0]}, {"devices": "process_devices"})
    add("wgc.load_each", fn(wgc.load_each), lambda: {"fn": np.ones, "items": [1]},
        {"fn": "callable", "items": "items"})
    add("wgc.fuse", fn(wgc.fuse), lambda: {"fn": lambda x: x + 1.0}, {"fn": "callable"},
        wgc.fuse)
    # surfaces (offscreen canvases)
    add("wgc.create_surface", lambda kw: wgc.create_surface(**kw).close(),
        lambda: {"width": 8, "height": 8, "title": "t", "offscreen": True, "device": None},
        {"width": "dims", "height": "dims", "title": "title", "offscreen": "bool",
         "device": "device"},
        wgc.create_surface)
    add("wgc.set_pixels", fn(wgc.set_pixels),
        lambda: {"surface": _surface(), "data": np.zeros((8, 8, 4), np.uint8)},
        {"surface": "surface", "data": "image_array"}, wgc.set_pixels)
    add("wgc.present", fn(wgc.present), lambda: {"surface": _surface()},
        {"surface": "surface"}, wgc.present)
    add("wgc.run_to_surface", lambda kw: _wait(wgc.run_to_surface(**kw)),
        lambda: {"kernel": "invert", "inputs": [img()], "output": None,
                 "surface": _surface(), "params": None, "present": True},
        {"kernel": "kernel", "inputs": "buffers", "output": "out", "surface": "surface",
         "params": "params", "present": "bool"}, wgc.run_to_surface)

    # devices
    add("wgc.device", fn(wgc.device),
        lambda: {"which": None, "backend": None, "hold_clocks": None, "new": False},
        {"which": "which", "backend": "backend", "hold_clocks": "hold_clocks", "new": "bool"},
        wgc.device)
    add("wgc.synchronize", fn(wgc.synchronize), lambda: {"device": None, "timeout": None},
        {"device": "device", "timeout": "timeout"}, wgc.synchronize)
    add("wgc.set_eager", fn(wgc.set_eager), lambda: {"on": False}, {"on": "bool"},
        wgc.set_eager)
    add("wgc.memory_stats", fn(wgc.memory_stats), lambda: {"device": None},
        {"device": "device"}, wgc.memory_stats)
    add("wgc.set_default_device", fn(wgc.set_default_device),
        lambda: {"dev": wgc.current_device()}, {"dev": "dev"}, wgc.set_default_device)
    add("wgc.use_device", _enter, lambda: {"dev": wgc.current_device()}, {"dev": "dev"},
        wgc.use_device)
    add("Buffer.to", method("to"), lambda: {"self": f32(), "device": wgc.current_device()},
        {"self": "self_buffer", "device": "dev"}, wgc.Buffer.to,
        aliases={"device": ("device",)})
    add("Pipeline.clone", method("clone"),
        lambda: {"self": _pipe(), "device": wgc.current_device()},
        {"self": "self_pipeline", "device": "dev"}, wgc.Pipeline.clone,
        aliases={"device": ("device",)})

    # Buffer methods
    B = wgc.Buffer
    for m in ("read", "to_numpy", "tolist", "read_async", "free", "get"):
        add(f"Buffer.{m}", method_then_wait(m),
            lambda: {"self": f32()}, {"self": "self_buffer"}, getattr(B, m))
    for m in ("write", "write_async"):
        add(f"Buffer.{m}", method_then_wait(m),
            lambda: {"self": f32(), "data": [1.0, 2.0, 3.0, 4.0]},
            {"self": "self_buffer", "data": "data"}, getattr(B, m))
    # Buffer as an array (operators are covered by tests/test_arrays.py)
    for m in ("copy", "ravel", "flatten"):
        add(f"Buffer.{m}", method(m), lambda: {"self": f32()}, {"self": "self_buffer"},
            getattr(B, m))
    add("Buffer.item", method("item"), lambda: {"self": f32(1)}, {"self": "self_buffer"},
        B.item)
    add("Buffer.reshape", lambda kw: kw.pop("self").reshape(kw["shape"]),
        lambda: {"self": f32(), "shape": (2, 2)}, {"self": "self_buffer", "shape": "shape"},
        B.reshape)
    add("Buffer.view", method("view"), lambda: {"self": f32(), "dtype": "s32"},
        {"self": "self_buffer", "dtype": "dtype"}, B.view)
    add("Buffer.astype", method("astype"),
        lambda: {"self": f32(), "dtype": "f64", "rounding": None, "casting": "exact"},
        {"self": "self_buffer", "dtype": "dtype", "rounding": "rounding",
         "casting": "casting"}, B.astype)
    add("Buffer.transpose", lambda kw: kw.pop("self").transpose(kw["axes"]),
        lambda: {"self": mat(), "axes": (1, 0)}, {"self": "self_buffer", "axes": "axes"},
        B.transpose)
    for m in ("sum", "max", "min", "mean", "argmax"):
        add(f"Buffer.{m}", method(m),
            lambda: {"self": mat(), "axis": None, "keepdims": False, "out": None},
            {"self": "self_buffer", "axis": "axis", "keepdims": "bool", "out": "out"},
            getattr(B, m))
    # Command methods
    C = wgc.Command
    for m in ("wait", "result"):
        add(f"Command.{m}", method(m),
            lambda: {"self": wgc.run_kernel_async("relu", [f32()]), "timeout": None},
            {"timeout": "timeout"}, getattr(C, m))
    add("Command.add_done_callback", method("add_done_callback"),
        lambda: {"self": wgc.run_kernel_async("relu", [f32()]), "fn": lambda c: None},
        {"fn": "callable"}, C.add_done_callback)
    # Pipeline methods
    P = wgc.Pipeline
    add("Pipeline.add", method("add"),
        lambda: {"self": wgc.pipeline(), "stage": {"kernel": "relu", "inputs": [f32()]}},
        {"stage": "stage"}, P.add, skip_args=("kwargs",))
    add("Pipeline.set_params", method("set_params"),
        lambda: {"self": _pipe("scale", {"scalar": 2.0}), "stage_index": 0},
        {"stage_index": "stage_index"}, P.set_params, skip_args=("params",))
    add("Pipeline.set_params(scalar=)",
        lambda kw: kw.pop("self").set_params(0, **kw),
        lambda: {"self": _pipe("scale", {"scalar": 2.0}), "scalar": 3.0},
        {"scalar": "number"})
    add("Pipeline.run", method("run"), lambda: {"self": _pipe(), "profile": False},
        {"profile": "bool"}, P.run)
    add("Pipeline.encode", method("encode"),
        lambda: {"self": _pipe(), "encoder": _encoder(), "profile_query": None},
        {"encoder": "encoder"}, P.encode,
        skip_args=("profile_query",))  # a wgpu GPUQuerySet handed to wgpu as is
    for m in ("submit", "buffers", "free"):
        add(f"Pipeline.{m}", method_then_wait(m),
            lambda: {"self": _pipe()}, {"self": "self_pipeline"}, getattr(P, m))
    # Stream methods (each call is followed by sync(), which raises what failed later)
    S = wgc.Stream
    add("Stream.upload", stream_then_sync("upload"),
        lambda: {"self": wgc.create_stream(), "array": np.ones(4, np.float32), "label": "",
                 "batch": None},
        {"array": "array", "label": "label", "batch": "batch_tag"}, S.upload)
    add("Stream.write", stream_then_sync("write"),
        lambda: {"self": wgc.create_stream(), "buf": f32(), "data": [1.0] * 4, "batch": None},
        {"buf": "buffer", "data": "data", "batch": "batch_tag"}, S.write)
    add("Stream.run_kernel", stream_then_sync("run_kernel"),
        lambda: {"self": wgc.create_stream(), "kernel": "scale", "inputs": [f32()],
                 "output": None, "params": {"scalar": 2.0}, "batch": None},
        {"kernel": "kernel", "inputs": "buffers", "output": "out", "params": "params",
         "batch": "batch_tag"}, S.run_kernel)
    add("Stream.run", stream_then_sync("run"),
        lambda: {"self": wgc.create_stream(), "pipeline": _pipe(), "batch": None},
        {"pipeline": "pipeline", "batch": "batch_tag"}, S.run)
    add("Stream.download", stream_then_sync("download"),
        lambda: {"self": wgc.create_stream(), "buf": f32(), "batch": None},
        {"buf": "buffer", "batch": "batch_tag"}, S.download)
    add("Stream.wait_event", stream_then_sync("wait_event"),
        lambda: {"self": wgc.create_stream(), "event": wgc.create_stream().record_event()},
        {"event": "event"}, S.wait_event)
    add("Stream.sync", method("sync"), lambda: {"self": wgc.create_stream(), "timeout": None},
        {"timeout": "timeout"}, S.sync)
    add("Event.wait", method("wait"),
        lambda: {"self": wgc.create_stream().record_event(), "timeout": None},
        {"timeout": "timeout"}, wgc.Event.wait)
    # wgc.image
    im = wgc.image
    add("wgc.image.load", fn(im.load),
        lambda: {"path": _photo(), "label": "", "frame": 0, "dtype": None},
        {"path": "path", "label": "label", "frame": "frame", "dtype": "load_dtype"}, im.load)
    add("wgc.image.load_frames", fn(im.load_frames),
        lambda: {"path": _photo(), "label": "", "dtype": None},
        {"path": "path", "label": "label", "dtype": "load_dtype"}, im.load_frames)
    add("wgc.image.read_frames", fn(im.read_frames), lambda: {"path": _photo(), "dtype": None},
        {"path": "path", "dtype": "load_dtype"}, im.read_frames)
    add("wgc.image.save", fn(im.save), lambda: {"buf": img(), "path": _out_path(), "bits": 8},
        {"buf": "image", "path": "path", "bits": "bits"}, im.save)
    add("wgc.image.save_frames", fn(im.save_frames),
        lambda: {"bufs": [img(), img()], "path": _out_path()[:-4] + ".gif",
                 "durations": [10, 20], "loop": 0},
        {"bufs": "bufs", "path": "gif_path", "durations": "durations", "loop": "loop"},
        im.save_frames)
    add("wgc.image.write_frames", fn(im.write_frames),
        lambda: {"frames": [np.zeros((4, 4, 4), np.uint8)] * 2,
                 "path": _out_path()[:-4] + ".gif", "durations": [10, 20], "loop": 0},
        {"frames": "frames", "path": "gif_path", "durations": "durations", "loop": "loop"},
        im.write_frames)
    add("wgc.image.file_array", fn(im.file_array),
        lambda: {"array": np.zeros((4, 4, 4), np.uint8), "bits": 16},
        {"array": "file_image", "bits": "bits"}, im.file_array, skip_args=("argument",))
    add("wgc.image.from_numpy", fn(im.from_numpy),
        lambda: {"array": np.zeros((4, 4, 3), np.uint8), "label": ""},
        {"array": "image_array", "label": "label"}, im.from_numpy)
    add("wgc.image.to_numpy", fn(im.to_numpy), lambda: {"buf": img(), "channels": 4},
        {"buf": "image", "channels": "channels"}, im.to_numpy)
    add("wgc.image.to_uint8", fn(im.to_uint8), lambda: {"array": np.zeros((2, 2))},
        {"array": "array"}, im.to_uint8)
    add("wgc.image.apply", lambda kw: im.apply(kw.pop("kernel"), kw.pop("image"), **kw),
        lambda: {"kernel": "invert", "image": img(), "out": None},
        {"kernel": "kernel", "image": "image", "out": "out"}, im.apply,
        skip_args=("extra", "params"))  # extra: more input Buffers; params: by kernel
    add("wgc.image.apply(size=)", lambda kw: im.apply("resize", img(), **kw),
        lambda: {"size": (4, 4)}, {"size": "shape"},
        aliases={"size": ("size",)})
    add("wgc.image.parse_pipeline", fn(im.parse_pipeline),
        lambda: {"text": "grayscale", "shape": (8, 8, 4), "dtype": "u8"},
        {"text": "text", "shape": "shape", "dtype": "dtype"}, im.parse_pipeline)
    add("wgc.image.submit_stages", lambda kw: _wait(im.submit_stages(**kw)[0]),
        lambda: {"image": img(), "stages": im.parse_pipeline("invert"), "label": "x"},
        {"image": "image", "stages": "stages", "label": "label"}, im.submit_stages)
    add("wgc.image.as_rgba8", fn(im.as_rgba8),
        lambda: {"array": np.zeros((4, 4, 4), np.uint8), "channels": 4},
        {"array": "image_array", "channels": "channels"}, im.as_rgba8,
        skip_args=("argument",))  # the name its messages use for the array
    add("wgc.image.read_file", fn(im.read_file),
        lambda: {"path": _photo(), "frame": 0, "dtype": None},
        {"path": "path", "frame": "frame", "dtype": "load_dtype"}, im.read_file)
    add("wgc.image.write_file", fn(im.write_file),
        lambda: {"array": np.zeros((4, 4, 3), np.uint8), "path": _out_path()},
        {"array": "image_array", "path": "path"}, im.write_file)
    add("wgc.image.write_atomically", fn(im.write_atomically),
        lambda: {"path": _out_path(), "write": lambda tmp: open(tmp, "w").close()},
        {"path": "path", "write": "callable"}, im.write_atomically)
    add("wgc.image.remove_stale_temps", fn(im.remove_stale_temps),
        lambda: {"path": _out_path()}, {"path": "path"}, im.remove_stale_temps)
    return T


_names = itertools.count()


def _wait(r):
    if isinstance(r, wgc.Command):
        r.wait()
    return r


def _enter(kw):
    with wgc.use_device(**kw):
        pass


def _pipe(kernel="relu", params=None):
    p = wgc.pipeline()
    p.add(kernel=kernel, inputs=[f32()], params=params)
    return p


def _encoder():
    from wgcompute import current_device as get_device  # the raw wgpu encoder a user would pass

    return get_device().gpu_device.create_command_encoder()


_surfaces: list = []


def _surface():
    if not _surfaces:
        _surfaces.append(wgc.create_surface(8, 8, offscreen=True))
    return _surfaces[0]


_tmp: list = []


def _tmpdir():
    import tempfile

    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="wgc-bad-inputs-"))
    return _tmp[0]


def _photo():
    import os

    path = os.path.join(_tmpdir(), "photo.png")
    if not os.path.exists(path):
        from PIL import Image

        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(path)
    return path


def _out_path():
    import os

    return os.path.join(_tmpdir(), "out.png")


TARGETS = _targets()
BY_NAME = {t.name: t for t in TARGETS}

# The kinds of "self": the object itself freed or closed.
SELF_BAD = {"self_buffer": [FREED], "self_pipeline": [Make("freed Pipeline", freed_pipeline)]}

# (target, argument, value label): accepted on purpose, and why.
ACCEPTED: dict[tuple[str, str, str], str] = {}


def accept(targets, arg, labels, why):
    for t in ([targets] if isinstance(targets, str) else targets):
        for lab in ([labels] if isinstance(labels, str) else labels):
            ACCEPTED[(t, arg, lab)] = why


ANY_BUFFER = ["u32 Buffer", "Buffer (3,)", "empty Buffer (0,)"]
REDUCTIONS = ["wgc.sum", "wgc.max", "wgc.min", "wgc.reduce_sum", "wgc.reduce_max",
              "wgc.reduce_min", "wgc.mean", "wgc.argmax", "wgc.reduce_mean",
              "wgc.reduce_argmax", "wgc.softmax"]
accept(["wgc.buffer", "wgc.buffer_from_binary", "wgc.buffer_zeros", "wgc.empty",
        "wgc.from_numpy", "wgc.upload", "wgc.image.from_numpy", "Stream.upload",
        "wgc.create_stream", "wgc.Stream"], "label", "None", "None is the default: no label")
for _arg in ("bindings", "workgroup_size", "dtypes"):
    accept("wgc.register_kernel", _arg, "None",
           "None: read from the WGSL source (its bindings, @workgroup_size, element types)")
accept(["wgc.ElementwiseKernel", "wgc.ReductionKernel"], "name", ["None", "'relu'"],
       "None: a default name; these kernels are objects, not registered: any name is free")
accept(["wgc.ElementwiseKernel", "wgc.ReductionKernel"], "preamble", "''",
       "'' is the default: no helper code")
accept("wgc.ReductionKernel", "identity", "5", "a number is its own WGSL literal")
accept("wgc.buffer", "shape", "None", "None: the data's own shape")
accept("wgc.buffer", "dtype", "None", "None: the array's dtype, else f32")
accept("wgc.buffer", "data", "[]", "an empty buffer of shape (0,)")
accept("wgc.buffer", "data", "[nan]", "NaN is a valid f32 value, stored as is")
accept(["wgc.empty", "wgc.buffer_zeros"], "shape", "()", "a 0-d buffer of one element")
accept(["wgc.to_numpy", "wgc.read", "wgc.read_list", "wgc.read_binary", "wgc.shape",
        "wgc.dtype", "wgc.size", "wgc.free", "Stream.download"], "buf", ANY_BUFFER,
       "any buffer can be read, described or freed")
accept("wgc.free", "buf", "freed Buffer", "freeing twice is harmless (documented)")
accept("wgc.asnumpy", "a", ANY_BUFFER + ["1.0", "[1.0, 2.0]", "ndarray(4,)float32"],
       "CuPy's asnumpy: any buffer is read, numbers and lists become arrays, numpy passes")
accept("Buffer.free", "self", "freed Buffer", "freeing twice is harmless (documented)")
accept("Pipeline.free", "self", "freed Pipeline",
       "freeing twice is harmless")
accept("wgc.free_pipeline", "p", "freed Pipeline", "freeing twice is harmless")
accept("Pipeline.buffers", "self", "freed Pipeline", "a freed pipeline has no buffers: []")
accept("wgc.scale", "inp", ANY_BUFFER, "scale runs on every dtype and shape")
accept("wgc.relu", "inp", ["Buffer (3,)", "empty Buffer (0,)"], "any shape")
accept("wgc.fill", "out", ANY_BUFFER, "fill writes any buffer (2.0 is exact in u32)")
accept(["wgc.scale", "Pipeline.set_params(scalar=)"],
       "scalar", ["nan", "inf", "-inf"], "IEEE values for an f32 buffer (numpy agrees)")
accept("wgc.relu", "slope", ["nan", "inf", "-inf"], "IEEE values for an f32 buffer")
accept(["wgc.run_kernel", "wgc.run_kernel_async", "Stream.run_kernel"], "params",
       "{'scalar': nan}", "NaN is a valid f32 scale")
accept("wgc.fill", "value", "nan", "NaN is a valid f32 value")
accept(REDUCTIONS, "x", ["1-D Buffer", "Buffer (3, 5)"], "any shape reduces")
accept([r for r in REDUCTIONS if r != "wgc.softmax"], "x", "s32 Buffer (4, 4)",
       "integer reductions are supported")
accept(REDUCTIONS, "axis", "1", "the last axis of a 2-D buffer, as -1")
NUMPY_REDUCTIONS = [r for r in REDUCTIONS if r != "wgc.softmax"] + [
    f"Buffer.{m}" for m in ("sum", "max", "min", "mean", "argmax")]
accept(NUMPY_REDUCTIONS, "axis", ["0", "1", "-2"], "any axis of a 2-D buffer, as numpy")
for _arg in ("x1", "x2"):
    accept(["wgc.add", "wgc.multiply", "wgc.divide"], _arg, "1.0",
           "a Python scalar with an array: the array API standard's rule")
accept("wgc.astype", "casting", "None", "None is the default: numpy's conversion")
accept("wgc.sum", "dtype", "None", "None is the default: the standard's dtype for the sum")
accept(["wgc.matmul"], "x1", "1-D Buffer", "numpy's matmul takes a vector (a row)")
accept(["wgc.matmul"], "x2", "1-D Buffer", "numpy's matmul takes a vector (a column)")
accept("wgc.transpose", "a", "1-D Buffer", "numpy transposes a 1-D array to itself")
accept("wgc.astype", "x", ANY_BUFFER, "every dtype and shape converts (exactly here)")
accept("Buffer.view", "dtype", "None", "None: a view of the same dtype (numpy's view())")
accept("Buffer.reshape", "shape", ["-1", "(-1,)"], "-1 stands for every element (numpy)")

accept("wgc.reduce_argmax", "out", "u32 Buffer",
       "the argmax kernel writes u32 indices (a (4,) u32 fits)")
accept("wgc.transpose", "a", ["Buffer (3, 5)", "s32 Buffer (4, 4)"], "any 2-D buffer")
accept("Stream.write", "buf", "u32 Buffer", "1.0 is exact in u32")
accept(["wgc.stream_map"], "out_shape", "None", "None: like the input")
accept(["wgc.stream_map"], "out_dtype", "None", "None: like the input")
accept("wgc.create_surface", "offscreen", "None", "None: offscreen only without a display")
accept("wgc.set_pixels", "data", ["ndarray(4, 4)float32", "a Buffer"],
       "f32 images and Buffers are shown too")
accept("wgc.image.as_rgba8", "array", "ndarray(4, 4)float32",
       "a float32 grey image is converted like to_numpy converts one")
accept("wgc.image.to_uint8", "array", ["5", "[1.0, 2.0]", "ndarray(1,)float128", "a Buffer"],
       "anything numpy reads as numbers (clipped to [0, 1], scaled)")


# -- the cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    target: str
    arg: str
    value: object

    @property
    def id(self) -> str:
        return f"{self.target}:{self.arg}={label_of(self.value)}"


def cases() -> list[Case]:
    out = []
    for t in TARGETS:
        for arg, kind in t.kinds.items():
            values = SELF_BAD[kind] if kind in SELF_BAD else BAD[kind] + [OPAQUE]
            for v in values:
                out.append(Case(t.name, arg, v))
    return out


CASES = cases()


def names_argument(message: str, names) -> bool:
    """Does the message name the argument: ``name:``, ``name[i]``, ``'name'``, ``name=``?"""
    for n in names:
        if n.startswith("--") or " " in n:
            if n in message:
                return True
            continue
        e = re.escape(n)
        if f"'{n}'" in message or re.search(
                rf"(?<![\w.'-]){e}(\[\d+\]:|:|=|/|\(s\)| \d| [(\['\"]| buffer\b|"
                rf" (is|are|must|has|of|was|expected|and)\b)", message):
            return True
    return False


@dataclass
class Outcome:
    """right: a WgComputeError naming the argument; unnamed: a WgComputeError that does not;
    raw: any other exception; accepted: the call returned (fine if listed in ACCEPTED)."""

    kind: str
    detail: str


def run_case(case: Case) -> Outcome:
    t = BY_NAME[case.target]
    kw = t.good()
    kw[case.arg] = value_of(case.value)
    result = None
    try:
        result = t.call(dict(kw))
    except wgc.WgComputeError as e:
        if case.arg == "self":
            ok = isinstance(e, (wgc.BufferFreedError, wgc.PipelineError))
            return Outcome("right" if ok else "unnamed", f"{type(e).__name__}: {e}")
        names = t.aliases.get(case.arg) or ALIASES.get(case.arg) or (case.arg,)
        kind = "right" if names_argument(str(e), names) else "unnamed"
        return Outcome(kind, f"{type(e).__name__}: {first_line(e)}")
    except Exception as e:  # noqa: BLE001 - what the matrix looks for
        return Outcome("raw", f"{type(e).__name__}: {first_line(e)}")
    finally:
        close_streams([*kw.values(), result])
    return Outcome("accepted", label_of(result))


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else ""


def close_streams(objs) -> None:
    """Streams a case made are closed (their threads end; nothing is left for exit)."""
    for o in objs:
        if isinstance(o, wgc.Stream):
            try:
                o.close()
            except wgc.WgComputeError:
                pass


def judge(case: Case, outcome: Outcome) -> str | None:
    """None if the outcome is what wgcompute promises, else why not."""
    key = (case.target, case.arg, label_of(case.value))
    if outcome.kind == "right":
        return None
    if outcome.kind == "accepted":
        if key in ACCEPTED:
            return None
        return f"accepted silently (returned {outcome.detail})"
    if outcome.kind == "unnamed":
        return f"the error does not name {case.arg!r}: {outcome.detail}"
    return f"raised a raw {outcome.detail}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case):
    outcome = run_case(case)
    problem = judge(case, outcome)
    assert problem is None, f"{case.id}: {problem}"


# -- the matrix covers the whole public surface ---------------------------------------------------
NO_ARGUMENTS = {  # called once each: they take nothing a user could get wrong
    "device_info", "is_gpu", "version", "adapters", "live_buffers", "kernels",
    "kernels_stats", "release_staging", "autotune_reset", "devices", "current_device",
    "default_device", "Timeline", "Pipeline.close", "Pipeline.recipe",
    "Buffer.tolist", "Command.poll", "Command.done", "Command.future", "Pipeline.buffers",
    "Stream.record_event", "Stream.query", "Stream.close", "Event.query",
    "image.has_imageio", "image.INSTALL_HINT", "image.stage_help", "image.image_stage_names",
}
NOT_CALLABLE_BY_USERS = {
    "Buffer": "made by wgc.buffer/empty/from_numpy, never constructed directly",
    "Command": "made by submit/run_kernel_async/..., never constructed directly",
    "Event": "made by Stream.record_event()",
    "DeviceProcesses": "made by wgc.device_processes() (its arguments are in the matrix)",
    "ProcessMap": "made by wgc.stream_map(processes=...) (in the matrix)",
    "LoadEach": "made by wgc.load_each() (its arguments are in the matrix)",
    "Kernel": "a base class for kernels (register_kernel is the user's way in)",
    "Param": "a frozen description of a kernel parameter",
    "Status": "an enum",
    "Device": "made by wgc.device(...) (its arguments are in the matrix)",
    "AdapterInfo": "a description returned by wgc.devices()",
    "StreamMap": "the iterator wgc.stream_map returns",
    "image": "the wgc.image module (its functions are listed one by one)",
}


def public_surface() -> set[str]:
    names = set()
    for n in wgc.__all__:
        obj = getattr(wgc, n)
        if n.startswith("__") or n in NOT_CALLABLE_BY_USERS or n == "DTYPES":
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        if callable(obj):
            names.add(n if n in ("Pipeline", "Stream") else n)
    for cls in (wgc.Buffer, wgc.Command, wgc.Pipeline, wgc.Stream, wgc.Event):
        for m, obj in vars(cls).items():
            if not m.startswith("_") and inspect.isfunction(obj):
                names.add(f"{cls.__name__}.{m}")
    for n in wgc.image.__all__:
        if n != "Stage":
            names.add(f"image.{n}")
    return names


def covered() -> set[str]:
    out = set(NO_ARGUMENTS)
    for t in TARGETS:
        base = t.name.split("(")[0]
        out.add(base.removeprefix("wgc."))
    return out


def test_every_public_callable_is_in_the_matrix():
    missing = sorted(public_surface() - covered())
    assert not missing, f"not in the bad-input matrix (add a Target or NO_ARGUMENTS): {missing}"


@pytest.mark.parametrize("target", [t for t in TARGETS if t.signature_of is not None],
                         ids=lambda t: t.name)
def test_every_argument_has_bad_values(target):
    params = [p.name for p in inspect.signature(target.signature_of).parameters.values()]
    missing = [p for p in params
               if p != "self" and p not in target.kinds and p not in target.skip_args]
    assert not missing, f"{target.name}: arguments without bad values: {missing}"


def test_functions_without_arguments_run():
    for name in sorted(NO_ARGUMENTS - {"autotune_reset"}):  # it would drop tuned choices
        if "." in name:
            continue
        getattr(wgc, name)()


def test_the_accepted_table_has_no_stale_entries():
    keys = {(c.target, c.arg, label_of(c.value)) for c in CASES}
    stale = sorted(k for k in ACCEPTED if k not in keys)
    assert not stale, f"ACCEPTED entries that match no case: {stale}"
