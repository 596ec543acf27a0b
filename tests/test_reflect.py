"""WGSL reflection: what the parser reads from shaders (entry points, workgroup sizes through
consts and overrides, bindings and their element types, uniform structs, builtins), and a
cross-check of every built-in kernel's rendered shader against what the kernel declares."""

import importlib

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels import registry

reflect = importlib.import_module("wgcompute.kernels.core.reflect")
base = importlib.import_module("wgcompute.kernels.core.base")

FULL = """
enable f16;
// a line comment with `var<storage, read_write> fake: array<f32>;` inside
/* a block comment /* nested */ @group(0) @binding(9) var<uniform> fake2: P; */
const TILE: u32 = 8u;
const WG = TILE * 4u + 0x20u;   // 64
override ROWS: u32 = 2;
alias Vec = vec4<f32>;
alias Counts = array<atomic<u32>>;
struct Params {
    n: u32,
    alpha: f32,
    half_step: f16,
}
struct In {
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
}
@group(0) @binding(0) var<storage, read> x: array<Vec>;
@group(0) @binding(1) var<storage, read> m: array<mat4x4f>;
@group(0) @binding(3) var<storage, read_write> counts: Counts;
@group(0) @binding(2) var<storage> y: array<vec2h, 16>;
@group(0) @binding(4) var<uniform> p: Params;
var<workgroup> tile: array<array<f32, 4>, TILE>;
var<private> seed: u32 = 1u;

fn helper(a: ptr<function, f32>) -> f32 { return *a * 2.0; }

@compute @workgroup_size(WG, ROWS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3u) {
    let i = gid.x;
    if (i >= p.n) { return; }
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) { s += x[i][k]; }
    let small = i < 3u && i > 1u;   // comparisons, not a template list
    let shifted = (i >> 1u) + (i << 2u);
    let arr = array<vec2<u32>, 2>(vec2<u32>(1u, 2u), vec2u(3u, 4u));
    loop { s -= 1.0; if s < 0.0 { break; } continuing { break if s > 9.0; } }
    switch i { case 0u, 1u: { s = 0.0; } default { } }
    atomicAdd(&counts[i], bitcast<u32>(p.alpha * s));
    _ = arr;
}

@compute @workgroup_size(64)
fn other(input: In) {
    tile[input.lid % TILE][0] = f32(input.wid.x);
}

@fragment
fn frag() -> @location(0) vec4<f32> { return vec4f(1.0); }
"""


def test_entry_points_and_workgroup_sizes_through_consts_and_overrides():
    r = reflect.reflect(FULL)
    assert [(e.name, e.stage) for e in r.entry_points] == [
        ("main", "compute"), ("other", "compute"), ("frag", "fragment")]
    main = r.compute_entry("main")
    assert main.workgroup_size == (64, 2, 1)
    assert main.builtins == ("global_invocation_id", "num_workgroups")
    other = r.compute_entry("other")
    assert other.workgroup_size == (64, 1, 1)
    assert other.builtins == ("local_invocation_index", "workgroup_id")  # through the struct
    with pytest.raises(wgc.ArgumentError, match=r"2 @compute functions \(main, other\).*"
                                                r"entry_point="):
        r.compute_entry()
    with pytest.raises(wgc.ArgumentError, match="no @compute function 'frag'.*main, other"):
        r.compute_entry("frag")


def test_64_bit_integer_literals():
    """naga's i64 / u64 literal suffixes (li, lu) read, as the built-in casts use them."""
    r = reflect.reflect("""
const BIG: i64 = 9223372036854775807li;
@group(0) @binding(0) var<storage, read_write> out: array<i64>;
@compute @workgroup_size(32, 2)
fn main() { out[0] = BIG - 0x7fli + i64(4lu); }
""")
    assert r.compute_entry("main").workgroup_size == (32, 2, 1)


def test_bindings_types_and_uniform_fields():
    r = reflect.reflect(FULL)
    got = [(b.group, b.binding, b.name, b.space, b.access, str(b.type), b.element, b.lanes,
            b.atomic) for b in r.bindings]
    assert got == [
        (0, 0, "x", "storage", "read", "array<vec4<f32>>", "f32", 4, False),
        (0, 1, "m", "storage", "read", "array<mat4x4<f32>>", "f32", 16, False),
        (0, 2, "y", "storage", "read", "array<vec2<f16>, 16>", "f16", 2, False),
        (0, 3, "counts", "storage", "read_write", "array<atomic<u32>>", "u32", 1, True),
        (0, 4, "p", "uniform", "read", "Params", None, 0, False),
    ]  # sorted by binding number; the commented-out declarations are not there
    assert [(f.name, str(f.type)) for f in r.binding("p").fields] == [
        ("n", "u32"), ("alpha", "f32"), ("half_step", "f16")]
    assert r.enables == ("f16",)


def test_override_without_default_is_an_error_naming_it():
    src = """
override BLOCK: u32;
@compute @workgroup_size(BLOCK) fn main() {}
"""
    with pytest.raises(wgc.ArgumentError, match="override 'BLOCK' has no default"):
        reflect.reflect(src)


@pytest.mark.parametrize("size,want", [
    ("64", (64, 1, 1)), ("8, 8", (8, 8, 1)), ("4, 4, 4,", (4, 4, 4)),
    ("u32(16) * 2", (32, 1, 1)), ("(A + 1) / 3, A % 5", (7, 0, 1)), ("max(A, 100)", (100, 1, 1)),
])
def test_workgroup_size_expressions(size, want):
    src = f"const A = 20u;\n@compute @workgroup_size({size}) fn main() {{}}"
    if 0 in want:
        with pytest.raises(wgc.ArgumentError, match="expected a positive integer"):
            reflect.reflect(src)
        return
    assert reflect.reflect(src).compute_entry().workgroup_size == want


def test_unknown_identifier_in_workgroup_size():
    with pytest.raises(wgc.ArgumentError, match="'WG' is not a const or override"):
        reflect.reflect("@compute @workgroup_size(WG) fn main() {}")


def test_template_lists_nested_and_split():
    """`>>` closing two lists and `<`/`>` used as comparisons in one expression."""
    src = """
@group(0) @binding(0) var<storage, read_write> out: array<vec4<u32>>;
@compute @workgroup_size(1) fn main() {
    let a = 1u;
    let b = select(2u, 3u, a < 2u || a > 5u);
    out[0] = vec4<u32>(a, b, a<<1u, a>>1u);
}
"""
    r = reflect.reflect(src)
    assert str(r.binding("out").type) == "array<vec4<u32>>"


def test_unreadable_source_is_a_clear_error():
    with pytest.raises(wgc.ShaderCompileError, match="line 2, column 17"):
        reflect.reflect("\nfn main() { let = 3; }")


def test_with_read_write_rewrites_only_the_declaration():
    src = """@group(0) @binding(0) var<storage, read> a: array<f32>;
// var<storage, read> in a comment stays
@group(0) @binding(1) var<storage,read_write> out: array<f32>;
@compute @workgroup_size(1) fn main() { out[0] = a[0]; }
"""
    got = reflect.with_read_write(src, [0, 1])
    assert got == src.replace("var<storage, read> a", "var<storage, read_write> a", 1)
    assert reflect.reflect(got).binding("a").access == "read_write"


# -- every built-in kernel's shader against its declaration ----------------------------------
def _exercise_every_builtin():
    """Runs each built-in kernel over its dtypes (and each image kernel on RGBA8 and f32),
    so that the pipeline cache holds a rendered shader for each key they build."""
    for dt in ("f32", "f16", "s32", "u32", "u8", "f64", "s64"):
        feature = wgc.DTYPES[dt].feature
        if feature and not wgc.current_device().has(feature):
            continue  # no kernel compiles on it here (wgpu's GL backend lacks f16, f64, i64)
        npd = wgc.DTYPES[dt].numpy
        a = wgc.from_numpy(np.arange(12).astype(npd).reshape(3, 4))
        for k in ("add", "sub", "multiply", "divide"):
            wgc.run_kernel(f"elementwise_{k}", [a, a])
        wgc.run_kernel("scale", [a], None, {"scalar": 1})
        wgc.run_kernel("copy", [a])
        wgc.run_kernel("fill", [], wgc.empty((4,), dt), {"value": 1})
        if dt in ("f32", "f16", "f64", "s32", "s64"):
            wgc.relu(a)
        if dt != "u8":
            wgc.run_kernel("transpose", [a])
        for red in ("sum", "max", "min", "mean", "argmax"):
            for axis in (-1, None):
                wgc.run_kernel(red, [a], None, {"axis": axis})
        if dt in ("f32", "f16", "f64"):
            wgc.matmul(a, wgc.from_numpy(np.ones((4, 5), npd)))
        if dt in ("f32", "f16"):
            wgc.run_kernel("softmax", [a])
    for im in (wgc.from_numpy(np.zeros((8, 9, 4), np.uint8)),
               wgc.from_numpy(np.zeros((8, 9, 3), np.float32))):
        for k, p in [("gaussian_blur", {"sigma": 1.0}), ("blur", {"radius": 1}),
                     ("sharpen", {}), ("grayscale", {}), ("invert", {}), ("threshold", {}),
                     ("brightness_contrast", {}), ("sobel", {}), ("resize", {"size": (4, 5)}),
                     ("preprocess", {"size": (4, 4)})]:
            wgc.run_kernel(k, [im], None, p)
        wgc.run_kernel("convolve2d", [im, wgc.from_numpy(np.ones((3, 3), np.float32))])
        wgc.run_kernel("generate_gradient", [], wgc.empty(im.shape, im.dtype))


def _program_objects() -> dict:
    """The kernels the array namespace's families use as objects, not through the registry
    (sort, scan, gather, fft, linalg, regions, iota, where, ...), by name."""
    import pkgutil

    from wgcompute.kernels.core.base import Kernel

    kernels = importlib.import_module("wgcompute.kernels")  # (wgc.kernels is a function)
    found = {}
    for info in pkgutil.walk_packages(kernels.__path__, "wgcompute.kernels."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            objs = value.values() if isinstance(value, dict) else \
                value if isinstance(value, (list, tuple)) else (value,)
            for obj in objs:
                if isinstance(obj, Kernel) and obj.name:
                    found.setdefault(obj.name, obj)
    return found


def _kernel_for_or_none(name: str):
    try:
        return _kernel_for(name)
    except wgc.KernelNotFoundError:
        return None


def _kernel_for(name: str):
    image = importlib.import_module("wgcompute.kernels.image.image")
    reduce = importlib.import_module("wgcompute.kernels.reduce.reduce")
    matmul = importlib.import_module("wgcompute.kernels.matmul.matmul")
    surface = importlib.import_module("wgcompute.surface")
    arrayops = importlib.import_module("wgcompute.kernels.elementwise.arrayops")
    cast = importlib.import_module("wgcompute.kernels.elementwise.cast")
    internal = {k.name: k for k in (image._PASS_X, image._PASS_Y, image._PASS_Y_UNSHARP,
                                    matmul._ToF16(), surface._TO_RGBA8, cast.ASTYPE_CHECK,
                                    *arrayops._OPS.values())}
    if name in internal:
        return internal[name]
    programs = _program_objects()
    if name in programs:
        return programs[name]
    if "." in name:  # a full reduction's steps
        op, step = name.split(".")
        return reduce._steps(registry.get(op))[step]
    return registry.get(name)


@pytest.mark.slow
def test_every_builtin_shader_agrees_with_its_kernel():
    """Reflection of each rendered built-in shader must find the entry point the pipeline
    uses, the inputs read-only and the output read-write at bindings 0..n in the kernel's
    order, and the uniform struct the kernel packs, field by field."""
    _exercise_every_builtin()
    entries = list(wgc.current_device().pipelines.items())
    kernels = {key.kernel for key, _ in entries}
    assert len(kernels) >= 30 and len(entries) >= 100  # every family, many keys
    limit = wgc.device_info()["limits"]["max-compute-invocations-per-workgroup"]
    problems = []
    names = set(registry.names())
    for key, c in entries:
        if key.kernel not in names and _kernel_for_or_none(key.kernel) is None:
            # a program an array-namespace op makes per call (linalg, sort steps): its
            # bindings are its op's own, checked by that family's tests against numpy
            continue
        k = _kernel_for(key.kernel)
        if key.kernel == "elementwise_fused":  # one program per expression DAG, in its key
            from wgcompute.kernels.elementwise.fused import fused_kernel

            k = fused_kernel(dict(key.constants)["dag"])
        if isinstance(k, registry.CustomKernel):
            continue  # a user's kernel is described by its shader (read at registration)
        r = reflect.reflect(c.source)
        entry = r.compute_entry(k.entry_point)
        x, y, z = entry.workgroup_size
        if x * y * z > limit:
            problems.append(f"{key}: workgroup {entry.workgroup_size} over {limit}")
        if k.name in ("elementwise_add", "scale", "copy", "sum", "softmax", "sum.partial"):
            if entry.workgroup_size != (k.workgroup_size, 1, 1):  # their grids divide by it
                problems.append(f"{key}: @workgroup_size {entry.workgroup_size}, kernel "
                                f"launches for {k.workgroup_size}")
        storage = [b for b in r.bindings if b.space == "storage"]
        outs = getattr(k, "outs", (k.output,))  # a fused program writes several outputs
        want = [(i, n, "read_write" if i in key.in_place else "read")
                for i, n in enumerate(k.inputs)] + [(len(k.inputs) + j, o, "read_write")
                                                    for j, o in enumerate(outs)]
        slots = len(want)  # (the uniform's binding comes after them all)
        if dict(key.constants).get("has_bias") is False:  # a product without its bias: the
            want = [w for w in want if w[1] != "bias"]  # shader leaves the bias slot out
        got = [(b.binding, b.name, b.access) for b in storage]
        if got != want:
            problems.append(f"{key}: storage bindings {got}, kernel declares {want}")
        uniforms = [b for b in r.bindings if b.space == "uniform"]
        fields = tuple((f.name, str(f.type)) for f in uniforms[0].fields) if uniforms else ()
        if fields != tuple(c.uniform_fields):
            problems.append(f"{key}: uniform {fields}, kernel packs {c.uniform_fields}")
        if uniforms and uniforms[0].binding != slots:
            problems.append(f"{key}: uniform at @binding({uniforms[0].binding})")
        if any(b.group != 0 for b in r.bindings):
            problems.append(f"{key}: a binding outside @group(0)")
    assert not problems, "\n".join(problems)
