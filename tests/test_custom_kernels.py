"""Your own WGSL kernels: register_kernel from text or a .wgsl file, ${T}/${WG}/${ENABLE}
templates, binding order, the params uniform, grid folding past 65,535 workgroups, replace.
What the shader declares is read from it (test_custom_kernels_reflected.py checks more)."""

import itertools

import numpy as np
import pytest

import wgcompute as wgc

_ids = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}_{next(_ids)}_t"


# a·x + b·y with x, y read, out read_write, then the uniform: the documented binding order
AXPBY = """
${ENABLE}
struct Params {
    n: u32,
    alpha: ${T},
    beta: ${T},
}
@group(0) @binding(0) var<storage, read> x: array<${T}>;
@group(0) @binding(1) var<storage, read> y: array<${T}>;
@group(0) @binding(2) var<storage, read_write> out: array<${T}>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i >= p.n) {
        return;
    }
    out[i] = p.alpha * x[i] + p.beta * y[i];
}
"""
AXPBY_BINDINGS = [("x", "read"), ("y", "read"), ("out", "read_write"), ("p", "uniform")]


@pytest.fixture(scope="module")
def axpby():
    name = unique("axpby")
    k = wgc.register_kernel(name, AXPBY, bindings=AXPBY_BINDINGS,
                            params={"n": "u32", "alpha": "T", "beta": "T"},
                            dtypes=("f32", "f16", "s32"), workgroup_size=64)
    assert name in wgc.kernels()
    assert wgc.kernel_info(name) is k
    return name


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("n", [0, 1, 3, 257, 10_001])
@pytest.mark.computes("dt")
def test_axpby_float(axpby, dt, n, rng):
    npd = wgc.DTYPES[dt].numpy
    x = rng.standard_normal(n).astype(npd)
    y = rng.standard_normal(n).astype(npd)
    out = wgc.run_kernel(axpby, [wgc.from_numpy(x), wgc.from_numpy(y)], None,
                         {"alpha": 2.0, "beta": -0.5})
    assert out.dtype == dt and out.shape == (n,)
    want = 2.0 * x.astype(np.float64) - 0.5 * y.astype(np.float64)
    rtol = 2e-3 if dt == "f16" else 1e-6
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), want, rtol=rtol, atol=rtol)


def test_axpby_s32_params_are_converted_exactly(axpby, rng):
    x = rng.integers(-1000, 1000, 99, dtype=np.int32)
    y = rng.integers(-1000, 1000, 99, dtype=np.int32)
    out = wgc.run_kernel(axpby, [wgc.from_numpy(x), wgc.from_numpy(y)], None,
                         {"alpha": 3, "beta": -2})
    np.testing.assert_array_equal(out.to_numpy(), 3 * x - 2 * y)


def test_custom_kernel_grid_folds_past_the_dimension_limit(axpby):
    """65,535 × 64 + 5 elements at workgroup size 64 need a 2-D grid: the documented index
    formula ``(wid.y * nwg.x + wid.x) * WG + lid`` must reach every element exactly once."""
    n = 65_535 * 64 + 5
    x = np.arange(n, dtype=np.int32)
    y = np.ones(n, dtype=np.int32)
    out = wgc.run_kernel(axpby, [wgc.from_numpy(x), wgc.from_numpy(y)], None,
                         {"alpha": 1, "beta": 7})
    np.testing.assert_array_equal(out.to_numpy(), x + 7)


def test_required_params(axpby):
    x = wgc.buffer([1.0])
    with pytest.raises(wgc.ArgumentError, match="param 'alpha' is required"):
        wgc.run_kernel(axpby, [x, x], None, {"beta": 1.0})
    with pytest.raises(wgc.ArgumentError, match="unknown param.*gamma"):
        wgc.run_kernel(axpby, [x, x], None, {"alpha": 1.0, "beta": 1.0, "gamma": 0})
    with pytest.raises(wgc.DtypeError, match="not supported"):
        wgc.run_kernel(axpby, [wgc.buffer([1], dtype="u32")] * 2, None,
                       {"alpha": 1, "beta": 1})


def test_register_from_a_wgsl_file(tmp_path):
    path = tmp_path / "square.wgsl"
    path.write_text("""
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
struct Params { n: u32 }
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i < p.n) { out[i] = a[i] * a[i]; }
}
""")
    name = unique("square")
    wgc.register_kernel(name, str(path), bindings={"a": "read", "out": "read_write",
                                                   "p": "uniform"}, params={"n": "u32"})
    a = np.linspace(-3, 3, 1001, dtype=np.float32)
    out = wgc.run_kernel(name, [wgc.from_numpy(a)])
    np.testing.assert_array_equal(out.to_numpy(), a * a)


def test_kernel_without_uniform_and_own_grid():
    """No params: the grid callable sizes the dispatch (one workgroup of 4 per 4 outputs)."""
    src = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    out[g.x] = g.x * g.x + 1u;
}
"""
    name = unique("iota")
    wgc.register_kernel(name, src, bindings=[("out", "read_write")], dtypes="u32",
                        grid=lambda inputs, out, params: (out.size // 4,))
    out = wgc.empty((16,), "u32")
    wgc.run_kernel(name, [], out)
    assert out.tolist() == [i * i + 1 for i in range(16)]


def test_replace_runs_the_new_shader_and_duplicates_are_refused():
    def src(k):
        return f"""
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
struct Params {{ n: u32 }}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * 64u + lid;
    if (i < p.n) {{ out[i] = a[i] + {k}; }}
}}
"""
    bindings = [("a", "read"), ("out", "read_write"), ("p", "uniform")]
    name = unique("plus")
    wgc.register_kernel(name, src("1.0"), bindings=bindings, params={"n": "u32"},
                        workgroup_size=64)
    x = wgc.buffer([1.0, 2.0])
    assert wgc.run_kernel(name, [x]).tolist() == [2.0, 3.0]
    with pytest.raises(wgc.ArgumentError, match="already exists"):
        wgc.register_kernel(name, src("5.0"), bindings=bindings, params={"n": "u32"})
    assert wgc.run_kernel(name, [x]).tolist() == [2.0, 3.0]
    wgc.register_kernel(name, src("10.0"), bindings=bindings, params={"n": "u32"},
                        workgroup_size=64, replace=True)
    assert wgc.run_kernel(name, [x]).tolist() == [11.0, 12.0]
    # a built-in name is refused too, and the refusal leaves the built-in working
    with pytest.raises(wgc.ArgumentError, match="'relu' already exists"):
        wgc.register_kernel("relu", src("100.0"), bindings=bindings, params={"n": "u32"})
    assert wgc.relu(wgc.buffer([-1.0, 2.0])).tolist() == [0.0, 2.0]


def test_declared_bindings_must_match_the_shader():
    src = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { out[g.x] = a[g.x] + b[g.x]; }
"""
    name = unique("mismatch")
    with pytest.raises(wgc.ArgumentError, match=r"bindings=\[\('a', 'read'\), \('out', "
                       r"'read_write'\)\] but the shader declares \[\('a', 'read'\), "
                       r"\('b', 'read'\), \('out', 'read_write'\)\]"):
        wgc.register_kernel(name, src, bindings=[("a", "read"), ("out", "read_write")])
    assert name not in wgc.kernels()


@pytest.mark.parametrize("kwargs,match", [
    (dict(bindings=[("o", "write")]), "access 'write'"),
    (dict(bindings=[("a", "read")]), "at least one binding must be 'read_write'"),
    (dict(bindings=[("o", "read_write"), ("a", "read")]), "reads first"),
    (dict(bindings=[("o", "read_write"), ("p", "uniform")], params={}), "needs params"),
    (dict(bindings=[("o", "read_write")], params={"n": "u32"}), "no 'uniform'"),
    (dict(bindings=[("o", "read_write"), ("p", "uniform")], params={"n": "vec2"}),
     "field 'n' has type 'vec2'"),
    (dict(bindings=[("o", "read_write")], workgroup_size=0), "workgroup_size"),
    (dict(workgroup_size=(8, 8, 8, 8)), "workgroup_size"),
    (dict(workgroup_size=True), "workgroup_size"),
    (dict(entry_point=3), "entry_point"),
    (dict(bindings=[("o", "read_write")], dtypes=("f128",)), "dtypes"),
    (dict(bindings=[("o", "read_write")], grid=5), "grid"),
    (dict(bindings=5), "bindings"),
    (dict(bindings=[("o", "read_write")], checked="no"), "checked"),
])
def test_register_kernel_bad_arguments(kwargs, match):
    with pytest.raises(wgc.WgComputeError, match=match):
        wgc.register_kernel(unique("bad"), "fn main() {}", **kwargs)


# Reverses each 64-element block through workgroup memory, a loop summing a window of it
# beside: dynamic indices into a workgroup array and a loop, what naga's checks guard.
REVERSE_BLOCKS = """
struct P { n: u32, w: u32 }
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> tile: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = wid.x * 64u + lid;
    tile[lid] = a[i];
    workgroupBarrier();
    var s = 0.0;
    for (var k = 0u; k < p.w; k++) {
        s += tile[(lid + k) % 64u];
    }
    out[i] = tile[63u - lid] + s;
}
"""


@pytest.mark.parametrize("checked", [True, False])
def test_unchecked_kernel_matches_numpy(checked, rng):
    """``checked=False`` drops naga's runtime checks; a kernel that stays in range gives the
    same results."""
    name = unique("rev")
    wgc.register_kernel(name, REVERSE_BLOCKS, checked=checked, params={"n": "u32", "w": "u32"},
                        bindings=[("a", "read"), ("out", "read_write"), ("p", "uniform")],
                        grid=lambda ins, out, params: (out.size // 64,))
    a = rng.standard_normal(64 * 37).astype(np.float32)
    out = wgc.run_kernel(name, [wgc.from_numpy(a)], None, {"w": 5}).to_numpy()
    blocks = a.reshape(-1, 64)
    window = sum(np.roll(blocks, -k, axis=1) for k in range(5))
    np.testing.assert_allclose(out, (blocks[:, ::-1] + window).reshape(-1), rtol=1e-6)


def test_unchecked_kernel_compile_errors_are_reported():
    name = unique("broken")
    with pytest.raises(wgc.ShaderCompileError, match=name):
        wgc.register_kernel(name, "fn main( {", bindings=[("o", "read_write")], checked=False)
    assert name not in wgc.kernels()


def test_register_kernel_bad_name_source_and_template():
    with pytest.raises(wgc.ArgumentError, match="name"):
        wgc.register_kernel("not a name", "x", bindings=[("o", "read_write")])
    with pytest.raises(wgc.ArgumentError, match="source"):
        wgc.register_kernel(unique("k"), b"bytes", bindings=[("o", "read_write")])
    with pytest.raises(wgc.ArgumentError, match="does not exist"):
        wgc.register_kernel(unique("k"), "missing_file.wgsl", bindings=[("o", "read_write")])
    with pytest.raises(wgc.ArgumentError, match="placeholder 'FOO'.*T, WG, ENABLE"):
        wgc.register_kernel(unique("k"), "${FOO}", bindings=[("o", "read_write")])


def test_buffer_past_the_binding_limit_is_a_clear_error():
    """A custom kernel binds whole buffers: one larger than max-storage-buffer-binding-size
    must be refused with a ShapeError naming it, not a raw wgpu validation error."""
    limit = wgc.device_info()["limits"]["max-storage-buffer-binding-size"]
    n = limit // 4 + 1024
    if (n * 4) > wgc.device_info()["limits"]["max-buffer-size"]:
        pytest.skip("this adapter cannot allocate a buffer past its binding limit")
    name = unique("plus_one")
    wgc.register_kernel(name, """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
struct P { n: u32 }
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (i < p.n) { out[i] = a[i] + 1.0; }
}
""", bindings=[("a", "read"), ("out", "read_write"), ("p", "uniform")], params={"n": "u32"})
    with wgc.empty((n,), "f32") as big, wgc.empty((n,), "f32") as out:
        with pytest.raises(wgc.ShapeError, match=rf"'a' \({n},\) f32 binds .* at most {limit}"):
            wgc.run_kernel(name, [big], out)


@pytest.mark.parametrize("grid,error,match", [
    ((70_000,), wgc.ShapeError, r"\(70000, 1, 1\).*at most 65535"),  # before submitting
    ((-1,), wgc.ArgumentError, "non-negative ints"),
    ((1.5,), wgc.ArgumentError, "non-negative ints"),  # never silently truncated to 1
    (("a",), wgc.ArgumentError, "non-negative ints"),
    (None, wgc.ArgumentError, "non-negative ints"),
    ((1, 1, 1, 1), wgc.ArgumentError, "1 to 3"),
])
def test_bad_grid_results(grid, error, match):
    name = unique("grid")
    wgc.register_kernel(name, """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = 1u; }
}
""", bindings=[("out", "read_write")], dtypes="u32", grid=lambda i, o, p: grid)
    with pytest.raises(error, match=match):
        wgc.run_kernel(name, [], wgc.empty((4,), "u32"))
