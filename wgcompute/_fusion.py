"""wgc.fuse: a function of elementwise operations traced once per argument signature with
symbolic stand-ins (_fusion_trace), then run as one fused kernel per call."""

from __future__ import annotations

import functools
import threading
import types
from dataclasses import dataclass

from . import (
    _fusion_auto,  # noqa: F401 - installs automatic fusion (WGCOMPUTE_FUSE)
    _lazy,
)
from ._fusion_trace import ScalarArg, Traced, _Reduction, _Trace
from ._fusion_xp import Namespace, namespace_module
from .array import _is_scalar
from .array import copy as _copy
from .buffer import Buffer, check_buffer, result_buffer
from .dtypes import DTYPES
from .errors import ArgumentError, DeviceError, DtypeError
from .kernels.elementwise.fused import fused_dispatch, fused_kernel, sub_dag


@dataclass(frozen=True)
class _Group:
    """One fused kernel of a traced function: the outputs of one shape."""

    kernel: object  # FusedKernel
    shape: tuple
    inputs: tuple[int, ...]  # the trace's input leaves it binds, in binding order
    slots: tuple[int, ...]  # the trace's scalar slots, in uniform order
    dtypes: tuple[str, ...]  # its outputs'


@dataclass(frozen=True)
class _Program:
    """A traced function for one argument signature: its kernels and how its result is put
    together from their outputs (``layout``: per returned value ("out", group, index),
    ("arg", ref) for an argument returned as it is, with a reduction to run or None)."""

    trace: _Trace
    groups: tuple[_Group, ...]
    layout: tuple
    many: type | None  # tuple or list: the function returned several values


def _arg_key(value):
    if isinstance(value, Buffer):
        return ("b", value.shape, str(value.dtype), value._dev)
    if _is_scalar(value):
        return ("s", type(value))
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"fuse: an argument of type {type(value).__name__} is neither a "
                            f"buffer, a scalar nor a hashable constant") from None
    return ("c", type(value), value)


def _get(args, kwargs, ref):
    return kwargs[ref] if isinstance(ref, str) else args[ref]


def _stand_in(trace: _Trace, ref, value, where: str):
    """What the traced function receives for one argument."""
    if isinstance(value, Buffer):
        check_buffer(value, where)
        if DTYPES[value.dtype].kind == "c":
            raise DtypeError(f"fuse: {trace.fname}: {where} is a c64 buffer; fused functions "
                             f"take real and bool dtypes")
        return trace.input(ref, value)
    if _is_scalar(value):
        return ScalarArg(lambda a, k, _r=ref: _get(a, k, _r), value, ("arg", ref))
    return value


class Fused:
    """A function made by ``wgc.fuse``: traced once per signature (argument shapes, dtypes,
    devices, which are scalars), then one fused kernel per call (several where its results
    have several shapes)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__qualname__", repr(fn))
        self._programs: dict = {}
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        key = (tuple(_arg_key(a) for a in args),
               tuple((k, _arg_key(v)) for k, v in sorted(kwargs.items())))
        program = self._programs.get(key)
        if program is None:
            with self._lock:
                program = self._programs.get(key)
                if program is None:
                    program = self._programs[key] = self._trace(args, kwargs)
        return _run(program, args, kwargs)

    def _trace(self, args, kwargs) -> _Program:
        buffers = [v for v in (*args, *kwargs.values()) if isinstance(v, Buffer)]
        if not buffers:
            raise ArgumentError(f"fuse: {self.name}: no argument is a buffer; a fused function "
                                f"computes on buffers")
        trace = _Trace(self.name, buffers[0]._dev)
        trace.namespace = Namespace(self.name)
        stand = [_stand_in(trace, i, a, f"argument {i}") for i, a in enumerate(args)]
        kw = {k: _stand_in(trace, k, v, f"argument {k!r}") for k, v in kwargs.items()}
        fn = with_namespace(self.fn, trace.namespace)
        try:
            result = fn(*stand, **kw)
        except ArgumentError as e:
            if str(e).startswith("fuse:"):
                raise
            raise ArgumentError(f"fuse: {self.name}: {e} (inside a fused function arrays are "
                                f"traced stand-ins: use their operators and methods, or "
                                f"x.__array_namespace__()'s functions)") from e
        return _program(trace, result)


def _program(trace: _Trace, result) -> _Program:
    many = type(result) if isinstance(result, (tuple, list)) else None
    values = list(result) if many else [result]
    wanted: dict[tuple, list[int]] = {}  # shape -> output nodes
    entries = []
    for v in values:
        reduce = None
        if isinstance(v, _Reduction):
            v, reduce = v.x, v.run
        if not isinstance(v, Traced) or v._t is not trace:
            raise ArgumentError(f"fuse: {trace.fname}: returns a {type(v).__name__}; a fused "
                                f"function returns arrays computed from its arguments (one, "
                                f"or a tuple or list of them)")
        node = trace.nodes[v._k]
        if node.op == "in":
            entries.append(("arg", trace.inputs[node.args[0]], reduce))
            continue
        outs = wanted.setdefault(v.shape, [])
        if v._k not in outs:
            outs.append(v._k)
        entries.append(("out", v.shape, outs.index(v._k), reduce))
    shapes = list(wanted)
    groups = tuple(_group(trace, shape, wanted[shape]) for shape in shapes)
    layout = tuple(e if e[0] == "arg" else ("out", shapes.index(e[1]), e[2], e[3])
                   for e in entries)
    return _Program(trace, groups, layout, many)


def _group(trace: _Trace, shape: tuple, outputs: list[int]) -> _Group:
    """The kernel of the nodes ``outputs`` need (one output shape)."""
    dag, inputs, slots = sub_dag(trace.nodes, outputs)
    return _Group(fused_kernel(dag), tuple(shape), inputs, slots,
                  tuple(trace.nodes[k].dtype for k in outputs))


def _inputs(program: _Program, args, kwargs):
    """The argument buffers bound as the trace's inputs (alive, on one device; a view whose
    offset cannot be bound is copied first) and the device."""
    trace = program.trace
    device = trace.device
    out = []
    for ref in trace.inputs:
        b = _get(args, kwargs, ref)
        check_buffer(b, f"fuse: {trace.fname}: argument {ref!r}")
        if b._dev is not device:
            raise DeviceError(f"fuse: {trace.fname}: argument {ref!r} is on {b._dev.label} "
                              f"and the others on {device.label}; a fused kernel runs on one "
                              f"device (copy with buf.to(device))")
        out.append(b if b._bindable() else _copy(b))
    return out, device


def _run(program: _Program, args, kwargs):
    trace = program.trace
    buffers, device = _inputs(program, args, kwargs)
    values = [convert(source.value(args, kwargs)) for source, convert in trace.slots]
    results, calls, held, keep = [], [], list(buffers), []
    for g in program.groups:
        outs = [result_buffer(g.shape, DTYPES[dt], device, f"fuse {trace.fname}")
                for dt in g.dtypes]
        d = fused_dispatch(g.kernel, [buffers[i] for i in g.inputs], outs,
                           [values[s] for s in g.slots], device)
        calls += d.raw_calls()
        keep.append(d)
        held += outs
        results.append(outs)
    if calls:
        # (after what automatic fusion holds, which may write the call's inputs)
        _lazy.queue_calls(f"fuse {trace.fname}", device, calls, keep, held, held_first=True)
    returned = []
    for entry in program.layout:
        if entry[0] == "arg":
            value, reduce = _get(args, kwargs, entry[1]), entry[2]
        else:
            value, reduce = results[entry[1]][entry[2]], entry[3]
        returned.append(reduce(value) if reduce is not None else value)
    return program.many(returned) if program.many else returned[0]


def fuse(fn):
    """Decorator: run ``fn``, a function of elementwise operations on buffers, as ONE fused
    kernel per call (cupy.fuse's idea), queued as the operators are.

    ``fn`` is traced on its first call per signature (the arguments' shapes, dtypes and
    device, which are Python scalars, other arguments by value) with stand-ins that support
    Buffer's elementwise operators, ``relu(slope)``, ``astype`` to a dtype that holds every
    value, the array namespace's elementwise functions (``xp.exp(x)``, where ``xp`` is
    ``wgcompute.array_api`` or ``x.__array_namespace__()``) and a final reduction
    (``sum``/``max``/``min``/``mean``, run on the fused result). Scalar arguments go to the
    kernel's uniform: a new value compiles nothing. Results are bit-equal to running the
    operations one by one; anything else inside ``fn`` is an ArgumentError naming it."""
    if not callable(fn):
        raise ArgumentError(f"fuse: fn must be a function, got {type(fn).__name__} {fn!r}")
    return functools.update_wrapper(Fused(fn), fn)


def _replacement(value, mod, ns):
    """What ``value`` becomes inside a traced function: the namespace module ``ns``, one of
    the namespace's functions its traced form, anything else itself."""
    if value is mod:
        return ns
    name = getattr(value, "__name__", None)
    if callable(value) and isinstance(name, str) and getattr(mod, name, None) is value:
        try:
            return getattr(ns, name)
        except ArgumentError:  # not elementwise: refused when called
            return value
    return value


def with_namespace(fn, ns):
    """``fn`` with the globals, closure cells and defaults that hold the array namespace
    module (or its functions) bound to their traced forms from ``ns`` (a copy: the function
    itself is unchanged)."""
    mod = namespace_module()
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    g = fn.__globals__
    names = {n: _replacement(g[n], mod, ns) for n in code.co_names if n in g}
    names = {n: v for n, v in names.items() if v is not g[n]}
    cells = []
    for c in fn.__closure__ or ():
        try:
            value = c.cell_contents
        except ValueError:  # an empty cell
            cells.append(c)
            continue
        new = _replacement(value, mod, ns)
        cells.append(c if new is value else types.CellType(new))
    defaults = tuple(_replacement(d, mod, ns) for d in fn.__defaults__ or ()) or None
    kwdefaults = {k: _replacement(d, mod, ns) for k, d in (fn.__kwdefaults__ or {}).items()}
    same = (not names and all(a is b for a, b in zip(cells, fn.__closure__ or ()))
            and all(a is b for a, b in zip(defaults or (), fn.__defaults__ or ()))
            and all(v is fn.__kwdefaults__[k] for k, v in kwdefaults.items()))
    if same:
        return fn
    globs = dict(g)
    globs.update(names)
    new = types.FunctionType(code, globs, fn.__name__, defaults, tuple(cells) or None)
    new.__kwdefaults__ = kwdefaults or None
    return new
