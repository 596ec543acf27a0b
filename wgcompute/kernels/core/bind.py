"""Binding a kernel to buffers (``bind``): the checks of its buffers and params, then its
pipeline, uniform and bind groups on the buffers' device, as a Dispatch; multi-pass kernels and
unaligned view inputs bind as a MultiDispatch of several."""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import wgpu

from ...buffer import Buffer, BufferView, check_buffer, empty, from_numpy, result_buffer
from ...dtypes import DTYPES
from ...errors import ArgumentError, DeviceError, DtypeError, ShapeError
from ...runtime import Device, current_device
from . import tuning, warm
from .base import (
    UNIFORM_STRIDE,
    Dispatch,
    Kernel,
    Meta,
    MultiDispatch,
    pack_uniform,
    temp_spec,
)


def _free_all(buffers) -> None:
    for b in buffers:
        b.free()


def _bind_passes(kernel: Kernel, inputs: list[Buffer], output: Buffer, resolved: dict,
                 plan, device: Device, fixed: bool = False) -> MultiDispatch:
    temp_specs, steps = plan
    scratch = getattr(kernel, "scratch_temps", False)
    temps, own = [], []
    for i, spec in enumerate(temp_specs):
        if isinstance(spec, np.ndarray):
            t = from_numpy(spec, label=f"{kernel.name}-tmp{i}", device=device)
        elif scratch:
            temps.append(_scratch(kernel, i, temp_spec(spec), device))
            continue
        else:
            t = empty(*temp_spec(spec), label=f"{kernel.name}-tmp{i}", device=device)
        temps.append(t)
        own.append(t)
    env = {f"in{i}": b for i, b in enumerate(inputs)}
    env.update({f"tmp{i}": t for i, t in enumerate(temps)}, out=output)

    def ref(r):
        return r if isinstance(r, Buffer) else env[r]

    bound = [(k, [ref(r) for r in ins], ref(o), p) for k, ins, o, p in steps]
    parts = _cached_parts(bound, device, fixed) if scratch else [None] * len(bound)
    todo = [step for step, part in zip(bound, parts) if part is None]
    if todo:
        made = iter(_bind_steps(todo, device, fixed))
        parts = [part if part is not None else next(made) for part in parts]
        if scratch:
            _keep_parts(bound, parts, device, fixed)
    keep = list({r._id: r for _, ins, o, _ in steps for r in [*ins, o]
                 if isinstance(r, Buffer)}.values())
    # Tables (numpy temporaries) are small; memory of its own ties it to its buffers
    reusable = all(isinstance(spec, np.ndarray) or scratch for spec in temp_specs)
    d = MultiDispatch(kernel, [Meta.of(b) for b in inputs], Meta.of(output), resolved, None,
                      [launch for part in parts for launch in part.launches],
                      device=device, parts=parts, temps=temps, keep=keep, reusable=reusable,
                      fixed=fixed)
    if own:
        # The bind cache may keep this Dispatch after its buffers are gone: its own temporaries
        # go with it, or with the first of its buffers to be collected whose cache key dies
        # with it (pooled memory's key outlives its Buffer objects: a reusable Dispatch stays
        # bound to it; any other is never cached by that key).
        weakref.finalize(d, _free_all, own)
        for b in list(inputs) + [output]:
            if not reusable or type(b._key) is not tuple:
                weakref.finalize(b, _free_all, own)
    return d


# Steps of scratch-temporary kernels bound, per device (see _cached_parts)
PART_CACHE_SIZE = 1024


def freeze(v, key: bool = False):
    """``v`` (params: dicts, lists, scalars) as a hashable value, dicts' items in order.
    ``key``: for a cache's key, a float -0.0 becomes a value apart from 0.0 (they compare
    equal, but x * -0.0 is not x * 0.0); else the values stay as they are."""
    if type(v) is dict:  # the common case, flat and hashable: as below, without the walk
        try:
            t = tuple(sorted([(k, _signed(x)) for k, x in v.items()] if key else v.items()))
            hash(t)
            return t
        except TypeError:
            pass
    if isinstance(v, dict):
        items = [(k, freeze(x, key)) for k, x in v.items()]
        try:
            return tuple(sorted(items))
        except TypeError:  # mixed key types (a user's {1: ...}): the kernel refuses them later
            return tuple(sorted(items, key=lambda kv: (type(kv[0]).__name__, repr(kv[0]))))
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x, key) for x in v)
    return _signed(v) if key else v


def _signed(x):
    """``x``, or for a float -0.0 a key that no other value equals."""
    if isinstance(x, (float, np.floating)) and x == 0 and np.signbit(x):
        return ("-0.0", type(x))
    return x


def _part_key(fixed: bool, kernel: Kernel, inputs, output: Buffer, params) -> tuple:
    # fixed: shared with queued runs' bindings only (a pipeline's may change its params)
    return (kernel.name, kernel, tuple([b._key for b in inputs]), output._key,
            freeze(params, key=True), fixed)


def _cached_parts(steps, device: Device, fixed: bool = False) -> list:
    """The steps (kernel, inputs, output, params) of a kernel whose temporaries are shared
    scratch as bound earlier on the device for the same buffer keys (pooled memory: its
    place), None for each not bound yet: a binding to a new output binds only the steps that
    write it."""
    with device.binds_lock:
        cache = device.extras.get("parts")
        if cache is None:
            return [None] * len(steps)
        found = []
        for step in steps:
            key = _part_key(fixed, *step)
            d = cache.get(key)
            if d is not None:
                cache.move_to_end(key)
            found.append(d)
        return found


def _keep_parts(steps, parts, device: Device, fixed: bool = False) -> None:
    with device.binds_lock:
        cache = device.extras.get("parts")
        if cache is None:
            cache = device.extras["parts"] = OrderedDict()
        for step, d in zip(steps, parts):
            key = _part_key(fixed, *step)
            cache[key] = d
            cache.move_to_end(key)
        while len(cache) > PART_CACHE_SIZE:
            cache.popitem(last=False)


def _scratch(kernel: Kernel, i: int, spec, device: Device) -> Buffer:
    """Temporary ``i`` of ``kernel`` as the device's shared scratch of its shape and dtype:
    memory from the pool (not zeroed: the kernel writes it before reading it), shared by
    every binding of the kernel with that temporary (the queue runs their work one after
    another) and given back to the pool once none of them holds it."""
    shape, dtype = spec
    shared = device.extras.get("scratch")
    if shared is None:
        shared = device.extras.setdefault("scratch", weakref.WeakValueDictionary())
    key = (kernel.name, i, shape, dtype)
    t = shared.get(key)
    if t is None or t._freed:
        t = result_buffer(shape, DTYPES[dtype], device, label=f"{kernel.name}-tmp{i}")
        shared[key] = t
    return t


# The strided_copy and region_copy kernels that gather unaligned views (builtin.py puts them
# here when it makes the built-in kernels: the registry sits above this module).
GATHER: list = []


def _bind_gathered(kernel: Kernel, inputs: list[Buffer], output: Buffer | None, params,
                   device: Device, fixed: bool = False) -> MultiDispatch:
    """The kernel over views that cannot be bound where they lie (their offset is not a
    multiple of min-storage-buffer-offset-alignment): each is first copied on the GPU into
    a temporary by strided_copy, reading its base from offset 0, in the same compute pass."""
    from .layout import contiguous_strides

    copy, bits = GATHER  # strided_copy, and region_copy for dtypes it does not compute in
    temps, steps, refs = [], [], []
    for i, b in enumerate(inputs):
        if b._bindable():
            refs.append(f"in{i}")
            continue
        item = b._dt.itemsize
        alias = _alias(b._base, b)
        t = len(temps)
        temps.append(empty(b.shape, b._dt, label=f"{kernel.name}-view{i}", device=device))
        strides = contiguous_strides(b.shape)
        if b._dt.name in copy.dtypes:
            steps.append((copy, [alias], temps[t], {"strides": strides,
                                                   "offset": b._offset // item}))
        else:  # complex64: its bits moved
            steps.append((bits, [alias], temps[t], {
                "shape": b.shape, "a_strides": strides, "a_offset": b._offset // item,
                "out_strides": strides, "out_offset": 0}))
        refs.append(temps[t])
    env = {f"in{i}": b for i, b in enumerate(inputs)}
    args = [env[r] if isinstance(r, str) else r for r in refs]
    parts = [bind(k, ins, out, p, fixed=fixed) for k, ins, out, p in steps]
    parts.append(bind(kernel, args, output, params, fixed=fixed))
    for b in list(inputs) + ([output] if output is not None else []):
        weakref.finalize(b, _free_all, temps)
    resolved = parts[-1].params
    return GatheredDispatch(kernel, [Meta.of(b) for b in inputs],
                            Meta.of(output) if output is not None else None, resolved, None,
                            [launch for part in parts for launch in part.launches],
                            device=device, parts=parts, temps=temps, fixed=fixed)


@dataclass
class GatheredDispatch(MultiDispatch):
    """A kernel bound after copies of its unaligned view inputs (``_bind_gathered``): the
    copies do not depend on params, so new params go to the kernel's own part."""

    def set_params(self, **params) -> None:
        self.parts[-1].set_params(**params)
        self.params = self.parts[-1].params
        self.launches = [launch for part in self.parts for launch in part.launches]


def _alias(root: Buffer, view: Buffer) -> Buffer:
    """All of ``root``'s memory seen as elements of ``view``'s dtype, from byte 0 (so it
    binds anywhere)."""
    return BufferView(root, (root.nbytes // view._dt.itemsize,), 0, view._dt)


def same_device(kernel_name: str, named_buffers) -> Device:
    """The one device of ``named_buffers`` ((argument name, Buffer) pairs); a buffer on another
    device is a DeviceError naming it (copy across with ``buf.to(device)``)."""
    device = None
    first = None
    for name, b in named_buffers:
        if device is None:
            device, first = b._dev, name
        elif b._dev is not device:
            raise DeviceError(f"{kernel_name}: {name} is on {b._dev.label} but {first} is on "
                              f"{device.label}; a kernel runs on one device (copy with "
                              f"buf.to(device))")
    return device


def bind(kernel: Kernel, inputs: list[Buffer], output: Buffer | None, params, *,
         fixed: bool = False) -> Dispatch:
    """Validate and bind: everything a dispatch needs, created once, on the buffers' device.
    ``fixed``: the Dispatch never changes its params (``set_params`` refuses new ones), so its
    params buffer may be one the device shares between bindings with the same bytes (the
    queued operators' bindings, commands.bound)."""
    return _begin(kernel, inputs, output, params, None, fixed)()


def _bind_steps(steps, device: Device, fixed: bool = False) -> list[Dispatch]:
    """``bind`` of each (kernel, inputs, output, params) step, their pipelines compiled side by
    side: every step checked and its compile handed to a few threads first, then each binding
    finished in order, each waiting for its own pipeline (and raising its compile error)."""
    with warm.Compiler(device) as compiler:
        finishers = [_begin(*step, compiler, fixed) for step in steps]
        return [finish() for finish in finishers]


def _begin(kernel: Kernel, inputs, output: Buffer | None, params, compiler=None,
           fixed: bool = False):
    """``bind``'s checks, its pipeline's compile started on ``compiler``'s threads if one is
    given: a function finishing the binding (it waits for that compile)."""
    device, aliased, resolved = _checked(kernel, inputs, output, params)
    if not all(b._bindable() for b in inputs):
        d = _bind_gathered(kernel, list(inputs), output, params, device, fixed)
        return lambda: d
    tuning.prepare(kernel, list(inputs), output, resolved, device)  # never inside key
    pin = getattr(kernel, "pin", None)  # (one tuned choice for the key and the grid)
    resolved = pin(list(inputs), output, resolved) if pin is not None else resolved
    plan = kernel.passes(list(inputs), output, resolved)
    if plan is not None:
        d = _bind_passes(kernel, list(inputs), output, resolved, plan, device, fixed)
        return lambda: d
    key = _key(kernel, inputs, output, resolved, aliased)
    pipeline = compiler.start(kernel, key) if compiler is not None else None
    return lambda: _bind_compiled(kernel, inputs, output, resolved, device,
                                  pipeline() if pipeline else kernel.compiled(key, device),
                                  fixed)


def _bind_compiled(kernel: Kernel, inputs, output: Buffer | None, resolved: dict,
                   device: Device, compiled, fixed: bool = False) -> Dispatch:
    launches = kernel.launches(list(inputs), output, resolved, device)
    d = Dispatch(kernel, [Meta.of(b) for b in inputs],
                 Meta.of(output) if output is not None else None, resolved, compiled, launches,
                 device=device, fixed=fixed)
    storage = list(inputs) + ([output] if output is not None else [])
    _check_binding_sizes(kernel, storage, launches, device)
    if compiled.uniform_fields and launches:
        d.uniform = params_buffer(kernel, device, d._uniform_bytes(), fixed)
    _create_bind_groups(d, storage)
    return d


def params_buffer(kernel: Kernel, device: Device, data: bytes, fixed: bool):
    """A binding's params buffer holding ``data``: a fixed binding's is the one the device
    shares between bindings with these bytes (made once), any other's its own."""
    buf = _shared_uniform(device, data) if fixed else None
    if buf is None:
        buf = _new_uniform(kernel, device, data)
        if fixed:
            _keep_uniform(device, data, buf)
    return buf


# Params buffers shared by fixed bindings, per device, by their bytes: a queued operator binds
# anew for each new pairing of its buffers (pooled memory), and its params are most often the
# same bytes as before. Never written after creation; a Dispatch holds the one it binds (a
# replayed trace keeps its Dispatches), so dropping one from here frees nothing in use.
UNIFORM_CACHE_SIZE = 1024


def _shared_uniform(device: Device, data: bytes):
    shared = device.extras.get("uniforms")
    return shared.get(data) if shared is not None else None


def _keep_uniform(device: Device, data: bytes, buf) -> None:
    shared = device.extras.get("uniforms")
    if shared is None:
        shared = device.extras.setdefault("uniforms", {})
    if len(shared) >= UNIFORM_CACHE_SIZE:
        try:
            del shared[next(iter(shared))]  # the oldest (dicts keep insertion order)
        except (KeyError, RuntimeError, StopIteration):  # another thread changed it meanwhile
            pass
    shared[data] = buf


def _new_uniform(kernel: Kernel, device: Device, data: bytes):
    try:
        buf = device.gpu_device.create_buffer_with_data(
            label=f"{kernel.name}-params", data=data,
            usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    except Exception as e:
        raise device.wrap(e, f"{kernel.name}: creating its params buffer") from e
    device.stats["uniform_buffers_created"] += 1
    return buf


def _checked(kernel: Kernel, inputs, output: Buffer | None, params):
    """The checks of ``bind``: (device, the inputs that are the output's memory, the params
    resolved)."""
    device = _check_buffers(kernel, inputs, output)
    aliased = _aliased_inputs(kernel, inputs, output)
    dt = DTYPES[output.dtype] if output is not None else DTYPES["f32"]
    resolved = kernel.resolve_params(params, dt)
    kernel.check(list(inputs), output, resolved)
    return device, aliased, resolved


def _key(kernel: Kernel, inputs, output: Buffer | None, resolved: dict, aliased):
    key = kernel.key(list(inputs), output, resolved)
    return dataclasses.replace(key, in_place=aliased) if aliased else key


def _check_buffers(kernel: Kernel, inputs, output: Buffer | None) -> Device:
    """The buffers as the kernel takes them (their number, live, on one device, the output's
    dtype, an output of its own): the device they are on (the current one for none)."""
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(f"{kernel.name}: inputs must be a list of buffers, got "
                            f"{type(inputs).__name__}")
    if len(inputs) != len(kernel.inputs):
        raise ArgumentError(f"{kernel.name}: takes {len(kernel.inputs)} input(s) "
                            f"({', '.join(kernel.inputs) or 'none'}), got {len(inputs)}")
    for name, b in zip(kernel.inputs, inputs):
        check_buffer(b, f"{kernel.name}: input {name!r}")
    if kernel.output is not None:
        check_buffer(output, f"{kernel.name}: output")
    named = [(f"input {n!r}", b) for n, b in zip(kernel.inputs, inputs)]
    if output is not None:
        named.append(("output", output))
    device = same_device(kernel.name, named)
    if device is None:
        device = current_device()
    if kernel.output is not None:
        if output.dtype not in kernel.dtypes:
            same = [n for n, b in zip(kernel.inputs, inputs) if b.dtype == output.dtype]
            like = f", as is input {same[0]!r}" if same else ""
            raise DtypeError(f"{kernel.name}: dtype {output.dtype} is not supported (output is "
                             f"{output.dtype}{like}); expected one of "
                             f"{', '.join(kernel.dtypes)}")
    if output is not None and output._base is not None:
        raise ArgumentError(
            f"{kernel.name}: output {output!r} is part of another buffer's memory; kernels "
            f"write whole words past a result's last element, so they write into buffers of "
            f"their own (write the result there, then copy)")
    return device


def _aliased_inputs(kernel: Kernel, inputs, output: Buffer | None) -> tuple[int, ...]:
    """The inputs that are the output's own memory (the kernel runs in place on them, if it
    can); an input on part of the output's memory is refused."""
    aliased = []
    for i, b in enumerate(inputs):
        shared = _shared_memory(b, output) if output is not None else None
        if shared == "part":
            raise ArgumentError(
                f"{kernel.name}: input {kernel.inputs[i]!r} {b!r} is a view of part of the "
                f"output's memory; a kernel cannot read it while writing the output (write to "
                f"another buffer)")
        if shared == "all":
            aliased.append(i)
    aliased = tuple(aliased)
    if aliased:
        why = kernel.in_place_refusal(list(inputs), output, aliased)
        if why:
            names = " and ".join(repr(kernel.inputs[i]) for i in aliased)
            raise ArgumentError(f"{kernel.name}: output is also input {names}; {why}, so its "
                                f"output cannot be its input (write to another buffer)")
    return aliased


def _create_bind_groups(d: Dispatch, storage: list[Buffer]) -> None:
    """One bind group per launch of ``d``: each storage buffer's bytes (the launch's range of
    them, if it has ranges) and the launch's slice of the uniform."""
    kernel, compiled, device = d.kernel, d.compiled, d.device
    link = device.link
    n_storage = len(storage)
    slots = kernel.binding_slots()
    names = kernel.storage_bindings()
    where = [b._binding(f"{kernel.name}: {names[j]!r}") for j, b in enumerate(storage)]
    # a kernel that never changes its params after binding (set_params) may let its launches
    # with equal uniforms and ranges share one bind group: a linalg sweep's thousands of
    # launches then cost a few bind groups (tens of µs each to create), not one each
    shared = {} if getattr(kernel, "share_bind_groups", False) else None
    fields = compiled.uniform_fields
    # launches of scalar params pack the same struct: its size, once
    scalar = all(type(t) is str for _, t in fields)
    params_size = len(pack_uniform(fields, d.launches[0].uniform)) if fields and d.launches \
        and scalar else 0
    for i, launch in enumerate(d.launches):
        same = None
        if shared is not None:
            same = (tuple(sorted(launch.uniform.items())), launch.ranges)
            if same in shared:
                d.bind_groups.append(shared[same])
                continue
        entries = []
        for j, b in enumerate(storage):
            gpu, base = where[j]
            # the data's own bytes, not the whole allocation: a view lies inside its base's,
            # a pooled result's may be larger
            off, size = launch.ranges[j] if launch.ranges is not None else (0,
                                                                            b._bound_bytes())
            entries.append((slots[j], gpu, base + off, size))
        if fields:
            entries.append((slots[n_storage], d.uniform, i * UNIFORM_STRIDE,
                            params_size or len(pack_uniform(fields, launch.uniform))))
        try:
            bg = link.bind_group(kernel.name, compiled.layout, entries)
        except Exception as e:  # what the checks above did not foresee: wrap, never leak
            for name, buf in zip(kernel.storage_bindings(), storage):
                buf._check(f"{kernel.name}: {name!r}")  # freed by another thread meanwhile
            raise device.wrap(e, f"{kernel.name}: binding its buffers") from e
        d.bind_groups.append(bg)
        device.stats["bind_groups_created"] += 1
        if same is not None:
            shared[same] = bg


def _shared_memory(a: Buffer, b: Buffer) -> str | None:
    """How ``a``'s memory relates to ``b``'s: "all" (the same bytes: one Buffer passed twice,
    or a view of all of it), "part" (a view overlapping part of it), or None."""
    if a is b:
        return "all"
    ra = a._base if a._base is not None else a
    rb = b._base if b._base is not None else b
    if ra is not rb and (ra._gpu is None or ra._gpu is not rb._gpu):
        return None
    a0, b0 = a._offset, b._offset
    if a0 == b0 and a.nbytes == b.nbytes:
        return "all"
    if a0 < b0 + b.nbytes and b0 < a0 + a.nbytes:
        return "part"
    return None


def _check_binding_sizes(kernel: Kernel, storage, launches, device: Device) -> None:
    """A kernel whose launches bind whole buffers cannot take one larger than the adapter's
    max-storage-buffer-binding-size; say so before wgpu's validation does."""
    limit = device.limit("max-storage-buffer-binding-size")
    names = kernel.storage_bindings()
    for launch in launches:
        for j, b in enumerate(storage):
            size = launch.ranges[j][1] if launch.ranges is not None else b._bound_bytes()
            if size > limit:
                raise ShapeError(
                    f"{kernel.name}: {names[j]!r} {b.shape} {b.dtype} binds {size} bytes; "
                    f"{device.name} binds at most {limit} bytes per buffer, and this kernel "
                    f"does not split its work into ranges")
