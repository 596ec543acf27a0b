"""Bad inputs that once escaped as raw Python errors or were silently accepted, each pinned
by the call that showed it: every one raises a WgComputeError naming the argument."""

import math

import numpy as np
import pytest

import wgcompute as wgc


@pytest.fixture
def a():
    return wgc.from_numpy(np.arange(-4, 4, dtype=np.float32))


# -- params dicts with a key that is not a str ------------------------------------------------
NON_STR_KEYS = [{"scalar": 2.0, 1: 0}, {1: 0}, {None: 1, "scalar": 2.0}, {(1,): 2, "scalar": 1}]


@pytest.mark.parametrize("params", NON_STR_KEYS, ids=["mixed", "int", "None", "tuple"])
def test_params_with_non_str_keys(a, params):
    out = wgc.empty(a.shape)
    calls = [
        lambda: wgc.run_kernel("scale", [a], None, params),
        lambda: wgc.run_kernel("scale", [a], out, params),
        lambda: wgc.run_kernel_async("scale", [a], out, params),
        lambda: wgc.submit({"op": "run_kernel", "kernel": "scale", "inputs": [a],
                            "output": out, "params": params}),
        lambda: wgc.create_stream().run_kernel("scale", [a], out, params),
    ]
    for call in calls:
        with pytest.raises(wgc.ArgumentError, match=r"scale: params: key .* is not a str"):
            call()
    with pytest.raises(wgc.PipelineError, match=r"params: key .* is not a str"):
        wgc.pipeline().add(kernel="scale", inputs=[a], output=out, params=params)
    with pytest.raises(wgc.ArgumentError, match=r"params: key .* is not a str"):
        next(iter(wgc.stream_map("scale", [np.ones(4, np.float32)], depth=1, params=params)))
    # the same run with str keys still works (and the bind cache keeps working)
    good = {"scalar": 2.0}
    np.testing.assert_array_equal(wgc.run_kernel("scale", [a], out, good).to_numpy(),
                                  np.arange(-4, 4, dtype=np.float32) * 2)


def test_set_params_on_a_stage_over_an_empty_buffer():
    e = wgc.empty((0,))
    p = wgc.pipeline()
    p.add(kernel="scale", inputs=[e], params={"scalar": 2.0})
    p.set_params(0, scalar=3.0)  # nothing to launch: no params buffer to rewrite
    assert p.stages[0]["params"]["scalar"] == 3.0
    p.run()
    assert p.stages[0]["output"].shape == (0,)


# -- wgc.image -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [None, 3, b"x.png", ["x.png"], ""])
def test_image_load_refuses_non_paths(path):
    with pytest.raises(wgc.ArgumentError, match="path: "):
        wgc.image.load(path)


def test_image_save_checks_the_path_first():
    img = wgc.image.from_numpy(np.zeros((2, 2, 4), np.uint8))
    for path in (None, 5, b"x.png"):
        with pytest.raises(wgc.ArgumentError, match="path: expected a file path"):
            wgc.image.save(img, path)


def test_submit_stages_checks_its_arguments():
    img = wgc.image.from_numpy(np.zeros((4, 4, 4), np.uint8))
    stages = wgc.image.parse_pipeline("grayscale")
    with pytest.raises(wgc.ArgumentError, match="image: expected a wgc.Buffer, got ndarray"):
        wgc.image.submit_stages(np.zeros((4, 4, 4), np.uint8), stages)
    with pytest.raises(wgc.ArgumentError, match="stages: expected a list of wgc.image.Stage"):
        wgc.image.submit_stages(img, "grayscale")
    with pytest.raises(wgc.ArgumentError, match=r"stages\[0\]: expected a wgc.image.Stage"):
        wgc.image.submit_stages(img, ["grayscale"])
    cmd, out = wgc.image.submit_stages(img, stages)
    cmd.wait()
    assert out.shape == (4, 4, 4)


@pytest.mark.parametrize("size", [(-1, 4), (4, -1), (4,), (4, 4, 4), (2.5, 4), "44", 4,
                                  (True, 4)])
def test_resize_size_is_named(size):
    img = wgc.image.from_numpy(np.zeros((4, 4, 4), np.uint8))
    with pytest.raises(wgc.ArgumentError, match=r"resize: param 'size': expected \(height, "
                                                 r"width\)"):
        wgc.image.apply("resize", img, size=size)
    with pytest.raises(wgc.ArgumentError, match="param 'size'"):
        wgc.image.parse_pipeline(f"resize(size={size!r})")
    with pytest.raises(wgc.ArgumentError, match="preprocess: param 'size'"):
        wgc.image.apply("preprocess", img, size=size)


@pytest.mark.parametrize("w", ["[[1e999]]", "[[-1e999]]", "[[1e39]]", "[[0, 0, 0], [0, 1e999, 0], "
                                                                      "[0, 0, 0]]"])
def test_convolve2d_weights_must_be_finite(w):
    with pytest.raises(wgc.ArgumentError, match="convolve2d: weights must be finite"):
        wgc.image.parse_pipeline(f"convolve2d(weights={w})")


def test_to_uint8_refuses_non_numbers():
    for bad in (None, "abc", {"a": 1}, [[1], [1, 2]], np.array([1j])):
        with pytest.raises(wgc.ArgumentError, match="array: expected an array of numbers"):
            wgc.image.to_uint8(bad)
    with pytest.raises(wgc.ArgumentError, match="array: holds NaN"):
        wgc.image.to_uint8(np.array([0.5, np.nan]))
    assert wgc.image.to_uint8([0.0, 0.5, 1.0, 2.0, -np.inf]).tolist() == [0, 128, 255, 255, 0]


# -- timeouts: one check everywhere ----------------------------------------------------------
BAD_TIMEOUTS = [math.nan, math.inf, -math.inf, -1, -1e-9, True, False, "1", [1], 1e300,
                complex(1, 0)]


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_every_wait_refuses_the_same_bad_timeouts(a, timeout):
    s = wgc.create_stream()
    s.upload(np.ones(4, np.float32))
    waits = {
        "Command.wait": wgc.run_kernel_async("relu", [a]).wait,
        "Command.result": wgc.run_kernel_async("relu", [a]).result,
        "wgc.wait": lambda t: wgc.wait(wgc.run_kernel_async("relu", [a]), t),
        "read_async": a.read_async().wait,
        "write_async": a.write_async(np.zeros(8, np.float32)).wait,
        "Event.wait": s.record_event().wait,
        "Stream.sync": s.sync,
        "Stream.download": s.download(a).wait,
    }
    for name, wait in waits.items():
        with pytest.raises(wgc.ArgumentError, match="timeout: "):
            wait(timeout)
            pytest.fail(f"{name} accepted timeout={timeout!r}")
    s.sync()


def test_good_timeouts_still_work(a):
    cmd = wgc.run_kernel_async("relu", [a])
    cmd.wait(np.float32(30))  # a numpy number as a timeout, on a running command
    for t in (0, 0.0, 5, 2.5, np.float32(5), np.int64(5), None):  # a finished one: at once
        cmd.wait(t)


def test_empty_too_large_names_shape():
    with pytest.raises(wgc.DeviceError, match=r"^shape: .*max-buffer-size"):
        wgc.empty((2**40,))
    with pytest.raises(wgc.DeviceError, match=r"^shape: .*max-buffer-size"):
        wgc.buffer_zeros((2**40,), "f32")
