"""Every public function's bad inputs raise a WgComputeError subclass naming the argument
and what was expected; nothing is silently cast or truncated; no raw wgpu/TypeError leaks."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.runtime import current_device as get_device


def test_error_tree():
    for cls in (wgc.ArgumentError, wgc.ShapeError, wgc.DtypeError, wgc.UnsupportedDtypeError,
                wgc.KernelNotFoundError, wgc.ShaderCompileError, wgc.BufferFreedError,
                wgc.DeviceError, wgc.CommandFailedError, wgc.TimeoutError):
        assert issubclass(cls, wgc.WgComputeError)
    assert issubclass(wgc.UnsupportedDtypeError, wgc.DtypeError)
    # the builtin families too, so `except ValueError` / `except KeyError` keep working
    assert issubclass(wgc.ShapeError, ValueError)
    assert issubclass(wgc.DtypeError, TypeError)
    assert issubclass(wgc.KernelNotFoundError, KeyError)


# -- values that a dtype cannot hold exactly -------------------------------------------------
@pytest.mark.parametrize("data,dt,match", [
    ([1.5], "s32", "not whole numbers"),
    ([2**31], "s32", "out of range for s32"),
    ([-(2**31) - 1], "s32", "out of range for s32"),
    ([256], "u8", r"out of range for u8 \(0..255\)"),
    ([-1], "u8", "out of range for u8"),
    ([-1], "u32", "out of range for u32"),
    ([2**32], "u32", "out of range for u32"),
    ([2**63], "s64", "out of range for s64"),
    ([float("nan")], "s32", "not whole numbers"),
    ([float("inf")], "u32", "not whole numbers"),
    ([1e6], "f16", "out of range for f16"),
    ([1e40], "f32", "out of range for f32"),
    ([2**24 + 1], "f32", "cannot be stored exactly as f32"),
    (np.array([0.5, 1.0]), "s64", "not whole numbers"),
    (np.array([-3], np.int64), "u32", "out of range for u32"),
    (np.array([300], np.int32), "u8", "out of range for u8"),
    (np.array([2**40], np.int64), "s32", "out of range for s32"),
])
def test_inexact_values_are_errors_not_casts(data, dt, match):
    with pytest.raises(wgc.DtypeError, match=match):
        wgc.buffer(data, dtype=dt)


def test_seed_example_float_into_s32():
    with pytest.raises(wgc.DtypeError, match=r"data: .*1\.5.*s32"):
        wgc.buffer([1.5], dtype="s32")


def test_whole_floats_and_exact_ints_are_accepted():
    assert wgc.buffer([1.0, -2.0], dtype="s32").tolist() == [1, -2]
    assert wgc.buffer([2**24], dtype="f32").tolist() == [float(2**24)]
    assert wgc.buffer([float("nan")], dtype="f32").to_numpy()[0] != 0  # NaN stays NaN


@pytest.mark.parametrize("bad", ["f8", "int", "float128", "", "F32"])
def test_bad_dtype_names(bad):
    with pytest.raises(wgc.DtypeError, match="dtype: unknown dtype"):
        wgc.buffer([1], dtype=bad)
    with pytest.raises(wgc.DtypeError, match="dtype"):
        wgc.buffer_zeros((2,), bad)
    with pytest.raises(wgc.DtypeError, match="dtype"):
        wgc.empty((2,), bad)
    with pytest.raises(wgc.DtypeError, match="dtype"):
        wgc.buffer_from_binary(b"\0" * 4, (1,), bad)


@pytest.mark.parametrize("bad", [3.5, object(), [1], np.clongdouble, np.dtype("U3")])
def test_bad_dtype_objects(bad):
    with pytest.raises(wgc.DtypeError, match="dtype"):
        wgc.buffer([1], dtype=bad)


def test_numpy_dtype_without_equivalent():
    for a in (np.array([1], np.longdouble), np.array(["x"]), np.array([1], "datetime64[s]")):
        with pytest.raises(wgc.DtypeError, match="no wgcompute equivalent"):
            wgc.from_numpy(a)


# -- wrong types and shapes at buffer creation -------------------------------------------------
@pytest.mark.parametrize("data", [None, "abc", {"a": 1}, 3j, object()])
def test_buffer_data_of_wrong_type(data):
    with pytest.raises((wgc.ArgumentError, wgc.DtypeError), match="data"):
        wgc.buffer(data)


def test_buffer_data_elements_must_be_numbers():
    with pytest.raises(wgc.DtypeError, match="element 'a'"):
        wgc.buffer([1, "a"])
    with pytest.raises(wgc.DtypeError, match="element None"):
        wgc.buffer([None])


def test_ragged_lists():
    with pytest.raises(wgc.ShapeError, match="ragged"):
        wgc.buffer([[1, 2], [3]])


def test_shape_must_match_data():
    with pytest.raises(wgc.ShapeError, match=r"shape: \(2,\) holds 2 elements but data has 3"):
        wgc.buffer([1, 2, 3], shape=(2,))


@pytest.mark.parametrize("shape", [(-1,), (2.0,), "3", (True,), None, (2, None), 1.5])
def test_bad_shapes(shape):
    with pytest.raises(wgc.ShapeError, match="shape: expected a tuple of non-negative ints"):
        wgc.buffer_zeros(shape)


def test_bytes_must_be_whole_items():
    with pytest.raises(wgc.ShapeError, match="5 bytes is not a whole number of f32 items"):
        wgc.buffer(b"\0" * 5, dtype="f32")


def test_too_large_for_the_adapter():
    with pytest.raises(wgc.DeviceError, match="max-buffer-size"):
        wgc.buffer_zeros((2**40,), "f32")


def test_facade_wrong_types():
    for fn in (wgc.read, wgc.read_list, wgc.read_binary, wgc.shape, wgc.dtype, wgc.size,
               wgc.free, wgc.to_numpy):
        with pytest.raises(wgc.ArgumentError, match="buf: expected a wgc.Buffer, got list"):
            fn([1.0])
    with pytest.raises(wgc.ArgumentError, match="array: expected a numpy array"):
        wgc.from_numpy([1, 2])
    with pytest.raises(wgc.ArgumentError, match="bufs"):
        wgc.free_many(3)
    with pytest.raises(wgc.ArgumentError, match="bufs"):
        wgc.free_many(wgc.buffer([1.0]))
    with pytest.raises(wgc.ArgumentError, match="data: expected"):
        wgc.buffer([1.0]).write("abc")


def test_label_must_be_a_string():
    for make in (lambda: wgc.buffer([1.0], label=5), lambda: wgc.empty((1,), label=b"x"),
                 lambda: wgc.buffer_zeros((1,), "f32", label=3.0)):
        with pytest.raises(wgc.ArgumentError, match="label: expected a str"):
            make()


def test_free_many_checks_all_before_freeing_any():
    a = wgc.buffer([1.0])
    with pytest.raises(wgc.ArgumentError, match=r"bufs\[1\]"):
        wgc.free_many([a, None])
    assert not a.freed


# -- kernels --------------------------------------------------------------------------------
@pytest.fixture
def f3():
    return wgc.buffer([1.0, 2.0, 3.0])


def test_unknown_kernel_suggests_names(f3):
    with pytest.raises(wgc.KernelNotFoundError, match="elementwise_ad.*did you mean "
                                                       "elementwise_add"):
        wgc.run_kernel("elementwise_ad", [f3, f3])
    with pytest.raises(wgc.KernelNotFoundError, match="no kernel named 'nope'"):
        wgc.kernel_info("nope")
    with pytest.raises(wgc.KernelNotFoundError):
        wgc.submit({"op": "run_kernel", "kernel": "nope", "inputs": [f3]})
    with pytest.raises(wgc.ArgumentError, match="kernel: expected a kernel name"):
        wgc.run_kernel(3, [f3, f3])


def test_shape_mismatch_names_both_shapes(f3):
    b = wgc.buffer([1.0, 2.0])
    with pytest.raises(wgc.ShapeError,
                       match=r"x1 is \(3,\) and x2 is \(2,\); they do not broadcast"):
        wgc.add(f3, b)
    with pytest.raises(wgc.ShapeError, match=r"\(3,\).*\(2,\)"):
        wgc.add(f3, f3, wgc.empty((2,)))
    with pytest.raises(wgc.ShapeError, match=r"\(3,\).*\(3, 1\)"):
        wgc.relu(f3, wgc.empty((3, 1)))


def test_dtype_mismatch(f3):
    s = wgc.buffer([1, 2, 3], dtype="s32")
    # the array namespace's promotion table: float32 and int32 have none
    with pytest.raises(wgc.DtypeError, match="x1 is float32 and x2 is int32, which have no "
                                             "promoted dtype"):
        wgc.add(f3, s)
    with pytest.raises(wgc.DtypeError, match="x1 is float32 and x2 is int32"):
        wgc.add(f3, s, wgc.empty((3,)))
    with pytest.raises(wgc.DtypeError, match="input 'a' is f32 and input 'b' is s32"):
        wgc.run_kernel("elementwise_add", [f3, s])
    with pytest.raises(wgc.DtypeError, match="input 'b' is s32 and output is f32"):
        wgc.run_kernel("elementwise_add", [f3, s], wgc.empty((3,)))
    with pytest.raises(wgc.DtypeError, match="add: out is s32; the result is f32"):
        wgc.add(f3, f3, wgc.empty((3,), "s32"))


def test_unsupported_dtype_for_kernel():
    with pytest.raises(wgc.DtypeError, match="relu: dtype u32 is not supported"):
        wgc.relu(wgc.buffer([1], dtype="u32"))
    with pytest.raises(wgc.DtypeError, match="matmul: dtype s32 is not supported"):
        wgc.run_kernel("matmul", [wgc.buffer_zeros((2, 2), "s32"), wgc.buffer_zeros((2, 2), "s32")])


def test_matmul_shapes():
    with pytest.raises(wgc.ShapeError, match=r"x1 is \(3, 4\) and x2 is \(5, 2\); the "
                                             r"contracted dimensions 4 and 5 differ"):
        wgc.matmul(wgc.buffer_zeros((3, 4)), wgc.buffer_zeros((5, 2)))
    with pytest.raises(wgc.ShapeError, match=r"out is \(2, 3\), expected \(3, 2\)"):
        wgc.matmul(wgc.buffer_zeros((3, 4)), wgc.buffer_zeros((4, 2)), wgc.buffer_zeros((2, 3)))
    with pytest.raises(wgc.ShapeError, match="0-d"):
        wgc.matmul(wgc.buffer_zeros(()), wgc.buffer_zeros((3,)))
    with pytest.raises(wgc.ShapeError, match=r"out is \(1,\), expected \(\)"):  # a dot product
        wgc.matmul(wgc.buffer_zeros((3,)), wgc.buffer_zeros((3,)), wgc.buffer_zeros((1,)))


def test_unknown_and_missing_params(f3):
    with pytest.raises(wgc.ArgumentError, match="relu: unknown param.*slop; expected slope"):
        wgc.run_kernel("relu", [f3], None, {"slop": 0.1})
    with pytest.raises(wgc.ArgumentError, match="unknown param.*expected none"):
        wgc.run_kernel("elementwise_add", [f3, f3], None, {"alpha": 1})
    with pytest.raises(wgc.ArgumentError, match="param 'scalar' is required"):
        wgc.run_kernel("scale", [f3], None, {})
    with pytest.raises(wgc.ArgumentError, match="params must be a dict"):
        wgc.run_kernel("relu", [f3], None, [0.1])


@pytest.mark.parametrize("value", ["2", None, [2], True, 1j])
def test_param_must_be_a_number(f3, value):
    with pytest.raises(wgc.ArgumentError, match="param 'scalar' must be a number"):
        wgc.scale(f3, value)


def test_param_values_out_of_range_or_inexact():
    s = wgc.buffer([1, 2], dtype="s32")
    with pytest.raises(wgc.ArgumentError, match="out of range for s32"):
        wgc.scale(s, 2**40)
    with pytest.raises(wgc.ArgumentError, match="not whole numbers"):
        wgc.scale(s, 2.5)
    with pytest.raises(wgc.ArgumentError, match="out of range for u8"):
        wgc.scale(wgc.buffer([1], dtype="u8"), 256)
    with pytest.raises(wgc.ArgumentError, match="out of range for f16"):
        wgc.scale(wgc.buffer([1.0], dtype="f16"), 1e6)
    with pytest.raises(wgc.DtypeError, match="slope=0.5 needs a float dtype"):
        wgc.relu(s, slope=0.5)
    with pytest.raises(wgc.ArgumentError, match="1000000.0"):  # past f16's range
        wgc.relu(wgc.buffer([1.0], dtype="f16"), slope=1e6)
    with pytest.raises(wgc.ArgumentError, match="1e\\+300"):
        wgc.relu(wgc.buffer([1.0]), slope=1e300)


def test_wrong_input_count(f3):
    with pytest.raises(wgc.ArgumentError, match="takes 2 input"):
        wgc.run_kernel("elementwise_add", [f3])
    with pytest.raises(wgc.ArgumentError, match="takes 2 input"):
        wgc.run_kernel("elementwise_add", [f3], wgc.empty((3,)))
    with pytest.raises(wgc.ArgumentError, match="takes 1 input"):
        wgc.run_kernel("relu", [f3, f3], wgc.empty((3,)))


def test_inputs_and_outputs_of_wrong_type(f3):
    with pytest.raises(wgc.ArgumentError, match="inputs must be a list"):
        wgc.run_kernel("elementwise_add", f3)
    with pytest.raises(wgc.ArgumentError, match="inputs must be a list"):
        wgc.run_kernel("elementwise_add", f3, wgc.empty((3,)))
    with pytest.raises(wgc.ArgumentError, match="input 'b': expected a wgc.Buffer, got list"):
        wgc.run_kernel("elementwise_add", [f3, [1.0, 2.0, 3.0]])
    with pytest.raises(wgc.ArgumentError, match="x1: expected an array of this namespace"):
        wgc.add(np.ones(3, np.float32), f3)
    with pytest.raises(wgc.ArgumentError, match="output: expected a wgc.Buffer"):
        wgc.run_kernel("elementwise_add", [f3, f3], [0.0, 0.0, 0.0])


def test_freed_buffers_in_kernels(f3):
    dead = wgc.buffer([1.0, 2.0, 3.0])
    out = wgc.empty((3,))
    wgc.add(f3, dead, out)  # bound once, so the next call hits the bind cache
    dead.free()
    with pytest.raises(wgc.BufferFreedError, match="input 'b'"):
        wgc.add(f3, dead, out)
    with pytest.raises(wgc.BufferFreedError, match="output"):
        wgc.add(f3, f3, dead)
    with pytest.raises(wgc.BufferFreedError):
        wgc.run_kernel_async("relu", [dead])


def test_in_place_aliasing_is_refused_where_not_well_defined():
    sq = wgc.buffer([[1.0, 2.0], [3.0, 4.0]])
    other = wgc.buffer([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(wgc.ArgumentError, match="output is also input 'a'; matmul reads"):
        wgc.matmul(sq, other, sq)
    with pytest.raises(wgc.ArgumentError, match="output is also input 'a'; transpose"):
        wgc.run_kernel("transpose", [sq], sq)
    assert sq.tolist() == [[1.0, 2.0], [3.0, 4.0]]  # untouched


def test_commands_bad_arguments(f3):
    with pytest.raises(wgc.ArgumentError, match="cmd: expected a Command"):
        wgc.poll("x")
    with pytest.raises(wgc.ArgumentError, match="no command with id"):
        wgc.wait(10**12)
    with pytest.raises(wgc.ArgumentError, match="spec: expected a dict"):
        wgc.submit([1])
    with pytest.raises(wgc.ArgumentError, match="op 'nope'"):
        wgc.submit({"op": "nope"})
    with pytest.raises(wgc.ArgumentError, match="unknown key"):
        wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [f3], "x": 1})
    with pytest.raises(wgc.ArgumentError, match="inputs=\\[source\\]"):
        wgc.submit({"op": "copy_buffer", "inputs": 5, "output": f3})
    cmd = wgc.run_kernel_async("relu", [f3])
    with pytest.raises(wgc.ArgumentError, match="timeout"):
        cmd.wait(-1)
    cmd.wait()


def test_unsupported_dtype_error_names_the_missing_feature(monkeypatch):
    """Remove shader-f64/-int64/-f16 from the device's feature set for one test (the check reads it
    when compiling; the adapter cannot really lose the feature) and see the refusal."""
    dev = get_device()
    # compiled pipelines skip the check: set aside those of the two dtypes, restore after
    gated = {"f64", "s64", "f16"}
    saved = {k: c for k, c in dev.pipelines.items() if gated & set(k.dtypes)}
    for k in saved:
        dev.pipelines.pop(k, None)
    monkeypatch.setattr(dev, "features",
                        dev.features - {"shader-f64", "shader-int64", "shader-f16"})
    try:
        a = wgc.buffer([1.0, 2.0], dtype="f64")  # storing f64 still works
        assert a.tolist() == [1.0, 2.0]
        with pytest.raises(wgc.UnsupportedDtypeError, match="shader-f64") as e:
            wgc.run_kernel("elementwise_add", [a, a])
        assert e.value.feature == "shader-f64"
        assert "storing and copying f64 still works" in str(e.value)
        assert isinstance(e.value, wgc.DtypeError)
        with pytest.raises(wgc.UnsupportedDtypeError, match="shader-int64"):
            wgc.relu(wgc.buffer([1], dtype="s64"), wgc.empty((1,), "s64"))
        with pytest.raises(wgc.UnsupportedDtypeError, match="shader-f16"):
            wgc.matmul(wgc.buffer_zeros((2, 2), "f16"), wgc.buffer_zeros((2, 2), "f16"))
    finally:
        monkeypatch.undo()
        for k in [k for k in dev.pipelines if gated & set(k.dtypes)]:
            dev.pipelines.pop(k)  # nothing compiled without the feature may stay
        dev.pipelines.update(saved)
    if "shader-f64" in dev.features:  # the real feature set is back
        assert wgc.add(a, a).tolist() == [2.0, 4.0]
    else:  # an adapter without f64 (wgpu's GL backend) refuses it for real
        with pytest.raises(wgc.UnsupportedDtypeError, match="shader-f64"):
            wgc.add(a, a)


def test_shader_compile_error_shows_numbered_source_and_message():
    src = ("@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
           "@compute @workgroup_size(64)\n"
           "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
           "    out[g.x] = undefined_thing;\n"
           "}\n")
    with pytest.raises(wgc.ShaderCompileError) as e:
        wgc.register_kernel("broken_kernel_for_test", src, bindings=[("out", "read_write")])
    msg = str(e.value)
    assert "broken_kernel_for_test" in msg
    assert "undefined_thing" in e.value.compiler_message  # the compiler's own words
    assert "   4 |     out[g.x] = undefined_thing;" in msg  # the source, numbered
    assert "   1 | @group(0)" in msg
    assert e.value.source == src
    assert "broken_kernel_for_test" not in wgc.kernels()


def test_no_raw_exception_escapes_the_public_api():
    """A sweep of odd calls: every one raises a WgComputeError, none a raw TypeError."""
    b = wgc.buffer([1.0])
    calls = [
        lambda: wgc.buffer(b"\0\0\0", dtype="f32"),
        lambda: wgc.buffer([[1], [[2]]]),
        lambda: wgc.buffer([1, 2], shape=(1, 3)),
        lambda: wgc.buffer_from_binary(b"\0" * 4, "x", "f32"),
        lambda: wgc.buffer_from_binary(None, (1,), "f32"),
        lambda: wgc.empty(None),
        lambda: wgc.add(b, None),
        lambda: wgc.add(None, b),
        lambda: wgc.scale(b, None),
        lambda: wgc.relu(b, slope=None),
        lambda: wgc.run_kernel("relu", None),
        lambda: wgc.run_kernel(None, [b]),
        lambda: wgc.run_kernel("relu", [b], None, 5),
        lambda: wgc.kernel_info(None),
        lambda: wgc.matmul(b, wgc.buffer([1.0, 2.0])),
        lambda: wgc.register_kernel(None, "x", bindings=[]),
        lambda: wgc.register_kernel("k_ok_name", "x", bindings=None),
        lambda: wgc.register_kernel("k_ok_name", "x", bindings=[("o", "read_write")],
                                    params=5),
        lambda: wgc.register_kernel("k_ok_name", "x", bindings=[("o", "read_write")],
                                    dtypes=5),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(wgc.WgComputeError):
            try:
                call()
            except wgc.WgComputeError:
                raise
            except Exception as e:  # noqa: BLE001 - reported with the call's index
                pytest.fail(f"call {i} raised raw {type(e).__name__}: {e}")
