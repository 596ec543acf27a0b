"""Queued layout and product work against eager mode, program by program: hypothesis writes random
programs over square f32 matrices (one size per program) and batches of them: products (@,
xp.matmul, xp.tensordot, matmul into an existing buffer), transposes (.T, .mT, wgc.transpose,
xp.permute_dims, strided views of them), reshapes, flips and rolls, copies, item assignment into
a kept value (whole, a block, a row, a buffer's own transpose, through a view), in-place
operators, slices, concatenation, elementwise operators between them, reads and synchronizes in
the middle, frees, `with stream:` blocks, commands (run_kernel_async, read_async), pipeline runs
and host writes, keeping some results and dropping others. Automatic fusion holds transposes for
the products that read them in place and elementwise chains for one kernel; each program runs
queued and then in eager mode (each operator waited for), and every kept value must have the
same bits both ways.

CI runs a fixed, derandomized set of programs; ``WGCOMPUTE_FUZZ_EXAMPLES=2000`` runs more."""

from __future__ import annotations

import os

import numpy as np
from fuzz_helpers import held_copies, in_threads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wgcompute as wgc
from wgcompute import array_api as xp

EXAMPLES = int(os.environ.get("WGCOMPUTE_FUZZ_EXAMPLES", "60"))
_STREAM = []  # one stream for the programs' `with stream:` blocks (made at first use)


def _two(x, y) -> bool:
    return x.ndim == 2 and y.ndim == 2


def _set_all(x, y, n):
    if x.shape == y.shape:
        x[...] = y


def _set_block(x, y, n):
    x[..., 1:, :2] = y[..., :-1, 1:3] if y.ndim == x.ndim else 0.5


def _set_row(x, y, n):
    x[..., 0, :] = 2.0


def _iadd(x, y, n):  # in place: x's memory
    x += y


def _imul_t(x, y, n):
    x *= y.T if y.ndim == 2 else y.mT


def _matmul_out(x, y, n):  # into an existing buffer (y's, when shapes allow)
    if _two(x, y) and x is not y:
        wgc.matmul(x, x, out=y)


def _self_t(x, y, n):  # reads and writes one buffer
    x[...] = x.T if _two(x, y) else x.mT


def _view_write(x, y, n):  # through a view at an offset
    v = x[..., 1:, :]
    v[...] = v * 2.0


def _stream(x, y, n):  # a block of work on a stream, reading held work
    if not _STREAM:
        _STREAM.append(wgc.create_stream("lazy-fuzz"))
    with _STREAM[0]:
        r = xp.clip(x.T @ y if x.ndim == y.ndim else x + 1.0, -16.0, 16.0)
        x[..., :1, :] = r[..., 1:2, :]
        return r - 1.0


def _async(x, y, n):  # a command of its own after queued work (it sees that work)
    if x.ndim != 2:
        return None
    out = wgc.empty(x.shape)
    cmd = wgc.run_kernel_async("scale", [x], out, {"scalar": 0.5})
    if x is not y:
        cmd.wait()
    return out


def _pipeline(x, y, n):  # a recorded pipeline run between queued operators
    if not _two(x, y):
        return None
    mid, out = wgc.empty(x.shape), wgc.empty(x.shape)
    p = wgc.pipeline()
    p.add(kernel="matmul", inputs=[x, y], output=mid)
    p.add(kernel="relu", inputs=[mid], output=out)
    p.run()
    p.free()
    return xp.clip(out, -16.0, 16.0)


def _flat_view(x, y, n):  # views at an element offset (off the binding alignment)
    flat = xp.reshape(x, (-1,))
    return xp.reshape(xp.concat([flat[1:], flat[:1]]), (n, n))


def _discard(_value) -> None:
    return None


def _reshape(x, y, n):
    if x.ndim == 2:
        return xp.reshape(x, (n * n,))[::-1].reshape((n, n))
    return xp.reshape(x, (n, 2, n)).mT.reshape((2, n, n))


# one step on values x and y ((n, n) or (2, n, n)): f(x, y, n) returns the new value, or
# None for a step that changed x in place (or only read)
STEPS = {
    "matmul": lambda x, y, n: x @ y if x.ndim == y.ndim else x @ (y if y.ndim == 2 else y[0]),
    "xp_matmul": lambda x, y, n: xp.matmul(x, y),
    "tensordot": lambda x, y, n: xp.tensordot(x, y, axes=1) if _two(x, y) else x + 1.0,
    "T": lambda x, y, n: x.T if x.ndim == 2 else x.mT,
    "mT": lambda x, y, n: x.mT,
    "transpose": lambda x, y, n: wgc.transpose(x) if x.ndim == 2 else
    xp.permute_dims(x, (0, 2, 1)),
    "permute": lambda x, y, n: xp.permute_dims(x, (1, 0) if x.ndim == 2 else (2, 1, 0)),
    "reshape": _reshape,
    "flip": lambda x, y, n: xp.flip(x, axis=-1),
    "roll": lambda x, y, n: xp.roll(x, 1, axis=0),
    "copy": lambda x, y, n: x.copy(),
    "set_all": _set_all, "set_block": _set_block, "set_row": _set_row,
    "slice": lambda x, y, n: x[..., ::2, :] @ y[..., :, ::2] if _two(x, y) else
    x[..., ::-1, :],
    "concat": lambda x, y, n: xp.concat([x[..., :1, :], x[..., 1:, :]], axis=-2),
    "add": lambda x, y, n: x + y, "mul": lambda x, y, n: x * y,
    "relu": lambda x, y, n: wgc.relu(x), "sub_scalar": lambda x, y, n: x - 0.25,
    "batch": lambda x, y, n: xp.stack([x, y]) if _two(x, y) else x,
    "unbatch": lambda x, y, n: x[1] if x.ndim == 3 else x,
    # an elementwise op reading a held transpose
    "T_view_add": lambda x, y, n: x.T + y if _two(x, y) else x.mT + y,
    # a read, a synchronize and a read as a command in the middle: run what is queued
    "read": lambda x, y, n: _discard(x.to_numpy()),
    "sync": lambda x, y, n: wgc.synchronize(),
    "read_async": lambda x, y, n: _discard(x.read_async().wait()),
    "iadd": _iadd, "imul_T": _imul_t, "matmul_out": _matmul_out, "self_T": _self_t,
    "view_write": _view_write, "stream": _stream, "async": _async, "pipeline": _pipeline,
    # the host writes x after queued work that reads it
    "host_write": lambda x, y, n: x.write(np.full(x.shape, 1.5, np.float32)),
    "flat_view": _flat_view,
}


NAMES = [*STEPS, "free"]  # (a free is _run's: its slot gets a new buffer)


def _step(name: str, x, y, n: int):
    return STEPS[name](x, y, n)


@st.composite
def programs(draw):
    n = draw(st.sampled_from([2, 3, 4, 8, 17]))
    steps = [(draw(st.sampled_from(NAMES)), draw(st.integers(0, 99)), draw(st.integers(0, 99)),
              draw(st.booleans())) for _ in range(draw(st.integers(1, 20)))]
    return n, steps, draw(st.integers(0, 2**16))


_PRODUCTS = ("matmul", "xp_matmul", "tensordot", "slice", "mul")


def _run(n, steps, seed):
    """The program's values at its end (numpy), and the error type it raised (or None)."""
    rng = np.random.default_rng(seed)
    # small integers: every product and sum is exact in f32, whatever the order of its terms
    pool = [wgc.from_numpy(rng.integers(-3, 4, (n, n)).astype(np.float32)) for _ in range(3)]
    try:
        for name, a, b, keep in steps:
            i = a % len(pool)
            if name == "free":  # its slot gets a new buffer of the same values
                values = pool[i].to_numpy()
                pool[i].free()
                pool[i] = wgc.from_numpy(values)
                continue
            if name == "flat_view" and pool[i].ndim != 2:
                continue
            r = _step(name, pool[i], pool[b % len(pool)], n)
            if r is None:
                continue
            if name in _PRODUCTS:  # values stay small integers: every order of sums is exact
                r = xp.clip(r, -16.0, 16.0)
            if keep:
                pool.append(r)
            else:
                pool[i] = r  # the operand's slot: the old value may die
        return [v.to_numpy() for v in pool], None
    except wgc.WgComputeError as e:
        return None, type(e)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_queued_programs_give_the_eager_bits(program):
    n, steps, seed = program
    # strided copies held of every size, of some, or from the default size (none here)
    with held_copies((0, 64, None)[seed % 3]):
        queued, queued_error = _run(n, steps, seed)
    wgc.set_eager(True)
    try:
        eager, eager_error = _run(n, steps, seed)
    finally:
        wgc.set_eager(False)
    assert queued_error == eager_error, (queued_error, eager_error)
    if eager is None:
        return
    assert len(queued) == len(eager)
    for i, (q, e) in enumerate(zip(queued, eager)):
        assert q.shape == e.shape and q.tobytes() == e.tobytes(), \
            f"value {i} of program {steps} (n={n}):\nqueued {q}\neager {e}"


@settings(max_examples=max(4, EXAMPLES // 6), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(programs(), min_size=2, max_size=4))
def test_threads_queueing_on_one_device_give_each_programs_values(progs):
    """Several threads run their programs at once on one device (their queued work meets in
    its one batch and held program; `with stream:` blocks left out: one stream, one thread).
    Each thread's values are those of its program run alone in eager mode."""
    progs = [(n, [s for s in steps if s[0] != "stream"], seed) for n, steps, seed in progs]
    wgc.set_eager(True)
    try:
        wants = [_run(*p) for p in progs]
    finally:
        wgc.set_eager(False)
    with held_copies(0):
        got = in_threads(lambda i: _run(*progs[i]), len(progs))
    for (n, steps, _), (q, qe), (e, ee) in zip(progs, got, wants):
        assert qe == ee, (qe, ee)
        if e is None:
            continue
        for i, (a, b) in enumerate(zip(q, e)):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), \
                f"value {i} of program {steps} (n={n}, in a thread):\nqueued {a}\neager {b}"
