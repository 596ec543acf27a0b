"""User kernels as CuPy users know them: ElementwiseKernel and ReductionKernel against numpy
(dtypes, broadcasting, scalars, several outputs, axes, sizes past one workgroup and one pass),
raw WGSL kernels with several outputs and vector / matrix / array / struct params (their
uniform layout read back on the GPU), callable kernels and re-registration."""

import inspect
import itertools

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.core import uniform
from wgcompute.kernels.core.reflect import reflect
from wgcompute.kernels.user import reduction

_ids = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}_{next(_ids)}_u"


def make(dt, shape, rng):
    npd = np.dtype(wgc.DTYPES[dt].numpy)
    if npd.kind == "f":
        return rng.uniform(-4, 4, shape).astype(npd)
    if npd.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(npd)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape,
                        endpoint=True).astype(npd)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


SAXPY = wgc.ElementwiseKernel("x: T, y: T, a: f32", "z: T", "z = T(a) * x + y;", "saxpy")


# -- ElementwiseKernel ---------------------------------------------------------------------------
def test_saxpy_against_numpy(rng):
    x, y = rng.standard_normal(1000, dtype=np.float32), rng.standard_normal(1000, np.float32)
    z = SAXPY(wgc.from_numpy(x), wgc.from_numpy(y), 2.5)
    assert isinstance(z, wgc.Buffer) and z.dtype == "f32"
    np.testing.assert_allclose(z.to_numpy(), np.float32(2.5) * x + y, rtol=1e-6)
    out = wgc.empty((1000,), "f32")
    assert SAXPY(wgc.from_numpy(x), wgc.from_numpy(y), 2.5, out=out) is out
    assert "saxpy(x: T, y: T, a: f32) -> (z: T)" in repr(SAXPY)
    assert str(inspect.signature(SAXPY)) == "(x, y, a, /, *, out=None)"
    assert str(inspect.signature(L2)) == "(x, /, *, axis=None, keepdims=False, out=None)"


@pytest.mark.computes("dt")
@pytest.mark.parametrize("dt", ["f32", "f16", "f64", "s32", "u32", "s64", "u8"])
def test_generic_type_over_dtypes(dt, rng):
    """One kernel, T resolved from the arguments: compiled per dtype; integers wrap as numpy's
    (u8 modulo 256, its lanes packed four to a word)."""
    k = wgc.ElementwiseKernel("x: T, y: T", "s: T", "s = x + y * y;", "addsq")
    n = 1027  # not a multiple of 4: a partial last word of u8
    x, y = make(dt, n, rng), make(dt, n, rng)
    s = k(wgc.from_numpy(x), wgc.from_numpy(y))
    assert s.dtype == dt
    with np.errstate(over="ignore"):
        want = x + y * y
    if dt == "f16":
        np.testing.assert_allclose(s.to_numpy(), want, rtol=2e-3, atol=2e-2)
    elif dt in ("f32", "f64"):
        np.testing.assert_allclose(s.to_numpy(), want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(s.to_numpy(), want)


def test_several_outputs_and_bool(rng):
    k = wgc.ElementwiseKernel("x: T, y: T", "lo: T, hi: T, gt: bool",
                              "lo = min(x, y); hi = max(x, y); gt = x > y;", "minmax")
    x, y = rng.integers(-50, 50, (5, 7)).astype(np.int32), rng.integers(-50, 50, 7).astype(
        np.int32)
    lo, hi, gt = k(wgc.from_numpy(x), wgc.from_numpy(y))
    np.testing.assert_array_equal(lo.to_numpy(), np.minimum(x, y))
    np.testing.assert_array_equal(hi.to_numpy(), np.maximum(x, y))
    assert gt.dtype == "bool"
    np.testing.assert_array_equal(gt.to_numpy(), x > y)
    outs = (wgc.empty((5, 7), "s32"), wgc.empty((5, 7), "s32"), wgc.empty((5, 7), "bool"))
    assert k(wgc.from_numpy(x), wgc.from_numpy(y), out=outs) == outs


@pytest.mark.parametrize("sx,sy", [((3, 1), (4,)), ((2, 1, 5), (3, 1)), ((), (6,)),
                                   ((4, 1), (1, 4)), ((0, 3), (3,)), ((1,), (300, 257))])
def test_broadcasting(sx, sy, rng):
    x = rng.standard_normal(sx).astype(np.float32)
    y = rng.standard_normal(sy).astype(np.float32)
    z = SAXPY(wgc.from_numpy(x), wgc.from_numpy(y), -1.0)
    assert z.shape == np.broadcast_shapes(sx, sy)
    np.testing.assert_allclose(z.to_numpy(), -x + y, rtol=1e-6)


def test_bool_and_u8_inputs_broadcast(rng):
    k = wgc.ElementwiseKernel("m: bool, x: u8, y: u8", "z: u8", "z = select(y, x, m);",
                              "pick")
    m = rng.integers(0, 2, (3, 1)).astype(bool)
    x = rng.integers(0, 256, (3, 9)).astype(np.uint8)
    y = rng.integers(0, 256, 9).astype(np.uint8)
    z = k(wgc.from_numpy(m), wgc.from_numpy(x), wgc.from_numpy(y))
    np.testing.assert_array_equal(z.to_numpy(), np.where(m, x, y))


def test_scalar_params_and_index():
    k = wgc.ElementwiseKernel("x: T, a: T, flag: bool", "y: T",
                              "y = x * a + T(i); if (flag) { y = -y; }", "scaled")
    x = np.arange(10, dtype=np.float64 if wgc.DTYPES["f64"] else np.float32).astype(np.float32)
    y = k(wgc.from_numpy(x), np.float32(3), True)
    np.testing.assert_array_equal(y.to_numpy(), -(x * 3 + np.arange(10)))
    xi = wgc.buffer([1, 2, 3], dtype="s32")
    assert k(xi, 2, False).tolist() == [2, 5, 8]  # a Python 2 is an exact s32
    with pytest.raises(wgc.ArgumentError, match="scaled: a"):
        k(xi, 2.5, False)  # 2.5 is no s32
    with pytest.raises(wgc.ArgumentError, match="flag is bool"):
        k(xi, 2, 7)


def test_in_place_and_its_refusal(rng):
    x = rng.standard_normal(64).astype(np.float32)
    bx = wgc.from_numpy(x)
    SAXPY(bx, wgc.from_numpy(np.ones(64, np.float32)), 2.0, out=bx)
    np.testing.assert_allclose(bx.to_numpy(), 2 * x + 1, rtol=1e-6)
    k = wgc.ElementwiseKernel("x: T", "y: T, z: T", "y = x; z = -x;", "pair")
    with pytest.raises(wgc.ArgumentError, match="pair: output is also input 'x'; pair has "
                                                "several outputs"):
        k(bx, out=(bx, wgc.empty((64,))))
    with pytest.raises(wgc.ArgumentError, match="output 'z' is also input 'x'"):
        k(bx, out=(wgc.empty((64,)), bx))
    with pytest.raises(wgc.ArgumentError, match="output 'y' is also output 'z'"):
        y = wgc.empty((64,))
        k(bx, out=(y, y))


def test_elementwise_bad_inputs_name_the_argument():
    x, xi = wgc.buffer([1.0, 2.0]), wgc.buffer([1, 2], dtype="s32")
    with pytest.raises(wgc.DtypeError, match="saxpy: y is s32, but x is f32 and both are "
                                             "declared T"):
        SAXPY(x, xi, 1.0)
    with pytest.raises(wgc.ArgumentError, match=r"takes 3 argument\(s\) \(x, y, a\), got 2"):
        SAXPY(x, x)
    with pytest.raises(wgc.ShapeError, match="saxpy: x is \\(2,\\) and y is \\(3,\\)"):
        SAXPY(x, wgc.buffer([1.0, 2.0, 3.0]), 1.0)
    with pytest.raises(wgc.ShapeError, match="z is \\(3,\\)"):
        SAXPY(x, x, 1.0, out=wgc.empty((3,)))
    with pytest.raises(wgc.DtypeError, match="type T of x is not fixed"):
        SAXPY(2.0, 3.0, 1.0, out=None)
    with pytest.raises(wgc.ArgumentError, match="'x: T, y' is not 'name: type'|'y' is not"):
        wgc.ElementwiseKernel("x: T, y", "z: T", "z = x;")
    with pytest.raises(wgc.ArgumentError, match="'x' is named twice"):
        wgc.ElementwiseKernel("x: T", "x: T", "x = x;")
    with pytest.raises(wgc.ArgumentError, match="'c' has type 'c128'|c128"):
        wgc.ElementwiseKernel("c: c128", "z: f32", "z = 1.0;")
    bad = wgc.ElementwiseKernel("x: f32", "z: f32", "z = undefined_thing;", "bad_body")
    with pytest.raises(wgc.ShaderCompileError, match="undefined_thing"):
        bad(x)


# -- ReductionKernel -----------------------------------------------------------------------------
L2 = wgc.ReductionKernel("x: T", "y: T", "x * x", "a + b", "y = sqrt(a);", "0", "l2norm")
MAX = wgc.ReductionKernel("x: T", "y: T", "x", "max(a, b)", "y = a;", "-3.4e38", "mymax")
# argmax as a (value, index) pair: the larger value, of equal ones the first index
ARGMAX = wgc.ReductionKernel(
    "x: f32", "y: u32", "vec2<f32>(x, f32(j))",
    "select(b, a, a.x > b.x || (a.x == b.x && a.y < b.y))", "y = u32(a.y);",
    "vec2<f32>(-3.4e38, 0.0)", "myargmax", reduce_type="vec2<f32>")


@pytest.mark.parametrize("shape,axis", [((1000,), None), ((3, 1000), 1), ((3, 1000), 0),
                                        ((4, 5, 600), (0, 2)), ((4, 5, 600), None),
                                        ((300_001,), 0), ((2, 70_000), -1), ((7,), ())])
def test_reductions_over_axes(shape, axis, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    b = wgc.from_numpy(x)
    np.testing.assert_allclose(L2(b, axis=axis).to_numpy(),
                               np.sqrt((x.astype(np.float64) ** 2).sum(axis=axis)), rtol=2e-5)
    np.testing.assert_array_equal(MAX(b, axis=axis).to_numpy(), x.max(axis=axis))
    if axis != ():
        np.testing.assert_array_equal(ARGMAX(b, axis=axis).to_numpy(),
                                      np.argmax(x, axis=axis) if isinstance(axis, int) or axis
                                      is None else np.argmax(
                                          x.transpose(1, 0, 2).reshape(5, -1), axis=1))


def test_long_reductions_run_in_two_passes():
    """More than one workgroup per output, and partials merged by a second pass: what the
    cases above run (checked here, so that they cannot silently stop doing so)."""
    assert reduction.plan((300_001,), (0,))[2] > 1
    assert reduction.plan((2, 70_000), (1,))[2] > 1
    assert reduction.plan((3, 1000), (1,))[2] == 1  # one workgroup per output, 4 per thread


def test_reduction_keepdims_out_int_and_scalar(rng):
    k = wgc.ReductionKernel("x: T, w: T", "y: T", "x * w", "a + b", "y = a;", 0, "wsum")
    x = rng.integers(-9, 9, (6, 5)).astype(np.int32)
    y = k(wgc.from_numpy(x), 3, axis=1, keepdims=True)
    assert y.shape == (6, 1)
    np.testing.assert_array_equal(y.to_numpy(), (x * 3).sum(axis=1, keepdims=True))
    out = wgc.empty((5,), "s32")
    assert k(wgc.from_numpy(x), wgc.from_numpy(x), axis=0, out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), (x * x).sum(axis=0))
    empty = k(wgc.from_numpy(np.zeros((0, 3), np.int32)), 1, axis=0)
    assert empty.tolist() == [0, 0, 0]  # the identity, post-mapped


def test_reduction_of_packed_inputs(rng):
    count = wgc.ReductionKernel("m: bool", "y: u32", "u32(m)", "a + b", "y = a;", "0", "count")
    m = rng.integers(0, 2, (5, 3001)).astype(bool)
    np.testing.assert_array_equal(count(wgc.from_numpy(m), axis=1).to_numpy(), m.sum(axis=1))
    total = wgc.ReductionKernel("x: u8", "y: u32", "x", "a + b", "y = a;", "0", "u8sum")
    x = rng.integers(0, 256, (7, 9)).astype(np.uint8)
    np.testing.assert_array_equal(total(wgc.from_numpy(x), axis=0).to_numpy(),
                                  x.sum(axis=0, dtype=np.uint32))


@pytest.mark.parametrize("shape,axis", [((5, 3000), 1), ((300_001,), None), ((9, 7), 0)])
def test_reduction_to_packed_outputs(shape, axis, rng):
    """u8 and bool outputs: u32 words packed by a last pass (after partials, if any)."""
    any_nonzero = wgc.ReductionKernel("m: T", "y: bool", "u32(m != T(0))", "a | b",
                                      "y = a != 0u;", "0u", "any_nonzero", reduce_type="u32")
    x = (rng.random(shape) > 0.9995).astype(np.float32)
    got = any_nonzero(wgc.from_numpy(x), axis=axis)
    assert got.dtype == "bool"
    np.testing.assert_array_equal(got.to_numpy(), (x != 0).any(axis=axis))
    u8max = wgc.ReductionKernel("x: T", "y: T", "x", "max(a, b)", "y = a;", "0u", "u8max")
    xu = rng.integers(0, 256, shape).astype(np.uint8)
    np.testing.assert_array_equal(u8max(wgc.from_numpy(xu), axis=axis).to_numpy(),
                                  xu.max(axis=axis))


def test_reduction_bad_inputs():
    k = wgc.ReductionKernel("x: T, w: T", "y: T", "x * w", "a + b", "y = a;", "0", "dot")
    with pytest.raises(wgc.DtypeError, match="dot: w is s32, but x is f32"):
        k(wgc.buffer([1.0]), wgc.buffer([1], dtype="s32"))
    x = wgc.buffer([[1.0, 2.0]])
    with pytest.raises(wgc.ArgumentError, match="l2norm: param 'axis' 2 is out of range"):
        L2(x, axis=2)
    with pytest.raises(wgc.ShapeError, match="out is \\(3,\\)"):
        L2(x, axis=1, out=wgc.empty((3,)))
    with pytest.raises(wgc.ArgumentError, match="one output"):
        wgc.ReductionKernel("x: T", "y: T, z: T", "x", "a + b", "y = a;", "0")
    with pytest.raises(wgc.ArgumentError, match="the output is bool; pass reduce_type='u32'"):
        wgc.ReductionKernel("x: T", "y: bool", "x", "a + b", "y = a;", "0")


# -- raw WGSL kernels: several outputs, vector/matrix/array/struct params -------------------------
PROBE = """
struct Light { color: vec3<f32>, power: f32, dir: vec2<f32> }
struct Params {
    n: u32,
    m: mat3x3<f32>,
    v: vec3<f32>,
    s: f32,
    arr: array<vec4<f32>, 2>,
    light: Light,
    h: vec2<u32>,
    q: mat2x2<f32>,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read_write> fields: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) {
        return;
    }
    out[i] = x[i] * p.s;
    if (i != 0u) {
        return;
    }
    var k = 0u;
    for (var c = 0u; c < 3u; c++) { for (var r = 0u; r < 3u; r++) { fields[k] = p.m[c][r]; k++; } }
    for (var c = 0u; c < 3u; c++) { fields[k] = p.v[c]; k++; }
    fields[k] = p.s; k++;
    for (var a = 0u; a < 2u; a++) {
        for (var c = 0u; c < 4u; c++) { fields[k] = p.arr[a][c]; k++; }
    }
    for (var c = 0u; c < 3u; c++) { fields[k] = p.light.color[c]; k++; }
    fields[k] = p.light.power; k++;
    fields[k] = p.light.dir.x; k++;
    fields[k] = p.light.dir.y; k++;
    fields[k] = f32(p.h.x); k++;
    fields[k] = f32(p.h.y); k++;
    for (var c = 0u; c < 2u; c++) { for (var r = 0u; r < 2u; r++) { fields[k] = p.q[c][r]; k++; } }
}
"""


def _probe_values():
    return dict(m=np.arange(9, dtype=np.float32).reshape(3, 3), v=(1, 2, 3), s=0.5,
                arr=np.arange(8).reshape(2, 4) + 100,
                light={"color": (7.0, 8.0, 9.0), "power": 10, "dir": [11, 12]}, h=(13, 14),
                q=[[20, 21], [22, 23]])


def test_uniform_layout_read_back_on_the_gpu():
    """Each params field copied out by the shader: the values land where WGSL reads them. On
    wgpu's GL backend (std140 pads a matCx2's columns to 16 bytes) the mat2x2 param is
    refused, naming it."""
    k = wgc.register_kernel(unique("probe"), PROBE)
    x = np.arange(100, dtype=np.float32)
    if wgc.device_info()["backend"] == "OpenGL":
        with pytest.raises(wgc.DtypeError, match="param 'q' is mat2x2<f32>; on wgpu's GL"):
            k(wgc.from_numpy(x), **_probe_values())
        return
    out, fields = k(wgc.from_numpy(x), **_probe_values())
    np.testing.assert_array_equal(out.to_numpy(), x * 0.5)
    v = _probe_values()
    want = np.concatenate([v["m"].ravel(), v["v"], [v["s"]], v["arr"].ravel(),
                           v["light"]["color"], [10, 11, 12], v["h"], np.ravel(v["q"])])
    np.testing.assert_array_equal(fields.to_numpy()[:len(want)], want.astype(np.float32))


def test_uniform_layout_follows_the_wgsl_spec():
    """AlignOf / SizeOf / offsets as the WGSL spec's Memory Layout tables give them."""
    refl = reflect(PROBE)
    structs = dict(refl.structs)
    params = uniform.layout(refl.binding("p").type, structs, "p")
    offsets = {name: (off, t.align, t.size) for name, off, t in params.members}
    assert offsets == {"n": (0, 4, 4), "m": (16, 16, 48), "v": (64, 16, 12),
                       "s": (76, 4, 4), "arr": (80, 16, 32), "light": (112, 16, 32),
                       "h": (144, 8, 8), "q": (152, 8, 16)}
    assert (params.align, params.size) == (16, 176)
    light = dict((n, o) for n, o, _ in params.members[5][2].members)
    assert light == {"color": 0, "power": 12, "dir": 16}


def test_struct_and_vector_params_refuse_bad_values():
    k = wgc.register_kernel(unique("probe"), PROBE)
    x = wgc.from_numpy(np.arange(4, dtype=np.float32))
    with pytest.raises(wgc.ArgumentError, match="output 'fields' is also input 'x'"):
        k(x, out=(wgc.empty((4,)), x), **_probe_values())
    for change, match in [(dict(v=(1, 2)), "param 'v': vec3<f32> takes 3 numbers"),
                          (dict(m=np.eye(2)), "param 'm': mat3x3<f32> takes 3 columns"),
                          (dict(light={"color": (1, 2, 3), "power": 1}), "dir is missing"),
                          (dict(light=(1, 2)), "Light is a struct; give a dict"),
                          (dict(h=(-1, 2)), "param 'h'"),
                          (dict(arr=np.zeros((3, 4))), "takes 2 elements")]:
        with pytest.raises(wgc.ArgumentError, match=match):
            k(x, **dict(_probe_values(), **change))


def test_raw_kernel_outputs_in_binding_order_and_out():
    src = """
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> q: array<i32>;
@group(0) @binding(2) var<storage, read_write> r: array<u32>;
struct P { n: u32, d: i32 }
@group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) {
        q[g.x] = a[g.x] / p.d;
        r[g.x] = u32(a[g.x] % p.d);
    }
}
"""
    k = wgc.register_kernel(unique("divmod"), src)
    a = np.arange(0, 300, dtype=np.int32)
    q, r = k(wgc.from_numpy(a), d=7)
    assert (q.dtype, r.dtype) == ("s32", "u32")
    np.testing.assert_array_equal(q.to_numpy(), a // 7)
    np.testing.assert_array_equal(r.to_numpy(), a % 7)
    outs = (wgc.empty((300,), "s32"), wgc.empty((300,), "u32"))
    assert k(wgc.from_numpy(a), out=outs, d=3) == outs
    np.testing.assert_array_equal(outs[1].to_numpy(), a % 3)
    with pytest.raises(wgc.ArgumentError, match=r"out: expected 2 Buffer\(s\) \(q, r\)"):
        k(wgc.from_numpy(a), out=outs[0], d=3)
    with pytest.raises(wgc.DtypeError, match="input 'r' is f32"):
        k(wgc.from_numpy(a), out=(outs[0], wgc.empty((300,), "f32")), d=3)


def test_big_params_refuse_several_dispatches():
    src = """
struct P { n: u32, offset: u32, w: array<vec4<f32>, 16> }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x + p.offset;
    if (i < p.n) { out[i] = p.w[3].y; }
}
"""
    k = wgc.register_kernel(unique("bigparams"), src)
    w = np.zeros((16, 4), np.float32)
    w[3, 1] = 5
    assert k(out=wgc.empty((100,)), w=w).tolist() == [5.0] * 100
    with pytest.raises(wgc.ShapeError, match="larger than the 256"):
        k(out=wgc.empty((65_535 * 64 + 1,)), w=w)


# -- callable kernels, re-registration -----------------------------------------------------------
DOUBLE = """
struct P { n: u32, a: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { out[g.x] = p.a * x[g.x]; }
}
"""


def test_kernels_are_callable_with_a_signature():
    name = unique("scaled")
    k = wgc.register_kernel(name, DOUBLE)
    assert str(inspect.signature(k)) == "(x, /, *, out=None, a)"
    assert f"{name}(x) -> out params=(a: f32)" in repr(k)
    x = wgc.buffer([1.0, 2.0])
    assert k(x, a=3.0).tolist() == [3.0, 6.0]
    out = wgc.empty((2,))
    assert k(x, out=out, a=0.5) is out and out.tolist() == [0.5, 1.0]
    with pytest.raises(wgc.ArgumentError, match="param 'a' is required"):
        k(x)


def test_registering_the_same_kernel_again_returns_it():
    name = unique("again")

    def cell():  # a notebook cell: the grid is a new lambda each time it runs
        return wgc.register_kernel(name, DOUBLE, grid=lambda i, o, p: ((o.size + 63) // 64,))

    k = cell()
    again = cell()
    assert again is k  # a notebook cell run twice: the same shader, options and grid code
    with pytest.raises(wgc.ArgumentError, match=f"a kernel named '{name}' already exists "
                                                f"\\(pass replace=True"):
        wgc.register_kernel(name, DOUBLE.replace("p.a * x", "p.a + x"))
    with pytest.raises(wgc.ArgumentError, match="already exists"):
        wgc.register_kernel(name, DOUBLE, checked=False)  # the same source, other options
    new = wgc.register_kernel(name, DOUBLE.replace("p.a * x", "p.a + x"), replace=True)
    assert new is not k and new(wgc.buffer([1.0]), a=2.0).tolist() == [3.0]
    with pytest.raises(wgc.ArgumentError, match="already exists"):
        wgc.register_kernel("relu", DOUBLE)  # a built-in's name
