"""wgc.fuse and the fused elementwise program (kernels/elementwise/fused.py): results bit-equal
to running the same operations one kernel each (the reference: the undecorated function on
the same buffers), over op table rows, dtypes (packed lanes, f16, f64), broadcasting, scalars
and promotions; several outputs; one compile per structure (a new scalar compiles nothing);
a final reduction; and the refusals of what is not elementwise."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import array_api as xp
from wgcompute.array_api._elementwise import _BINARY, _UNARY
from wgcompute.kernels.elementwise.optable import OPS

_NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "s8": np.int8,
       "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8, "u16": np.uint16,
       "u32": np.uint32, "bool": np.bool_}


def data(rng, dt: str, n: int = 1037, small: bool = False):
    """Values of ``dt`` with the awkward ones first (nan, ±inf, ±0 for floats)."""
    if dt == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dt[0] == "f":
        a = (rng.standard_normal(n) * 3).astype(_NP[dt])
        a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
        return a
    info = np.iinfo(_NP[dt])
    lo, hi = (0, 8) if small else (max(info.min, -100), min(info.max, 200))
    return rng.integers(lo, hi, n).astype(_NP[dt])


def same_bits(got, want):
    got, want = got.to_numpy(), want.to_numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), np.flatnonzero(
        got.view(np.uint8) != want.view(np.uint8))[:8]


def one_at_a_time(fn, *args, **kwargs):
    """``fn`` run one kernel per operation: in eager mode (automatic fusion would fuse
    neighbouring operators, as wgc.fuse does)."""
    wgc.set_eager(True)
    try:
        return fn(*args, **kwargs)
    finally:
        wgc.set_eager(False)


def eager_and_fused(fn, *args, **kwargs):
    """(the function run one operation at a time, the same function fused)."""
    return one_at_a_time(fn, *args, **kwargs), wgc.fuse(fn)(*args, **kwargs)


def unfused_then_queued(run, unfused, dev):
    """(``run()`` queued on ``dev`` with automatic fusion, left unread, and its result run
    with automatic fusion off, read): the device idle in between, so that the queued
    operations are ``run``'s alone. ``unfused``: the fixture."""
    with unfused():
        want = run().to_numpy()
    dev.synchronize()
    return run(), want


def _row_cases():
    """Every elementwise function of the namespace in one dtype, and a sample in others."""
    cases = []
    for name, row in {**_UNARY, **_BINARY}.items():
        if row not in OPS:
            continue
        accepts = OPS[row].accepts()
        cases.append((name, "f32" if "f32" in accepts else accepts[0]))
    cases += [("add", "u8"), ("multiply", "s8"), ("subtract", "u16"), ("remainder", "s16"),
              ("floor_divide", "s32"), ("bitwise_left_shift", "u8"), ("greater", "s16"),
              ("logical_xor", "bool"), ("not_equal", "bool"), ("negative", "s8"),
              ("abs", "s64"), ("exp", "f16"), ("sqrt", "f16"), ("tanh", "f16"),
              ("sin", "f64"), ("pow", "f64"), ("maximum", "f64"), ("isnan", "f64")]
    return cases


@pytest.mark.parametrize("name, dtype", _row_cases())
@pytest.mark.computes("dtype")
def test_namespace_rows_bit_equal(rng, name, dtype):
    fn = getattr(xp, name)
    arity = 1 if name in _UNARY else 2
    small = name in ("bitwise_left_shift", "bitwise_right_shift", "pow") and dtype[0] != "f"
    args = [wgc.from_numpy(data(rng, dtype, small=small and i == 1)) for i in range(arity)]
    if dtype == "bool" and arity == 1 and name not in ("logical_not", "bitwise_invert"):
        pytest.skip("a bool row is the logical one")
    want, got = eager_and_fused(lambda *a: fn(*a), *args)
    same_bits(got, want)


def chain(x, y, a):
    """The fused example: relu() is a method of the traced arrays (wgc.relu eagerly)."""
    return (x + y * a).relu()


def chain_eager(x, y, a):
    return wgc.relu(x + y * a)


def test_fma_candidates_round_between_rows(rng):
    """x * y + z rounds the product before the sum, as two kernels do (no contraction)."""
    x, y, z = (rng.standard_normal(100_003).astype(np.float32) for _ in range(3))
    gx, gy, gz = (wgc.from_numpy(v) for v in (x, y, z))
    want, got = eager_and_fused(lambda a, b, c: a * b + c - a * 0.3, gx, gy, gz)
    same_bits(got, want)
    product = x * y  # numpy rounds each operation
    assert np.array_equal(got.to_numpy(), (product + z) - x * np.float32(0.3))


@pytest.mark.needs("shader-f16")
def test_operators_broadcasting_scalars_promotion_several_outputs(rng):
    a = wgc.from_numpy(data(rng, "f32", 3 * 1 * 7).reshape(3, 1, 7))
    b = wgc.from_numpy(data(rng, "f32", 5 * 7).reshape(5, 7))
    c = wgc.from_numpy(data(rng, "s32", 7))
    d = wgc.from_numpy(data(rng, "u8", 5 * 7).reshape(5, 7))
    h = wgc.from_numpy(data(rng, "f16", 7))

    def f(a, b, c, d, h, s):
        t = (a - b) * s + 2.0 / (1.5 - a)
        big = t > b  # bool, broadcast (3, 5, 7)
        i = (c + d) * 3 - (d // 3) % 5  # u8 promoted to s32 with c
        mixed = h + b  # f16 promoted to f32
        return t, big & (t < 4.0), i, abs(-t) ** 2, mixed, ~(i > 7), -i

    for s in (0.75, -3):
        want, got = eager_and_fused(f, a, b, c, d, h, s)
        assert len(got) == len(want) == 7
        for g, w in zip(got, want):
            same_bits(g, w)


@pytest.mark.parametrize("n", [1, 3, 5, 1023, 4097])
def test_packed_outputs_at_odd_sizes(rng, n):
    x = wgc.from_numpy(data(rng, "s16", n))
    y = wgc.from_numpy(data(rng, "u8", n))
    want, got = eager_and_fused(lambda x, y: (x * 3 - 7, x > 5, (y + 250) ^ 3, y), x, y)
    for g, w in zip(got[:3], want[:3]):
        same_bits(g, w)
    assert got[3] is y  # an argument returned as it is


@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 4097])
def test_four_byte_programs_run_on_vec4_items_at_odd_sizes(rng, n, monkeypatch):
    """f32, s32 and u32 inputs read flat and 4-byte outputs: each invocation's item is a
    vec4 of four elements, the last item's elements past the end not written; the same bits
    as one kernel an operation and as the element-at-a-time program; a view at an aligned
    offset read as flat as a buffer."""
    from wgcompute.kernels.elementwise import fused

    big = wgc.from_numpy(data(rng, "f32", n + 512))
    x = big[256:256 + n]  # (1 KiB in: an aligned binding offset)
    i = wgc.from_numpy(data(rng, "s32", n))
    u = wgc.from_numpy(data(rng, "u32", n))

    def f(x, i, u):
        return abs(x * 1.5 - 2.0), (i * 3 + 7) // 2, u ^ 5, (x + 0.5) * x

    want, got = eager_and_fused(f, x, i, u)
    for g, w in zip(got, want):
        same_bits(g, w)
    keys = [k for k in wgc.current_device().pipelines if getattr(k, "kernel", None) ==
            fused.KERNEL and dict(k.constants).get("vec")]
    assert keys, "no fused program ran on vec4 items"
    monkeypatch.setattr(fused, "vectorized", False)
    for g, w in zip(wgc.fuse(f)(x, i, u), want):
        same_bits(g, w)


@pytest.mark.computes("f16")
@pytest.mark.needs("shader-f16")
def test_f16_rounds_between_rows(rng):
    """Each f16 row's result is rounded to f16 before the next row reads it, as storing it
    does (NVIDIA's compiler once took a bare conversion to f16 and back for no rounding).
    Operations WGSL rounds correctly: division is within 2.5 ULP, which two kernels may meet
    differently (NVIDIA's f16 division does)."""
    x = wgc.from_numpy(data(rng, "f16"))
    y = wgc.from_numpy(data(rng, "f16"))
    want, got = eager_and_fused(lambda x, y: (x * y + x) * (y - 0.1) - x * 3, x, y)
    same_bits(got, want)
    want, got = eager_and_fused(lambda x: (x * x) * (x * x) + x, x)
    same_bits(got, want)


def test_a_new_scalar_compiles_nothing(rng):
    dev = wgc.current_device()
    x = wgc.from_numpy(data(rng, "f32"))
    y = wgc.from_numpy(data(rng, "f32"))
    f = wgc.fuse(chain)
    same_bits(f(x, y, 0.5), chain_eager(x, y, 0.5))
    before = dev.stats["pipelines_created"]
    for a in (-1.25, 3.0, 1e-3):
        same_bits(f(x, y, a), chain_eager(x, y, a))
    assert dev.stats["pipelines_created"] == before

    def other(p, q, s):  # another function of the same structure: the same pipeline
        return (p + q * s).relu()

    same_bits(wgc.fuse(other)(x, y, 7.5), chain_eager(x, y, 7.5))
    assert dev.stats["pipelines_created"] == before
    # an int scalar is another signature (a Python int's rules), but the same structure
    same_bits(f(x, y, 2), chain_eager(x, y, 2))
    assert dev.stats["pipelines_created"] == before


def test_a_hundred_op_chain_is_one_dispatch(rng):
    x0 = wgc.from_numpy(data(rng, "f32", 65_536))
    b = wgc.from_numpy(data(rng, "f32", 65_536))

    def hundred(x, b, relu=lambda v: v.relu()):
        for _ in range(100):
            x = relu(x + b)
        return x

    want = one_at_a_time(hundred, x0, b, wgc.relu)
    f = wgc.fuse(hundred)
    f(x0, b)
    dev = wgc.current_device()
    before = dict(dev.stats)
    got = f(wgc.from_numpy(x0.to_numpy()), b)  # new input buffer: bound anew, one launch
    same_bits(got, want)
    assert dev.stats["pipelines_created"] == before["pipelines_created"]
    assert dev.stats["bind_groups_created"] - before["bind_groups_created"] == 1


def test_a_fused_call_is_queued_after_the_operators_it_reads(rng):
    xn, bn = data(rng, "f32", 10_000), data(rng, "f32", 10_000)
    x, b = wgc.from_numpy(xn), wgc.from_numpy(bn)
    f = wgc.fuse(lambda x, b: (x * b + 1.0).relu())
    f(x, b).to_numpy()  # traced and compiled
    dev = x.device
    dev.synchronize()
    y = x + 2.0  # held by automatic fusion, or queued
    z = f(y, b)  # reads it: the operator goes first, then the call, nothing submitted
    assert [op.label for op in dev.lazy.ops][-1] == f"fuse {f.name}"
    assert len(dev.lazy.ops) == 2
    y.free()  # freed while queued: the queued call still reads it
    b.free()
    w = z * 3.0
    b = wgc.from_numpy(bn)
    same_bits(w, one_at_a_time(lambda: wgc.relu((x + 2.0) * b + 1.0) * 3.0))


def test_a_fused_call_waits_in_eager_mode(rng):
    x = wgc.from_numpy(data(rng, "f32", 1000))
    f = wgc.fuse(lambda x: (x * 2.0 + 1.0).relu())
    dev = x.device
    dev.synchronize()
    wgc.set_eager(True)
    try:
        z = f(x)
        assert dev.lazy is None or not dev.lazy.ops  # run and waited for
        want = wgc.relu(x * 2.0 + 1.0)
    finally:
        wgc.set_eager(False)
    same_bits(z, want)


def test_reductions_at_the_end(rng):
    x = wgc.from_numpy(rng.standard_normal((6, 50)).astype(np.float32))
    y = wgc.from_numpy(rng.standard_normal(50).astype(np.float32))
    for fn in (lambda x, y: (x * y + 1.0).sum(),
               lambda x, y: xp.sum(xp.exp(x - y), axis=1),
               lambda x, y: (x - y).max(axis=0, keepdims=True),
               lambda x, y: ((x * 2.0).min(), xp.mean(x + y, axis=1), x * y)):
        want, got = eager_and_fused(fn, x, y)
        for g, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            same_bits(g, w)


def test_the_namespace_from_array_namespace(rng):
    x = wgc.from_numpy(data(rng, "f32"))

    def f(x):
        ns = x.__array_namespace__()
        return ns.where if False else ns.log1p(ns.abs(x)) * ns.pi

    same_bits(wgc.fuse(f)(x), f(x))


def test_not_elementwise_is_refused_by_name(rng):
    x = wgc.from_numpy(data(rng, "f32", 16).reshape(4, 4))
    other = wgc.from_numpy(data(rng, "f32", 16).reshape(4, 4))

    def matmul(x):
        return (x + 1.0) @ x

    cases = [(matmul, "operator @"),
             (lambda x: x[0] + 1.0, "indexing"),
             (lambda x: x.reshape(16), ".reshape"),
             (lambda x: xp.matmul(x, x), "matmul()"),
             (lambda x: x.T, ".T"),
             (lambda x: (x + 1.0).sum() + 1.0, "reduction must be the last"),
             (lambda x: x + other, "not an argument"),
             (lambda x: x.astype("f16"), "astype('f16')")]
    for fn, named in cases:
        with pytest.raises(wgc.ArgumentError, match="fuse") as e:
            wgc.fuse(fn)(x)
        assert named in str(e.value), str(e.value)

    def inplace(x):
        x += 1.0
        return x

    with pytest.raises(wgc.ArgumentError, match=r"operator \+= .*in place"):
        wgc.fuse(inplace)(x)

    def branches(x, a):
        return x * 2.0 if a > 0 else x

    with pytest.raises(wgc.ArgumentError, match="depend on values"):
        wgc.fuse(branches)(x, 1.0)
    with pytest.raises(wgc.ArgumentError, match="bool"):
        wgc.fuse(lambda x: x if (x > 0) else x)(x)
    with pytest.raises(wgc.ArgumentError, match="no argument is a buffer"):
        wgc.fuse(lambda a: a * 2)(3.0)
    with pytest.raises(wgc.ArgumentError, match="returns a float"):
        wgc.fuse(lambda x: 1.0)(x)


def test_the_operators_refusals_are_kept(rng):
    i = wgc.from_numpy(data(rng, "s32"))
    f = wgc.from_numpy(data(rng, "f32"))
    for fn, err, words in ((lambda i, f: i / i, wgc.DtypeError, "true division"),
                           (lambda i, f: i + f, wgc.DtypeError, "promotion"),
                           (lambda i, f: i * 0.5, wgc.DtypeError, "0.5"),
                           (lambda i, f: i ** -1, wgc.DtypeError, "negative power")):
        with pytest.raises(err, match=words):
            fn(i, f)  # eager
        with pytest.raises(err, match=words):
            wgc.fuse(fn)(i, f)
    # the negative power of a scalar argument is refused at the call that passes it
    p = wgc.fuse(lambda i, e: i ** e)
    same_bits(p(i % 5, 2), (i % 5) ** 2)
    with pytest.raises(wgc.DtypeError, match="negative power"):
        p(i, -2)


# -- automatic fusion of queued operators (wgcompute/_fusion_auto.py) ---------------------------
def _queued_ops(dev) -> list[str]:
    """The labels of the ops queued on ``dev``'s batch once what is held is queued."""
    from wgcompute import _fusion_auto

    _fusion_auto.on_flush(dev.lazy)
    return [op.label for op in dev.lazy.ops]


def test_a_hundred_queued_operators_become_one_kernel(rng, unfused):
    b = wgc.from_numpy(rng.standard_normal(65_536).astype(np.float32))

    def run():
        x = b.copy()
        for _ in range(100):
            x = xp.maximum(x + b, 0.0)
        return x

    dev = b.device
    x, want = unfused_then_queued(run, unfused, dev)
    assert dev.lazy.held  # held, not queued
    ops = _queued_ops(dev)
    assert len(ops) == 2 and ops[1] == "fused (200 operators)", ops  # the copy, then one
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert x.to_numpy().tobytes() == want.tobytes()


def test_a_chain_reads_its_inputs_once_and_writes_only_its_result(rng, unfused):
    n = 1 << 20
    x0 = wgc.from_numpy(rng.standard_normal(n).astype(np.float32))
    b = wgc.from_numpy(rng.standard_normal(n).astype(np.float32))

    def run():
        x = x0
        for _ in range(10):
            x = xp.maximum(x + b, 0.0)
        return x

    dev = b.device
    x, want = unfused_then_queued(run, unfused, dev)
    ops = _queued_ops(dev)
    assert ops == ["fused (20 operators)"], ops
    # one kernel binding x0 and b (read once each) and the last value (the only one alive)
    bound = dev.lazy.ops[0].buffers
    assert len(bound) == 3 and bound[0] is x0 and bound[1] is b and bound[2] is x
    assert sum(buf.nbytes for buf in bound) == 3 * 4 * n
    assert x.to_numpy().tobytes() == want.tobytes()


def test_held_values_are_written_when_alive_and_read_in_order(rng, unfused):
    a = wgc.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    c = wgc.from_numpy(rng.standard_normal(64).astype(np.float32))

    def run():
        y = a * 2.0 - c  # kept: written by the fused kernel
        z = (y + 1.0) * y
        m = z @ a  # a non-elementwise op reads a held value: the DAG is queued first
        w = xp.exp(m * 0.01) + z  # a new DAG after it
        t = w[:] * 0.5  # a view of a held value (of its shape) read by an operator
        v = w[3:9]  # and of part of it
        u = v * 3.0
        big = (c + 1.0) > 0.5  # another shape, bool
        return y, z, m, w, u, t, big

    with unfused():
        want = [r.to_numpy() for r in run()]
    got = [r.to_numpy() for r in run()]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_writes_to_an_input_wait_for_the_held_ops_that_read_it(rng):
    x = wgc.from_numpy(np.arange(100, dtype=np.float32))
    y = x + 1.0  # reads x's old contents
    z = y * 2.0
    x += 5.0  # writes x in place: y and z are queued before it
    np.testing.assert_array_equal(z.to_numpy(), (np.arange(100) + 1.0) * 2.0)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(100) + 5.0)
    y = x + 1.0
    x.write(np.zeros(100, np.float32))  # a host write: the held op is queued first
    np.testing.assert_array_equal((y * 1.0).to_numpy(), np.arange(100) + 6.0)


def test_a_buffer_freed_while_held_stays_valid_for_the_held_ops():
    a = wgc.from_numpy(np.arange(5000, dtype=np.float32))
    b = a * 2.0
    c = b + a
    a.free()
    b.free()
    with pytest.raises(wgc.BufferFreedError):
        a + 1.0
    np.testing.assert_array_equal(c.to_numpy(), np.arange(5000) * 3.0)
    assert a._gpu is None  # its memory went once the work was done


def test_refusals_still_raise_at_the_call():
    t = wgc.from_numpy(np.ones(3, np.bool_))
    f = wgc.from_numpy(np.ones(3, np.float32))
    y = f + 1.0  # something held
    with pytest.raises(wgc.DtypeError, match="bool"):
        t + t
    with pytest.raises(wgc.ShapeError):
        f + wgc.from_numpy(np.ones(4, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(3, 2.0, np.float32))


def test_wgcompute_fuse_0_turns_it_off():
    import subprocess
    import sys

    code = ("import wgcompute, wgcompute._lazy as L; "
            "print(L.hooks['enqueue'] is None, L.hooks['flush'] is None)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**__import__("os").environ, "WGCOMPUTE_FUSE": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


def test_bench_fusion_small_runs_and_checks_its_results(capsys):
    from benchmarks import bench_fusion

    assert bench_fusion.main(["--small", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "operators / fused" in out and "auto-fused" in out


@pytest.mark.needs("several-devices")
def test_a_device_lost_while_ops_are_held_raises_at_the_next_use():
    """The held ops are bound when the batch is flushed: on a lost device that is a
    DeviceLostError kept for the next use (and no hang: a pipeline is not compiled then)."""
    other = wgc.Device.from_wgpu(wgc.current_device().adapter.request_device_sync())
    try:
        x = wgc.from_numpy(np.arange(10, dtype=np.float32), device=other)
        y = (x + 1.0) * 2.0
        assert other.lazy.held
        other.gpu_device.destroy()
        other.lazy.flush()
        assert not other.lazy.ops and not y._holds and not x._holds
        with pytest.raises(wgc.DeviceLostError):
            other.synchronize()
    finally:
        other.close()


@pytest.mark.computes("f64")
@pytest.mark.needs("shader-f64")
def test_astype_that_holds_every_value(rng):
    x = wgc.from_numpy(data(rng, "f32"))
    i = wgc.from_numpy(data(rng, "u8"))
    want, got = eager_and_fused(lambda x, i: (x.astype("float64") * 3.0,
                                              i.astype("s32") - 7, (x > 0).astype("f32")), x, i)
    for g, w in zip(got, want):
        same_bits(g, w)


def test_views_off_the_binding_alignment_are_not_held(rng):
    """x[1:] starts 4 bytes into x: the fused kernel cannot bind it there (WebGPU's offset
    alignment), so such an op runs its own kernel (which binds through a copy): xp.diff and
    a chain over shifted views give numpy's answers."""
    import wgcompute.array_api as xp

    a = rng.standard_normal(1001).astype(np.float32)
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(xp.diff(x).to_numpy(), np.diff(a))
    got = ((x[1:] - x[:-1]) * 2.0 + x[:-1]).to_numpy()
    np.testing.assert_array_equal(got, (a[1:] - a[:-1]) * np.float32(2.0) + a[:-1])


def test_a_dag_unpickled_in_another_process_hashes_as_one_made_there():
    """A Dag keeps its hash (it keys compiled programs); pickled, it is made again where it is
    loaded, since string hashes differ from process to process."""
    import os
    import pickle
    import subprocess
    import sys

    from wgcompute.kernels.elementwise.fused import Dag, Node

    code = ("import pickle, sys\n"
            "from wgcompute.kernels.elementwise.fused import Dag, Node\n"
            "d = Dag((Node('in', 'f32', (0,)), Node('relu', 'f32', (0,))), (1,))\n"
            "sys.stdout.buffer.write(pickle.dumps(d))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    data = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                          env=env, timeout=120).stdout
    got = pickle.loads(data)
    want = Dag((Node("in", "f32", (0,)), Node("relu", "f32", (0,))), (1,))
    assert got == want and hash(got) == hash(want) and {want: 1}.get(got) == 1
