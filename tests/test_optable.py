"""The op table's rows against their numpy references, through every public path that runs a
row (the registered elementwise kernels, Buffer's operators, the nn activations and binaries):
each dtype the row's rule and the path allow, on random values and the special ones (±0, ±inf,
nan, the smallest normal, half the largest; integer extremes). Exact for integers, comparisons
and exact float arithmetic; a few ulp for transcendental functions; nan where numpy has nan."""

import operator

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.core import registry
from wgcompute.kernels.elementwise.arrayops import ARRAY_OPS
from wgcompute.kernels.elementwise.optable import DTYPE_RULES, OPS, OpDef
from wgcompute.kernels.nn.nn import ACTIVATION_DEFAULTS, ACTIVATIONS, BINARY_OPS, f32_bits

_OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
              "div": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
              "pow": operator.pow, "neg": operator.neg, "abs": abs, "lt": operator.lt,
              "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
              "ne": operator.ne, "logical_and": operator.and_, "logical_or": operator.or_,
              "logical_xor": operator.xor, "logical_not": operator.invert}
_NN_DTYPES = ("f32", "f16")
_TRANSCENDENTAL = {"pow", "pow_f32", "sigmoid", "tanh"}


def _kernel_paths():
    """(row, "kernel", registered name) of every registered kernel built from a row."""
    out = []
    for name in registry.names():
        row = getattr(registry.get(name), "row", None)
        if isinstance(row, OpDef):
            out.append((row.name, "kernel", name))
    return out


def _paths():
    paths = _kernel_paths()
    paths += [(row.name, "operator", op) for op, row in ARRAY_OPS.items()]
    paths += [(row.name, "nn_activation", act) for act, row in ACTIVATIONS.items()]
    paths += [(row.name, "nn_binary", op) for op, row in BINARY_OPS.items()]
    return paths


def _dtypes(row, kind, name):
    dts = row.accepts()
    if kind == "kernel":
        return [d for d in dts if d in registry.get(name).dtypes]
    if kind == "operator":
        if name == "div":  # integer true division is refused (the kernel path covers it)
            return [d for d in dts if wgc.DTYPES[d].is_float]
        if name == "pow":  # f64 ** an f64 buffer is refused (no 64-bit pow)
            return [d for d in dts if d != "f64"]
        return list(dts)
    return [d for d in dts if d in _NN_DTYPES]


CASES = [pytest.param(row, kind, name, dt, id=f"{row}-{kind}-{name}-{dt}")
         for row, kind, name in _paths() for dt in _dtypes(OPS[row], kind, name)]


def need(dt, *features):
    have = wgc.device_info()["features"]
    for f in (wgc.DTYPES[dt].feature, *features):
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def _values(row: OpDef, dt: str, rng) -> list[np.ndarray]:
    """Operands: every pairing of special and random values (for two operands)."""
    npt = wgc.DTYPES[dt].numpy
    if row.domain == "positive":
        a = rng.uniform(0.1, 10.0, 24)
        b = rng.uniform(-3.0, 3.0, 24)
        return [a.astype(npt), b.astype(npt)][:row.arity]
    if wgc.DTYPES[dt].kind == "b":  # every pairing of False and True
        vals = np.array([False, True])
    elif wgc.DTYPES[dt].is_float:
        fi = np.finfo(npt)
        special = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan,
                   fi.tiny, -fi.tiny, fi.max / 2, -fi.max / 2]
        vals = np.concatenate([special, rng.normal(0, 4, 10)]).astype(npt)
    else:
        ii = np.iinfo(npt)
        lo = 0 if ii.min == 0 else -20
        # min + 1: numpy's INT_MIN // -1 is its own overflow rule, WGSL's another
        special = [0, 1, 2, 7, 13, ii.max] + ([-1, -7, ii.min + 1] if ii.min else [])
        vals = np.concatenate([special, rng.integers(lo, 40, 10)]).astype(npt)
    if row.arity < 2:
        return [vals]
    b = vals
    if row.name == "pow" and not wgc.DTYPES[dt].is_float:
        b = np.arange(-2 if np.iinfo(npt).min else 0, 6).astype(npt)
    return [np.repeat(vals, b.size), np.tile(b, vals.size)]


def _run(row: OpDef, kind: str, name: str, dt: str, xs):
    """(what the GPU gave, numpy's reference) for operands ``xs``."""
    bufs = [wgc.from_numpy(x) for x in xs]
    floating = wgc.DTYPES[dt].is_float
    if kind == "kernel":
        params = {"scale": {"scalar": 3}, "relu": {"slope": 0.5 if floating else 0},
                  "fill": {"value": 2.5 if floating else 7},
                  "strided_copy": {"strides": (1,), "offset": 0}}.get(name, {})
        if row.arity == 0:
            out = wgc.from_numpy(np.zeros(16, wgc.DTYPES[dt].numpy))
            got = wgc.run_kernel(name, [], out, params)
            value = np.dtype(wgc.DTYPES[dt].numpy).type(params["value"])
            return got.to_numpy(), np.full(16, row.reference(value))
        out = wgc.from_numpy(np.zeros_like(xs[0])) if name == "strided_copy" else None
        got = wgc.run_kernel(name, bufs, out, params).to_numpy()
        args = [params[p] for p in ("scalar", "slope") if p in params]
        return got, row.reference(*xs, *args)
    if kind == "operator":
        return _OPERATORS[name](*bufs).to_numpy(), row.reference(*xs)
    wide = [x.astype(np.float64) for x in xs]
    if kind == "nn_activation":
        alpha, beta = {"clip": (-1.0, 2.0)}.get(name, ACTIVATION_DEFAULTS[name])
        got = wgc.run_kernel("nn_activation", bufs, None, {"activation": (name, alpha, beta)})
        return got.to_numpy(), row.reference(*wide, f32_bits(alpha), f32_bits(beta))
    got = wgc.run_kernel("nn_binary", bufs, None, {"op": name})
    return got.to_numpy(), row.reference(*wide)


@pytest.mark.parametrize("row,kind,name,dt", CASES)
def test_row_matches_its_reference(row, kind, name, dt, rng):
    op = OPS[row]
    need(dt, *(["shader-int64"] if dt == "f64" and row in ("floordiv", "mod") else []))
    xs = _values(op, dt, rng)
    with np.errstate(all="ignore"):
        got, want = _run(op, kind, name, dt, xs)
    want = np.asarray(want)
    out_dt = op.out_dtype(dt)
    assert got.dtype == wgc.DTYPES[out_dt].numpy, (got.dtype, out_dt)
    if out_dt == "bool":  # comparisons, logical ops
        np.testing.assert_array_equal(got, want.astype(np.bool_))
        return
    if not wgc.DTYPES[dt].is_float:
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        return
    with np.errstate(over="ignore"):  # the reference rounded to the dtype (inf past its max)
        want = want.astype(got.dtype).astype(np.float64)
    got = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fused = kind.startswith("nn")  # f32 arithmetic against an f64 reference
    rtol = {"f64": 1e-12, "f32": 1e-6, "f16": 2e-3}[dt] * (10 if row in _TRANSCENDENTAL else 1)
    atol = 1e-6 if fused else float(np.finfo(wgc.DTYPES[dt].numpy).tiny)
    keep = ~np.isnan(want)
    np.testing.assert_allclose(got[keep], want[keep], rtol=rtol, atol=atol)


def test_every_row_runs_somewhere_and_has_a_known_rule():
    """A row no kernel builds is dead math; a rule the table does not define is a typo. (The
    array namespace's functions run every row they name: tests/array_api/test_elementwise.py
    tests those.)"""
    from wgcompute.array_api._elementwise import COMPLEX_ROWS, ROWS
    from wgcompute.ml.eager_nn import ONNX_ROWS  # ONNX operators that are rows (Erf)

    used = {row for row, _, _ in _paths()} | {
        row for row in (*ROWS.values(), *COMPLEX_ROWS.values(), *ONNX_ROWS.values())
        if row in OPS}
    assert set(OPS) == used, set(OPS) ^ used
    for op in OPS.values():
        assert op.dtypes in DTYPE_RULES, op
        assert op.arity in (0, 1, 2), op


def test_consumers_share_rows():
    """The same math is one row: the built-in binaries, the operators and nn_binary."""
    kernels = {name: registry.get(name).row for name in
               ("elementwise_add", "elementwise_sub", "elementwise_multiply",
                "elementwise_divide")}
    for name, op in zip(kernels, ("add", "sub", "mul", "div"), strict=True):
        assert kernels[name] is OPS[op] is ARRAY_OPS[op] is BINARY_OPS[op]
    assert ACTIVATIONS["none"] is registry.get("strided_copy").row is OPS["identity"]
