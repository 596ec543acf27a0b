"""Automatic fusion against eager mode, program by program: hypothesis writes random chains of
elementwise operators and functions (Buffer operators, the namespace's maximum / minimum / abs /
negative / where / sum, wgc.relu / wgc.scale / wgc.sub / wgc.add into a buffer, in-place
operators, f16 with f32, views of a column) over buffers that broadcast against each other, with
Python scalars that include -0.0, nan, the infinities and the dtype's extremes, keeping some
intermediate results alive and dropping others. Each program runs queued (automatic fusion on)
and then in eager mode (one kernel per operator, each waited for); every value the program kept
must have the same bits both ways (nan compared as nan, the sign of a zero compared), but for
what division, the transcendental functions and sums made (see INEXACT).

CI runs a fixed, derandomized set of programs; ``WGCOMPUTE_FUZZ_EXAMPLES=2000`` runs more."""

from __future__ import annotations

import os

import numpy as np
from fuzz_helpers import in_threads
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import wgcompute as wgc
from wgcompute import array_api as xp

EXAMPLES = int(os.environ.get("WGCOMPUTE_FUZZ_EXAMPLES", "60"))
NP = {"f32": np.float32, "f16": np.float16, "s32": np.int32, "u32": np.uint32}
SCALARS = {
    "f": [0.0, -0.0, 1.5, -2.25, 1e-30, 3e38, float("nan"), float("inf"), float("-inf")],
    "s": [0, 1, -1, 7, -(2**31), 2**31 - 1],
    "u": [0, 1, 7, 2**32 - 1],
}
# (name, operands: "bb" two values, "bs" a value and a scalar, "b" one value; kinds it takes)
OPS = [("add", "bb", "fsu"), ("sub", "bb", "fsu"), ("mul", "bb", "fsu"), ("add", "bs", "fsu"),
       ("rsub", "bs", "fsu"), ("mul", "bs", "fsu"), ("div", "bs", "f"), ("maximum", "bb", "fsu"),
       ("minimum", "bb", "fsu"), ("maximum", "bs", "fsu"), ("abs", "b", "fs"),
       ("negative", "b", "fs"), ("relu", "b", "fs"), ("scale", "bs", "fsu"), ("wsub", "bb", "fsu"),
       ("where", "bb", "fsu"), ("sum", "b", "fsu"), ("column", "b", "fsu"),
       ("square", "b", "f"), ("floordiv", "bs", "fsu"), ("floordiv", "bb", "fsu"),
       ("mod", "bs", "fsu"), ("mod", "bb", "fsu"), ("pow", "bs", "f"), ("sqrt", "b", "f"),
       ("exp", "b", "f"), ("log", "b", "f"), ("tanh", "b", "f"), ("floor", "b", "f"),
       ("round", "b", "f"), ("lt", "bb", "fsu"), ("eq", "bs", "fsu"), ("logical", "bb", "fsu"),
       ("widen", "b", "f"), ("iadd", "bb", "fsu"), ("imul", "bs", "fsu"),
       ("add_out", "bb", "fsu"), ("mix", "bb", "f")]


def _iadd(x, y, xp):  # in place: x's memory (every other reference sees it)
    x += y
    return x


def _imul(x, y, xp):
    x *= y
    return x


def _add_out(x, y, xp):  # into an existing buffer of the result's shape and dtype
    if x.shape == y.shape and x.dtype == y.dtype and x is not y:
        return wgc.add(x, y, out=y)
    return x + y


# one step: f(x, y, xp), ``y`` a value, a scalar or None; ``xp`` the namespace (a fused
# function's traced values have their own)
STEPS = {
    "add": lambda x, y, xp: x + y, "sub": lambda x, y, xp: x - y,
    "rsub": lambda x, y, xp: y - x, "mul": lambda x, y, xp: x * y,
    "div": lambda x, y, xp: x / y, "floordiv": lambda x, y, xp: x // y,
    "mod": lambda x, y, xp: x % y, "pow": lambda x, y, xp: x ** y,
    "square": lambda x, y, xp: x * x, "negative": lambda x, y, xp: -x,
    "maximum": lambda x, y, xp: xp.maximum(x, y), "minimum": lambda x, y, xp: xp.minimum(x, y),
    "abs": lambda x, y, xp: xp.abs(x), "relu": lambda x, y, xp: wgc.relu(x),
    "scale": lambda x, y, xp: wgc.scale(x, y),
    # wgc.sub takes equal shapes: the broadcast one as the other's shape
    "wsub": lambda x, y, xp: wgc.sub(x, y) if x.shape == y.shape else x - y,
    "where": lambda x, y, xp: xp.where(x > y, x, y),
    # a reduction reading the chain, and a view of (maybe held) memory
    "sum": lambda x, y, xp: xp.sum(x, axis=-1, keepdims=True),
    "column": lambda x, y, xp: x[..., :1],
    **{f: (lambda x, y, xp, f=f: getattr(xp, f)(x))
       for f in ("sqrt", "exp", "log", "tanh", "floor", "round")},
    "lt": lambda x, y, xp: xp.where(x < y, y, x),  # a bool value, and where() of it
    "eq": lambda x, y, xp: xp.where(x == y, x, -x if x.dtype != "u32" else x + 1),
    "logical": lambda x, y, xp: xp.where(xp.logical_and(x > y, xp.logical_not(x == y)), x, y),
    "iadd": _iadd, "imul": _imul, "add_out": _add_out,
    # f16 and f32 in one operation (promoted to f32); f16 -> f32 holds every value
    "mix": lambda x, y, xp: x.astype("f32") * 0.5 + y,
    "widen": lambda x, y, xp: x.astype("f32"),
}


def _apply(op: str, x, y, xp=xp):
    return STEPS[op](x, y, xp)


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(sorted(NP)))
    kind = {"f32": "f", "f16": "f", "s32": "s", "u32": "u"}[dtype]
    m, n = draw(st.sampled_from([(1, 1), (3, 5), (4, 64), (7, 129)]))
    shapes = [(m, n), (n,), (m, 1), (1, n)]
    inputs = [draw(st.sampled_from(shapes)) for _ in range(draw(st.integers(1, 3)))]
    inputs[0] = (m, n)  # the program's values grow to (m, n)
    ops = [o for o in OPS if kind in o[2]]
    steps = []
    for _ in range(draw(st.integers(1, 24))):
        name, operands, _ = draw(st.sampled_from(ops))
        a = draw(st.integers(0, 64))
        b = draw(st.integers(0, 64)) if operands == "bb" else \
            draw(st.sampled_from(SCALARS[kind])) if operands == "bs" else None
        keep = draw(st.booleans())
        steps.append((name, operands, a, b, keep))
    seed = draw(st.integers(0, 2**16))
    return dtype, inputs, steps, seed


def _data(dtype: str, shapes, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    npt = NP[dtype]
    out = []
    for shape in shapes:
        if dtype in ("f32", "f16"):
            v = (rng.standard_normal(shape) * 4).astype(npt)
            flat = v.reshape(-1)
            specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], npt)
            k = min(flat.size, rng.integers(0, 4))
            flat[rng.choice(flat.size, k, replace=False)] = rng.choice(specials, k)
        else:
            info = np.iinfo(npt)
            v = rng.integers(info.min, info.max, shape, dtype=npt, endpoint=True)
        out.append(v)
    return out


# WGSL computes these within an error bound (2.5 ULP for a division, more for exp, log, tanh
# and pow, a sum in its kernel's order), and a GPU's compiler may meet the bound differently
# in a fused kernel and in the operation's own (NVIDIA's f16 division, its sums): a float
# value they made is compared within a tolerance, and one that then went through an
# operation that jumps (floor, round, ==, // and %) is not compared
INEXACT = ("div", "sqrt", "exp", "log", "tanh", "pow", "sum", "floordiv", "mod")
JUMPS = ("floor", "round", "floordiv", "mod", "eq")
EXACT, NEAR, WILD = 0, 1, 2
IN_PLACE = ("iadd", "imul", "add_out")


def _taint(dtype: str, name: str, *operands: int) -> int:
    t = max(operands)
    if dtype[0] != "f":
        return EXACT
    if name in JUMPS and t:
        return WILD
    return max(t, NEAR) if name in INEXACT else t


def _run(dtype, inputs, steps, seed):
    """(the program's kept values (numpy), how each was made: EXACT, NEAR or WILD), and the
    error it raised (or None)."""
    pool = [wgc.from_numpy(a) for a in _data(dtype, inputs, seed)]
    taint = [EXACT] * len(pool)
    kept, kept_taint = [], []
    try:
        with np.errstate(all="ignore"):
            for name, operands, a, b, keep in steps:
                i = a % len(pool)
                x = pool[i]
                y = pool[b % len(pool)] if operands == "bb" else b
                r = _apply(name, x, y)
                t = _taint(dtype, name, taint[i],
                           taint[b % len(pool)] if operands == "bb" else EXACT)
                if name in IN_PLACE:  # every reference to the buffer written sees it
                    taint = [max(u, t) if v is r else u for v, u in zip(pool, taint)]
                    kept_taint = [max(u, t) if v is r else u for v, u in zip(kept, kept_taint)]
                if keep:
                    pool.append(r)
                    taint.append(t)
                    kept.append(r)
                    kept_taint.append(t)
                else:
                    pool[i], taint[i] = r, t  # the operand's slot: the old value may die
        return [v.to_numpy() for v in kept + pool], kept_taint + taint, None
    except wgc.WgComputeError as e:
        return None, None, type(e)


def _check(got: np.ndarray, want: np.ndarray, taint: int, what: str) -> None:
    if taint == EXACT:
        assert _same(got, want), f"{what}:\nfused {got}\neager {want}"
    elif taint == NEAR:
        assert got.dtype == want.dtype and got.shape == want.shape, what
        tol = 2e-2 if got.dtype == np.float16 else 1e-4
        finite = np.abs(want[np.isfinite(want)])
        np.testing.assert_allclose(got, want, rtol=tol, err_msg=what,
                                   atol=tol * max(1.0, finite.max() if finite.size else 1.0))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return a.tobytes() == b.tobytes()
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return bool((nan_a == nan_b).all() and (a[~nan_a] == b[~nan_b]).all()
                and (np.signbit(a[~nan_a]) == np.signbit(b[~nan_b])).all())


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(programs())
def test_automatic_fusion_gives_the_eager_bits(adapter_lacks, program):
    dtype, inputs, steps, seed = program
    assume(not adapter_lacks(dtype))  # (f16 where the adapter has it)
    fused, _, fused_error = _run(dtype, inputs, steps, seed)
    wgc.set_eager(True)
    try:
        eager, taints, eager_error = _run(dtype, inputs, steps, seed)
    finally:
        wgc.set_eager(False)
    assert fused_error == eager_error, (fused_error, eager_error)
    if eager is None:
        return
    assert len(fused) == len(eager)
    for i, (f, e, t) in enumerate(zip(fused, eager, taints)):
        _check(f, e, t, f"value {i} of {dtype} program {steps}")


# what a wgc.fuse function takes (no where(), no functions of wgcompute's own but relu())
_FUSABLE = ("add", "sub", "mul", "rsub", "div", "maximum", "minimum", "abs", "negative", "relu",
            "square", "floordiv", "mod", "pow", "sqrt", "exp", "log", "tanh", "floor", "round",
            "widen")


def _traced(op: str, x, y):
    return x.relu() if op == "relu" else _apply(op, x, y, x.__array_namespace__())


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(programs())
def test_a_fused_function_gives_the_eager_bits(adapter_lacks, program):
    """The same programs (their elementwise steps) as one wgc.fuse function returning the
    last value (and, for a third of them, a reduction of it along its last axis), against the
    steps run eagerly."""
    dtype, inputs, steps, seed = program
    assume(not adapter_lacks(dtype))
    steps = [s for s in steps if s[0] in _FUSABLE]
    assume(steps)
    data = _data(dtype, inputs, seed)

    taint = [EXACT] * len(data)
    for name, operands, a, b, _keep in steps:  # how the last value is made
        taint.append(_taint(dtype, name, taint[a % len(taint)],
                            taint[b % len(taint)] if operands == "bb" else EXACT))

    reduction = ("sum", "max", "min", None, None, None)[seed % 6]

    def program_of(apply):
        def run(*xs):
            pool = list(xs)
            with np.errstate(all="ignore"):
                for name, operands, a, b, _keep in steps:
                    x = pool[a % len(pool)]
                    y = pool[b % len(pool)] if operands == "bb" else b
                    pool.append(apply(name, x, y))
            last = pool[-1]
            if reduction is None:
                return (last,)
            return last, getattr(last.__array_namespace__(), reduction)(last, axis=-1)
        return run

    def values(fn):
        try:
            return [v.to_numpy() for v in fn(*map(wgc.from_numpy, data))]
        except wgc.WgComputeError as e:
            return type(e)

    got = values(wgc.fuse(program_of(_traced)))
    wgc.set_eager(True)
    try:
        want = values(program_of(_apply))
    finally:
        wgc.set_eager(False)
    if isinstance(want, type) or isinstance(got, type):
        assert isinstance(got, type) and got is want, (got, want)
        return
    what = f"{dtype} program {steps}, then {reduction}"
    _check(got[0], want[0], taint[-1], what)
    if reduction is not None:  # a sum in its kernel's order; max and min as the value
        _check(got[1], want[1], max(taint[-1], NEAR if reduction == "sum" else EXACT), what)


@settings(max_examples=max(4, EXAMPLES // 6), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(st.lists(programs(), min_size=2, max_size=4))
def test_threads_fusing_on_one_device_give_each_programs_values(adapter_lacks, progs):
    """Several threads run their programs at once on one device: their operators meet in the
    device's one held program and batch. Each thread's values are those of its program run
    alone in eager mode."""
    progs = [p for p in progs if not adapter_lacks(p[0])]
    assume(progs)
    wgc.set_eager(True)
    try:
        wants = [_run(*p) for p in progs]
    finally:
        wgc.set_eager(False)
    got = in_threads(lambda i: _run(*progs[i]), len(progs))
    for (dtype, _, steps, _), (f, _, fe), (e, taints, ee) in zip(progs, got, wants):
        assert fe == ee, (fe, ee)
        if e is None:
            continue
        for i, (a, b, t) in enumerate(zip(f, e, taints)):
            _check(a, b, t, f"value {i} of {dtype} program {steps} (in a thread)")
