"""Copies: the copy_buffer op (encoder copy when small, the "copy" kernel from 1 MiB on) and
the copy kernel itself are bit-exact for every dtype, NaN payloads and ragged u8 included."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute import commands
from wgcompute.commands import SHADER_COPY_MIN

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "s32": np.int32,
          "s64": np.int64, "u32": np.uint32, "u8": np.uint8}


def random_bits(dt: str, n: int, rng) -> np.ndarray:
    """Arbitrary bit patterns (NaNs with payloads, infinities, denormals for floats)."""
    npd = np.dtype(DTYPES[dt])
    raw = rng.integers(0, 256, n * npd.itemsize, dtype=np.uint8)
    return raw.view(npd)


@pytest.mark.parametrize("shader_on_cpu", [False, True], ids=["adapter-policy", "shader"])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("nbytes", [0, 4, 1000, SHADER_COPY_MIN, SHADER_COPY_MIN * 3 + 24])
def test_copy_buffer_op_is_bit_exact(dt, nbytes, shader_on_cpu, rng, monkeypatch):
    # both paths on every adapter: the encoder copy, and the copy kernel from 1 MiB on
    if shader_on_cpu:
        monkeypatch.setattr(commands, "SHADER_COPY_GPU_ONLY", False)
    itemsize = np.dtype(DTYPES[dt]).itemsize
    n = nbytes // itemsize + (3 if dt == "u8" else 0)
    a = random_bits(dt, n, rng)
    src = wgc.from_numpy(a)
    dst = wgc.empty((n,), dt)
    wgc.submit({"op": "copy_buffer", "inputs": [src], "output": dst}).wait()
    assert dst.read() == a.tobytes()
    p = wgc.pipeline().add(op="copy_buffer", inputs=[src], output=wgc.empty((n,), dt))
    p.run()
    assert p.stages[0]["output"].read() == a.tobytes()


def test_copy_kernel_keeps_the_shape_of_its_output(rng):
    a = random_bits("f32", 12, rng).reshape(3, 4)
    out = wgc.run_kernel("copy", [wgc.from_numpy(a)], wgc.empty((4, 3), "f32"))
    assert out.read() == a.tobytes()
    assert out.shape == (4, 3)


def test_copy_mismatches_are_refused():
    a = wgc.buffer([1.0, 2.0])
    with pytest.raises(wgc.DtypeError, match="copy"):
        wgc.run_kernel("copy", [a], wgc.empty((2,), "s32"))
    with pytest.raises(wgc.ShapeError, match="output .3,. has 3"):
        wgc.run_kernel("copy", [a], wgc.empty((3,), "f32"))
    with pytest.raises(wgc.ShapeError):
        wgc.submit({"op": "copy_buffer", "inputs": [a], "output": wgc.empty((3,), "f32")})
