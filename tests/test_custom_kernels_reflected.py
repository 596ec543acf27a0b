"""register_kernel(name, source) reading everything from the shader: bindings, params,
entry point and @workgroup_size; explicit arguments checked against it; launches that are
right at every size or refused (the saxpy written the usual wgpu way, past 65,535 workgroups)."""

import importlib
import itertools

import numpy as np
import pytest

import wgcompute as wgc

_ids = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}_{next(_ids)}_r"


# saxpy written the usual wgpu way: @workgroup_size(64), indexed by gid.x, guarded by n
SAXPY = """
struct Params {
    n: u32,
    a: f32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) {
        return;
    }
    out[i] = p.a * x[i] + y[i];
}
"""
# the same with the documented `offset` field: wgcompute splits long grids into dispatches
SAXPY_OFFSET = SAXPY.replace("n: u32,", "n: u32,\n    offset: u32,").replace(
    "let i = gid.x;", "let i = gid.x + p.offset;")
SAXPY_ARGS = dict(bindings=[("x", "read"), ("y", "read"), ("out", "read_write"),
                             ("p", "uniform")], params={"n": "u32", "a": "f32"})
BIG = 65_535 * 64 + 100  # one dispatch of 64-wide workgroups cannot cover it along x
HUGE = 64 * 1024 * 1024


def current_device():
    if hasattr(wgc, "current_device"):
        return wgc.current_device()
    return importlib.import_module("wgcompute.device").get_device()


def saxpy_check(name, n, rng):
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = wgc.run_kernel(name, [wgc.from_numpy(x), wgc.from_numpy(y)], None, {"a": 2.5})
    assert_saxpy(out.to_numpy(), np.float32(2.5), x, y)


def assert_saxpy(got, a, x, y):
    """got is a * x + y rounded once per operation, or once (a GPU compiler may fuse the
    multiply and add: NVIDIA's does): each element must be one of the two, nothing else."""
    unfused = a * x + y
    fused = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)
    ok = (got == unfused) | (got == fused)
    assert ok.all(), (f"{(~ok).sum()} of {got.size} differ from both: first at "
                      f"{np.flatnonzero(~ok)[:5]}: {got[~ok][:5]} vs {unfused[~ok][:5]}")


@pytest.fixture(scope="module")
def saxpy():
    name = unique("saxpy")
    k = wgc.register_kernel(name, SAXPY)  # no bindings=, params=, workgroup_size=, dtypes=
    assert k.inputs == ("x", "y") and k.output == "out"
    assert [p.name for p in k.params] == ["a"]  # n is wgcompute's to set
    assert k.dtypes == ("f32",) and k.workgroup_size == (64, 1, 1)
    return name


@pytest.fixture(scope="module")
def saxpy_offset():
    name = unique("saxpy_offset")
    wgc.register_kernel(name, SAXPY_OFFSET)
    return name


@pytest.mark.parametrize("n", [1, 100, 1000])
def test_saxpy_the_usual_wgpu_way(saxpy, n, rng):
    """The launch uses the shader's @workgroup_size(64); it used to assume 256 and leave
    three quarters of the outputs at zero."""
    saxpy_check(saxpy, n, rng)


def test_saxpy_registered_with_bindings_but_no_workgroup_size(rng):
    name = unique("saxpy_b")
    wgc.register_kernel(name, SAXPY, **SAXPY_ARGS)
    saxpy_check(name, 1000, rng)


def test_saxpy_past_the_dimension_limit_is_refused_with_how_to():
    """gid.x indexing cannot survive a grid folded into y (it used to be folded, and 2M of
    the outputs were wrong): refused, never wrong."""
    name = unique("saxpy_wg64")
    wgc.register_kernel(name, SAXPY, workgroup_size=64, **SAXPY_ARGS)
    x = wgc.empty((BIG,), "f32")
    with pytest.raises(wgc.ShapeError) as e:
        wgc.run_kernel(name, [x, x], None, {"a": 1.0})
    msg = str(e.value)
    assert "65537 workgroups of 64" in msg and "65535" in msg
    assert "offset: u32" in msg and "gid.x + p.offset" in msg
    assert "num_workgroups" in msg and "grid=" in msg


@pytest.mark.parametrize("n", [1, 100, 1000, BIG])
def test_saxpy_with_offset_is_right_at_every_size(saxpy_offset, n, rng):
    saxpy_check(saxpy_offset, n, rng)


def test_saxpy_with_offset_splits_into_dispatches(saxpy_offset):
    x = wgc.empty((BIG,), "f32")
    k = wgc.kernel_info(saxpy_offset)
    launches = k.launches([x, x], x, {"a": 1.0}, current_device())
    assert [la.workgroups for la in launches] == [(65535, 1, 1), (2, 1, 1)]
    assert [la.uniform["offset"] for la in launches] == [0, 65535 * 64]
    assert {la.uniform["n"] for la in launches} == {BIG}


def test_saxpy_64m(saxpy_offset, rng):
    """64M f32 (256 MiB buffers): right where the adapter binds that much; where it does
    not (lavapipe: 128 MiB), a ShapeError naming the limit, before anything runs."""
    limit = wgc.device_info()["limits"]["max-storage-buffer-binding-size"]
    if HUGE * 4 > limit:
        with wgc.empty((HUGE,), "f32") as x, pytest.raises(
                wgc.ShapeError, match=rf"'x' \({HUGE},\) f32 binds {HUGE * 4} bytes.*at most "
                                      rf"{limit}"):
            wgc.run_kernel(saxpy_offset, [x, x], None, {"a": 1.0})
        pytest.skip(f"this adapter binds at most {limit} bytes per buffer: 64M f32 is "
                    f"refused (checked above), so the 64M result is checked on GPUs only")
    saxpy_check(saxpy_offset, HUGE, rng)


def test_folded_grid_for_kernels_that_take_num_workgroups(rng):
    """A shader indexing with (wid.y * nwg.x + wid.x) * WG + lid keeps the 2-D fold."""
    name = unique("fold")
    wgc.register_kernel(name, """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 64u + lid;
    if (i < p.n) { out[i] = a[i] * 3; }
}
""")
    assert wgc.kernel_info(name).dtypes == ("s32",)  # from the output's array<i32>
    a = np.arange(BIG, dtype=np.int32)
    np.testing.assert_array_equal(wgc.run_kernel(name, [wgc.from_numpy(a)]).to_numpy(), a * 3)


# -- explicit arguments are checked against the shader ----------------------------------------
@pytest.mark.parametrize("kwargs,match", [
    (dict(workgroup_size=256),
     r"workgroup_size=256 but the shader declares @workgroup_size\(64\)"),
    (dict(workgroup_size=(64, 2)), r"workgroup_size=\(64, 2\) but the shader declares"),
    (dict(params={"n": "u32", "alpha": "f32"}),
     r"params=\{'n': 'u32', 'alpha': 'f32'\} but the shader's params struct declares "
     r"\{'n': 'u32', 'a': 'f32'\}"),
    (dict(params={"n": "u32", "a": "i32"}), "but the shader's params struct declares"),
    (dict(dtypes=("s32",)), r"dtypes=\('s32',\) but the shader's output 'out' is array<f32>"),
    (dict(bindings=[("y", "read"), ("x", "read"), ("out", "read_write"), ("p", "uniform")]),
     "but the shader declares"),
    (dict(entry_point="other"), r"no @compute function 'other' \(it has: main\)"),
])
def test_explicit_arguments_that_contradict_the_shader(kwargs, match):
    name = unique("contradicted")
    with pytest.raises(wgc.ArgumentError, match=match):
        wgc.register_kernel(name, SAXPY, **kwargs)
    assert name not in wgc.kernels()


def test_explicit_arguments_that_agree_are_accepted(rng):
    name = unique("agreed")
    wgc.register_kernel(name, SAXPY, workgroup_size=64, params={"n": "u32", "a": "T"},
                        dtypes="f32", entry_point="main")
    saxpy_check(name, 300, rng)


def test_n_and_offset_are_set_by_wgcompute(saxpy_offset):
    x = wgc.buffer([1.0])
    for auto in ("n", "offset"):
        with pytest.raises(wgc.ArgumentError, match=f"param '{auto}' is set by wgcompute"):
            wgc.run_kernel(saxpy_offset, [x, x], None, {"a": 1.0, auto: 5})


def test_input_dtype_must_be_the_declared_element_type(saxpy):
    f = wgc.buffer([1.0, 2.0])
    i = wgc.buffer([1, 2], dtype="s32")
    with pytest.raises(wgc.DtypeError, match=r"input 'y' is s32, but the shader declares "
                                             r"y: array<f32> \(expected f32\)"):
        wgc.run_kernel(saxpy, [f, i], wgc.empty((2,)), {"a": 1.0})


# -- workgroup sizes ----------------------------------------------------------------------------
TEMPLATED = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = g.x; }
}
"""


def test_huge_workgroup_size_is_refused():
    with pytest.raises(wgc.ArgumentError, match=r"workgroup_size=1000000000 but the shader "
                                                r"declares @workgroup_size\(64\)"):
        wgc.register_kernel(unique("huge"), SAXPY, workgroup_size=10**9, **SAXPY_ARGS)
    # where the shader takes its size from ${WG}, the adapter's limit refuses it
    with pytest.raises(wgc.ArgumentError, match=r"1000000000 invocations per workgroup.*"
                                                r"max-compute-invocations-per-workgroup"):
        wgc.register_kernel(unique("huge"), TEMPLATED, workgroup_size=10**9,
                            bindings=[("out", "read_write")], dtypes="u32")


def test_workgroup_size_past_one_axis_limit_is_refused():
    limits = wgc.device_info()["limits"]
    z = limits["max-compute-workgroup-size-z"] + 1
    if z > limits["max-compute-invocations-per-workgroup"]:
        pytest.skip(f"every z this adapter allows per workgroup ({z - 1}) is also its limit "
                    f"on invocations, which the test above covers")
    with pytest.raises(wgc.ArgumentError, match=r"max-compute-workgroup-size-z"):
        wgc.register_kernel(unique("huge"), TEMPLATED.replace("${WG}", f"1, 1, {z}"),
                            grid=lambda ins, out, p: (1,))


def test_templated_workgroup_size_fills_wg():
    name = unique("iota")
    k = wgc.register_kernel(name, TEMPLATED, workgroup_size=32)
    assert k.workgroup_size == (32, 1, 1) and k.dtypes == ("u32",)
    out = wgc.empty((100,), "u32")
    wgc.run_kernel(name, [], out)
    assert out.tolist() == list(range(100))


def test_wg_placeholder_that_the_declaration_ignores():
    src = TEMPLATED.replace("@workgroup_size(${WG})", "@workgroup_size(64)").replace(
        "out[g.x] = g.x;", "out[g.x] = ${WG}u;")
    with pytest.raises(wgc.ArgumentError, match=r"computes with \$\{WG\} = 256 but declares "
                                                r"@workgroup_size\(64\)"):
        wgc.register_kernel(unique("wg"), src)


def test_two_dimensional_workgroup_needs_a_grid():
    src = TEMPLATED.replace("@workgroup_size(${WG})", "@workgroup_size(8, 8)")
    with pytest.raises(wgc.ArgumentError, match=r"@workgroup_size\(8, 8\).*pass grid="):
        wgc.register_kernel(unique("wg2d"), src)
    name = unique("wg2d")
    wgc.register_kernel(name, src, grid=lambda ins, out, p: (2, 1, 1))  # 2 x 8 threads in x
    out = wgc.empty((16,), "u32")
    wgc.run_kernel(name, [], out)
    assert out.tolist() == list(range(16))


def test_override_without_default_is_refused():
    src = TEMPLATED.replace("@workgroup_size(${WG})", "@workgroup_size(BLOCK)")
    with pytest.raises(wgc.ArgumentError, match="override 'BLOCK' has no default"):
        wgc.register_kernel(unique("ov"), "override BLOCK: u32;\n" + src)
    name = unique("ov")
    k = wgc.register_kernel(name, "const HALF = 16u;\noverride BLOCK: u32 = HALF * 2u;\n" + src)
    assert k.workgroup_size == (32, 1, 1)
    out = wgc.empty((70,), "u32")
    wgc.run_kernel(name, [], out)
    assert out.tolist() == list(range(70))


# -- bindings, entry points, element types ------------------------------------------------------
def test_bindings_in_any_numbering_and_a_chosen_entry_point(rng):
    """Binding numbers need not be 0..n in the documented order: the layout uses the
    shader's own numbers. Of two @compute functions, entry_point= picks one."""
    src = """
struct P { n: u32, k: i32 }
@group(0) @binding(7) var<uniform> p: P;
@group(0) @binding(5) var<storage, read> b: array<i32>;
@group(0) @binding(2) var<storage, read> a: array<i32>;
@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@compute @workgroup_size(16)
fn plus(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { out[g.x] = a[g.x] + p.k * b[g.x]; }
}
@compute @workgroup_size(16)
fn minus(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { out[g.x] = a[g.x] - p.k * b[g.x]; }
}
"""
    with pytest.raises(wgc.ArgumentError, match=r"2 @compute functions \(plus, minus\)"):
        wgc.register_kernel(unique("two"), src)
    name = unique("minus")
    k = wgc.register_kernel(name, src, entry_point="minus")
    assert k.inputs == ("a", "b")  # in @binding order
    a = rng.integers(-100, 100, 37, dtype=np.int32)
    b = rng.integers(-100, 100, 37, dtype=np.int32)
    out = wgc.run_kernel(name, [wgc.from_numpy(a), wgc.from_numpy(b)], None, {"k": 3})
    np.testing.assert_array_equal(out.to_numpy(), a - 3 * b)


def test_vector_elements_count_items(rng):
    """An array<vec4<f32>> output: one invocation per vec4, and n counts vec4 items."""
    name = unique("vec4")
    wgc.register_kernel(name, """
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> a: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { out[g.x] = a[g.x].wzyx; }
}
""")
    a = rng.standard_normal((50, 4), dtype=np.float32)
    out = wgc.run_kernel(name, [wgc.from_numpy(a)]).to_numpy()
    np.testing.assert_array_equal(out, a[:, ::-1])
    with pytest.raises(wgc.ShapeError, match="not a whole number"):
        wgc.run_kernel(name, [wgc.empty((6,))], wgc.empty((6,)))


@pytest.mark.parametrize("src,match", [
    ("@group(1) @binding(0) var<storage, read_write> out: array<f32>;",
     r"'out' is in @group\(1\)"),
    ("@group(0) @binding(0) var<storage, read> a: array<f32>;", "no read_write storage"),
    ("@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
     "@group(0) @binding(1) var t: texture_2d<f32>;", "'t' is a texture_2d<f32>"),
    ("struct P { m: ptr<function, f32> }\n@group(0) @binding(0) var<uniform> p: P;\n"
     "@group(0) @binding(1) var<storage, read_write> out: array<f32>;",
     "ptr<function, f32> cannot be a params field"),
    ("struct P { @align(16) n: u32 }\n@group(0) @binding(0) var<uniform> p: P;\n"
     "@group(0) @binding(1) var<storage, read_write> out: array<f32>;", "@align/@size"),
    ("@group(0) @binding(0) var<uniform> p: u32;\n"
     "@group(0) @binding(1) var<storage, read_write> out: array<f32>;", "fills a struct"),
    ("struct P { offset: i32 }\n@group(0) @binding(0) var<uniform> p: P;\n"
     "@group(0) @binding(1) var<storage, read_write> out: array<f32>;", "'offset' is i32"),
    ("struct R { a: f32, b: u32 }\n"
     "@group(0) @binding(0) var<storage, read_write> out: array<R>;", "pass dtypes="),
])
def test_shaders_wgcompute_cannot_launch(src, match):
    body = "\n@compute @workgroup_size(1) fn main() {}\n"
    with pytest.raises(wgc.ArgumentError, match=match):
        wgc.register_kernel(unique("bad"), src + body)


def test_invalid_wgsl_reports_the_compiler_message():
    name = unique("invalid")
    with pytest.raises(wgc.ShaderCompileError, match=name) as e:
        wgc.register_kernel(name, "@compute @workgroup_size(1) fn main( {")
    assert e.value.compiler_message  # naga's words, not the reader's
