"""Automatic fusion of queued operators: neighbouring elementwise operators of one output
shape are held as a DAG instead of queued, and queued as ONE fused kernel (writing only the
values whose Buffers are still alive) when other work uses one of them, at a flush or read,
or at a size bound; a copy that reads its source through strides (a transpose, a permutation
of axes) is held too, and a matmul reading its result reads the source through those strides
instead (no copy). ``WGCOMPUTE_FUSE=0`` turns it off."""

from __future__ import annotations

import os
import weakref

from . import _lazy
from ._fusion_held import Held, _held, _root
from .buffer import Buffer
from .commands import bind, bound
from .dtypes import DTYPES
from .errors import BufferFreedError, DtypeError, WgComputeError
from .kernels import registry
from .kernels.core.bind import _checked as _bind_checks
from .kernels.elementwise.arrayops import row_of
from .kernels.elementwise.fused import LEAVES, Node, fused_dispatch, fused_kernel, sub_dag
from .kernels.elementwise.optable import OPS
from .kernels.matmul.matmul import FLOATS as _MATMUL_DTYPES
from .kernels.matmul.shapes import compose_views, copy_view, reads_in_place
from .kernels.views import IN_PLACE, held_view

# Nodes a held DAG takes before it is queued as a kernel: a chain of 100 `x = (x + b) op s`
# (300 nodes and leaves) stays one kernel; the shader's size (and compile time) stays bounded.
MAX_NODES = 320
# Strided copies (transposes) a batch holds for a later matmul; more are queued (oldest first).
MAX_TRANSPOSES = 16
# A strided copy is held (a product then reads its source in place: no copy) where the copy
# would cost the GPU more than holding it costs the host: from HOLD_BYTES of result up, and
# always while a model's call is traced for replay (its host work is done once). Below it, a
# dependent 256x256 f32 matmul / transpose chain on an H200 recorded 32 us an op holding
# its transposes, 13 copying them, whose copies cost the GPU 5.6 us each.
HOLD_BYTES = 1 << 20


def _worth_holding(batch, output) -> bool:
    return output.nbytes >= HOLD_BYTES or batch.capture is not None


_VALID: dict = {}  # what one op's kernel accepted: (kernel, buffers' shapes and dtypes, params)


def _valid(k, inputs, output, params) -> bool:
    """Whether the op's kernel takes these buffers (its own checks, as bind runs them; once
    per signature): one it refuses goes the usual way, which raises the kernel's error."""
    features = output._dev.features
    key = [k, output._shape, output._dt.name, tuple(params) if params else ()]
    for b in (*inputs, output):  # a dtype the adapter cannot compute: the kernel says so now
        dt = b._dt
        if dt.feature is not None and dt.feature not in features:
            return False
        if b._offset and not b._bindable():  # a view off the binding alignment (x[1:]): the
            return False  # op's own kernel binds it through a copy; the fused one cannot
        key.append(b._shape)
        key.append(dt.name)
    key = tuple(key)
    ok = _VALID.get(key)
    if ok is None:
        try:
            if output.dtype not in k.dtypes:
                raise DtypeError(k.name)
            k.check(list(inputs), output, k.resolve_params(params, DTYPES[output.dtype]))
            ok = True
        except WgComputeError:
            ok = False
        if len(_VALID) > 4096:
            _VALID.clear()
        _VALID[key] = ok
    return ok


def _fits(held: Held, k, inputs, output, params) -> bool:
    """Whether the op joins the held DAG: a fresh output of the DAG's shape, operands of one
    dtype, no view of a held value among them, and room left."""
    if output is None or output._base is not None or output._freed:
        return False  # (a freed output: the usual path raises BufferFreedError)
    dev = output._dev
    if held.device is not dev or len(held.nodes) + 4 > MAX_NODES or (
            held.shape is not None and output._shape != held.shape):
        return False
    dt = inputs[0]._dt
    for b in inputs:  # (a loop: this runs for every queued elementwise operator)
        if b is output or b._dev is not dev or b._freed or (b._dt is not dt and b._dt != dt):
            return False
        if b._base is not None and held.value(b._base) is not None:
            return False  # a view of a held value reads its memory: written first
    if not _valid(k, inputs, output, params):
        return False
    bound_ = len(held.leaves) + len(inputs) + 1
    return bound_ + len(held.values) <= held.limit or bound_ + held.live() <= held.limit


def on_enqueue(k, inputs, output, params, label):
    """The lazy batch's enqueue hook: takes fusable operators into the held DAG (returns
    their output), queues the held DAG first where another op needs it (returns None)."""
    if type(inputs) is not list:
        inputs = list(inputs)
    dev = output._dev if output is not None else (inputs[0]._dev if inputs else None)
    if dev is None:
        return None
    batch = dev.lazy if dev.lazy is not None else _lazy.batch_of(dev)
    # (ops inside `with stream:` go to the stream's batch, in order: not held)
    routed = _lazy._route.get() is not None
    row = row_of(k, params) if inputs and not routed else None
    if row is None and not batch.held and (routed or k.name not in _TRANSPOSES or (
            output is not None and not _worth_holding(batch, output))):
        return None
    held = _held(batch)
    with held.lock:
        viewed = None
        if held.transposes:
            viewed = _viewable(held, inputs, output) if row is not None else None
            taken = _after_transposes(batch, held, k, inputs, output, params, label, routed,
                                      viewed)
            if taken is not None:
                return taken
        if row is None:
            return _not_fusable(batch, held, k, inputs, output, params, label, routed)
        fits = _fits(held, k, inputs, output, params)
        if held.nodes and not fits:
            _queue(batch, held)
        if not fits:
            for i in viewed or ():  # read as they are after all: their copies first
                if inputs[i]._id in held.transposes:
                    _queue_transpose(batch, held, inputs[i]._id)
            return None
        _take(held, row, k, inputs, output, params, label, viewed)
        if not batch.held:
            batch.held.append(held)  # a submit on this device now flushes (queues it) first
        if len(held.nodes) + 4 > MAX_NODES:
            _queue(batch, held)
    return output


def _not_fusable(batch, held: Held, k, inputs, output, params, label, routed):
    """An op the DAG cannot take: the held DAG is queued first where the op needs it; a copy
    is held where it can be (returns its output); else None (the op is queued as usual)."""
    if held.conflicts(inputs, output):
        _queue(batch, held)
        if routed:  # a stream's block: submitted before it
            batch.flush()
    if not routed and _hold_transpose(batch, held, k, inputs, output, params, label):
        return output
    return None


def _viewable(held: Held, inputs, output) -> dict | None:
    """{input number: held entry} of an elementwise op's inputs that are held copies' results
    of its shape, which the fused kernel reads through the copies' views of their sources
    (no copy: attention's scaled heads), where all binds whole (no split launches); or None."""
    limit = output._dev.limit("max-storage-buffer-binding-size") if output is not None else 0
    return {i: e for i, b in enumerate(inputs) if (e := held.transposes.get(b._id)) is not None
            and e[0]() is b and b._shape == output._shape and not e[1]._freed
            and e[1]._bindable() and e[1]._bound_bytes() * 2 <= limit
            and output.size * 16 <= limit} or None


_TRANSPOSES = ("transpose", "strided_copy", "region_copy")
_STRIDED_COPY = registry.get("strided_copy")


def _view_of(k, src: Buffer, output, params) -> tuple | None:
    """copy_view of the op copying ``src`` into a fresh ``output``; else None."""
    if output is None or output._base is not None or output.ndim < 2 or _root(src) is output:
        return None
    return copy_view(k.name, src.shape, output.shape, params)


def _hold_transpose(batch, held: Held, k, inputs, output, params, label) -> bool:
    """Hold a strided copy (a transpose) of a matmul dtype that a matmul could read in place
    (checked now: its errors raise at the call) instead of queueing it; True if held."""
    if len(inputs) != 1 or output is None or not _worth_holding(batch, output):
        return False
    src = inputs[0]
    if src._dt.name not in _MATMUL_DTYPES or src._dt is not output._dt or \
            src._dev is not output._dev:
        return False
    view = _view_of(k, src, output, params)
    if view is None or not _checks(k, inputs, output, params):
        return False
    _hold(batch, held, src, output, (k, params), label or k.name, view)
    return True


def _checks(k, inputs, output, params) -> bool:
    """bind's checks of a copy held unbound (bound once queued: never, where a matmul reads its
    source in place), raising at the call as binding does (in full once per signature, then
    that both buffers live); False (bind it now) where a buffer may be too large to bind."""
    src = inputs[0]
    try:
        key = (k, src._shape, src._dt.name, src._offset, output._shape, output._dt.name,
               tuple(params.items()) if params else ())
        fits = _CHECKED.get(key) if src._dev is output._dev else None
    except TypeError:  # unhashable params: checked in full every time
        key, fits = None, None
    if fits is None or src._freed or output._freed or not output._dev.alive:
        _bind_checks(k, inputs, output, params)  # (in full: the messages made if needed)
    if fits is not None:
        return fits
    limit = output._dev.limit("max-storage-buffer-binding-size")
    fits = src._bound_bytes() <= limit and output._bound_bytes() <= limit
    if key is not None:
        if len(_CHECKED) > 4096:
            _CHECKED.clear()
        _CHECKED[key] = fits
    return fits


_CHECKED: dict = {}  # held copies' checked signatures -> both buffers fit a binding


def _hold(batch, held: Held, src: Buffer, output, d, label: str, view) -> None:
    if len(held.transposes) >= MAX_TRANSPOSES:
        _queue_transpose(batch, held, next(iter(held.transposes)))
    src._pin("fusion", ": buffer")  # (released once it is queued, or its result died)
    old = held.transposes.pop(output._id, None)
    if old is not None:  # a held copy into the same buffer (or a dead one's id): this one
        old[1]._release()  # writes all of it, so the earlier one is never needed
    # (the site looked for from on_enqueue on: past _hold_transpose or _hold_composed and
    # their callers)
    held.transposes[output._id] = (weakref.ref(output), src, d, label, _lazy.call_site(3),
                                   view)
    if not batch.held:
        batch.held.append(held)  # a submit on this device now flushes (queues it) first


def _hold_composed(batch, held: Held, k, inputs, output, params, label) -> bool:
    """A strided copy of a held copy's result (attention's K^T of its heads' permutation):
    held as one copy of the first one's source through both (a strided_copy, checked now),
    the first left held for whoever else reads it; True if held so."""
    if len(inputs) != 1 or output is None:
        return False
    got = held_view(held.transposes, inputs[0], _root(output))  # (a reshape of one too)
    if got is None or inputs[0]._freed or output.dtype != inputs[0].dtype:
        return False
    src, first = got[1]
    second = _view_of(k, inputs[0], output, params)
    view = compose_views(first, second) if second is not None else None
    if view is None or not reads_in_place(*view):
        return False
    p = {"strides": view[1], "offset": view[2]}
    if not _checks(_STRIDED_COPY, [src], output, p):
        return False
    _hold(batch, held, src, output, (_STRIDED_COPY, p), label or k.name, view)
    return True


def _after_transposes(batch, held: Held, k, inputs, output, params, label, routed, viewed):
    """An op while copies are held: a copy of a held copy's result is held as one copy; a
    matmul of held results reads their sources in place (queued here; returns its output);
    the held copies anything else needs are queued first (returns None), but for those an
    elementwise op reads through their views (``viewed``, from _viewable)."""
    if not routed and k.name in _TRANSPOSES:
        if held.conflicts(inputs, output):  # (a copy into a held value, or into a buffer
            _queue(batch, held)  # the held DAG reads: the DAG goes first, as the copy would)
        if _hold_composed(batch, held, k, inputs, output, params, label):
            return output
    swapped = _before_transposes(batch, held, k, inputs, output, params, routed, viewed)
    if swapped is None:
        return None
    if held.conflicts(swapped[0], output):  # (a matmul of held copies: their sources)
        _queue(batch, held)
    return _lazy.bind_and_queue(k, swapped[0], output, swapped[1], label)


def _before_transposes(batch, held: Held, k, inputs, output, params, routed: bool,
                       viewed=None):
    """Queue the held transposes this op needs first (it reads their result or writes what
    they read or write); forget those whose result died. A kernel of IN_PLACE (a matmul) reading
    held results reads their sources through the copies' strides: returns (inputs, params)."""
    trs = held.transposes
    out_root = _root(output) if output is not None else None
    swap, folded, queued = {}, None, False
    reader = IN_PLACE.get(k.name) if params is None or type(params) is dict else None
    if reader is not None and not routed:
        swap = {i: got for i in reader[0](inputs, params)
                if (got := held_view(trs, inputs[i], out_root)) is not None}
        folded = reader[1](inputs, params, {i: v for i, (_, v) in swap.items()}
                           ) if swap else None
        if folded is None:
            swap = {}
    skip = swap or viewed or {}
    for key, e in list(trs.items()):
        if trs.get(key) is not e:  # queued by a flush that queueing an earlier one caused
            continue
        res = e[0]()
        if res is None or res._freed:
            del trs[key]
            e[1]._release()
            continue
        r, sr = _root(res), _root(e[1])
        if out_root is r or out_root is sr or any(
                _root(b) is r for i, b in enumerate(inputs) if i not in skip):
            _queue_transpose(batch, held, key)
            queued = True
    if queued and routed:  # a stream's block: submitted before it
        batch.flush()
    if not trs:
        _unmark(batch, held)
    return folded if swap else None


def _queue_transpose(batch, held: Held, key: int) -> None:
    """Queue a held transpose (its result is alive) and let go of its source's hold."""
    ref, src, (k, params), label, site, _ = held.transposes.pop(key)
    res = ref()
    if res is None or res._freed:  # nobody can read it: never written
        src._release()
        return
    if src._freed or _root(src)._freed:  # freed since: our hold goes with the queued work
        try:
            d = _bind_freed(k, src, res, params)
        except BaseException:
            src._release()
            raise
        _enqueue(batch, label, d, [res], site, _Keep(d, [src]))
        return
    try:
        _enqueue(batch, label, bound(k, [src], res, params), [src, res], site)
    finally:
        src._release()


def _bind_freed(k, src: Buffer, res: Buffer, params):
    """A held copy bound to a source freed since it was asked for: its memory is still the
    hold's (its freed marks lifted under the memory's lock while it binds)."""
    root = _root(src)
    with root._lock:
        marked = [b for b in {src._id: src, root._id: root}.values() if b._freed]
        for b in marked:
            b._freed = False
        try:
            return bind(k, [src], res, params, fixed=True)
        finally:
            for b in marked:
                b._freed = True


def _unmark(batch, held: Held) -> None:
    """Nothing held any more: a submit need not call the flush hook."""
    if not held.nodes and not held.transposes and held in batch.held:
        batch.held.remove(held)


def _take(held: Held, row, k, inputs, output, params, label, viewed=None) -> None:
    name, scalar, reflected = row[:3]
    dt = inputs[0]._dt.name
    if not held.nodes:
        held.shape = output.shape
        held.site = _lazy.call_site()
    args = [held.operand(b) if not viewed or i not in viewed else
            held.viewed(viewed[i][1], viewed[i][5]) for i, b in enumerate(inputs)]
    if scalar is not None:
        held.scalars.append(scalar)
        s = held.add(Node("scalar", dt, (len(held.scalars) - 1,)))
        args = [s] + args if reflected else args + [s]
    slots = row[3] if len(row) > 3 else ()
    node = held.add(Node(name, OPS[name].out_dtype(dt), tuple(args), slots))
    held.calls.setdefault(node, (k, params, label))  # (no Buffers: they must be let die)
    held.values[output._id] = (weakref.ref(output), node)
    held.ops += 1


def _queue(batch, held: Held) -> None:
    """Queue the held DAG (its lock held) as one fused kernel writing the live values (a DAG
    of one op: that op's own kernel), and start an empty one."""
    outs = []
    for ref, k in held.values.values():
        b = ref()
        if b is not None and not b._freed:
            outs.append((b, k))
    leaves, calls, count, nodes, scalars = (held.leaves, held.calls, held.ops, held.nodes,
                                            held.scalars)
    views = held.views
    site = held.site
    held.reset()  # first: queueing may fill the batch, whose flush finds nothing held
    try:
        for tries in range(3, -1, -1):
            try:
                leaves = _queue_values(batch, held.device, outs, leaves, calls, count, nodes,
                                       scalars, site, views)
                break
            except BufferFreedError:
                # a value (or leaf) freed since it was looked at: its last reference died in
                # another thread, whose __del__ ran while ours found it alive. A value is
                # then not written; a freed leaf is read under the hold fusion keeps on it.
                live = [o for o in outs if not o[0]._freed]
                if not tries or len(live) == len(outs) and not any(b._freed for b in leaves):
                    raise
                outs = live
    except WgComputeError as e:
        if held.device.alive:
            raise
        if batch.error is None:  # a loss: raised at the next use, as the batch's own are
            batch.error = e
    finally:
        for b in leaves:
            b._release()


def _queue_values(batch, device, outs, leaves, calls, count, nodes, scalars, site,
                  views) -> list:
    """Queue the kernel writing ``outs`` ((Buffer, node) pairs) of a held DAG; returns the
    leaves whose holds are still ours to let go (a freed leaf's hold goes with the work)."""
    device.check()  # (a loss found here, not while a pipeline compiles)
    freed = any(b._freed for b in leaves)  # (held: bound where the work was asked for)
    if len(outs) == 1 and not freed and not any(views) and all(
            nodes[a].op in LEAVES for a in nodes[outs[0][1]].args):
        # one op's value: its own kernel (no fused program to compile)
        out, node = outs[0]
        k, params, label = calls[node]
        inputs = [leaves[nodes[a].args[0]] for a in nodes[node].args if nodes[a].op == "in"]
        d = bound(k, inputs, out, params)
        _enqueue(batch, label or k.name, d, [*inputs, out], site)
        return leaves
    if outs:
        dag, ins, slots = sub_dag(nodes, [k for _, k in outs])
        buffers = [leaves[i] for i in ins]
        read = tuple(views[i] for i in ins)  # (through a held copy's view, or as they are)
        d = fused_dispatch(fused_kernel(dag), buffers, [b for b, _ in outs],
                           [scalars[s] for s in slots], device, held=freed,
                           views=read if any(read) else None)
        if freed:  # a freed buffer takes no new hold: ours goes with the queued work
            mine = [b for b in leaves if b._freed]
            keep = _Keep(d, mine)
            leaves = [b for b in leaves if not b._freed]
            buffers = [b for b in buffers if not b._freed]
        else:
            keep = d
        _enqueue(batch, f"fused ({count} operators)", d, buffers + [b for b, _ in outs],
                 site, keep)
    return leaves


class _Keep:
    """What a queued fused kernel keeps: its Dispatch, and the holds of the freed buffers it
    reads, let go when the batch lets go of it (its work is done, or dropped)."""

    def __init__(self, dispatch, held):
        self.dispatch = dispatch
        weakref.finalize(self, _release_all, held)


def _release_all(buffers) -> None:
    for b in buffers:
        b._release()


def _enqueue(batch, label: str, d, buffers, site: str, keep=None) -> None:
    calls = d.raw_calls()
    if calls:
        batch.enqueue(_lazy.Op(label, calls, d if keep is None else keep, buffers, site))


def on_flush(batch) -> None:
    """The lazy batch's flush hook: the held DAG is queued before the batch is recorded."""
    held = batch.fusion
    if held is None:
        batch.held.clear()
        return
    with held.lock:
        if held.nodes:
            _queue(batch, held)
        while held.transposes:
            _queue_transpose(batch, held, next(iter(held.transposes)))
        batch.held.clear()


def set_enabled(on: bool) -> None:
    """Automatic fusion on or off (what is held is queued first)."""
    if not on:
        from .runtime import open_devices

        for dev in open_devices():
            if dev.lazy is not None:
                dev.lazy.flush()
    _lazy.hooks["enqueue"] = on_enqueue if on else None
    _lazy.hooks["flush"] = on_flush if on else None


def enabled() -> bool:
    return _lazy.hooks["enqueue"] is on_enqueue


if os.environ.get("WGCOMPUTE_FUSE", "").strip().lower() not in ("0", "false", "no", "off"):
    set_enabled(True)
