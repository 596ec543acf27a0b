"""A small program written against wgcompute's documented API. tests/test_typing.py has
pyright and mypy check it (each ``assert_type`` is verified by both) and runs it."""

from __future__ import annotations

from typing import assert_type

import numpy as np
import onnx
from onnx import TensorProto, helper

import wgcompute as wgc


def buffers_and_operators() -> None:
    a = wgc.buffer([1.0, 2.0, 3.0, 4.0], shape=(2, 2), dtype="f32")
    b = wgc.from_numpy(np.ones((2, 2), dtype=np.float32))
    assert_type(a, wgc.Buffer)
    assert_type(b, wgc.Buffer)
    assert_type(wgc.empty((2, 2), "f32"), wgc.Buffer)
    assert_type(wgc.buffer_zeros((2, 2), "f32"), wgc.Buffer)

    assert_type(a + b, wgc.Buffer)
    assert_type(a - b, wgc.Buffer)
    assert_type(a * b, wgc.Buffer)
    assert_type(a / b, wgc.Buffer)
    assert_type(a * 2.0, wgc.Buffer)
    assert_type(2.0 * a, wgc.Buffer)
    assert_type(a ** 2, wgc.Buffer)
    assert_type(-a, wgc.Buffer)
    assert_type(abs(a), wgc.Buffer)
    assert_type(a @ b, wgc.Buffer)
    assert_type(a < b, wgc.Buffer)
    assert_type(a == b, wgc.Buffer)
    c = a.copy()
    c += b
    assert_type(c, wgc.Buffer)
    assert_type(a.T, wgc.Buffer)
    assert_type(a[0], wgc.Buffer)
    assert_type(a.reshape(4), wgc.Buffer)
    assert_type(wgc.add(a, b), wgc.Buffer)
    assert_type(wgc.matmul(a, b), wgc.Buffer)
    assert_type(wgc.relu(a), wgc.Buffer)
    for row in a:
        assert_type(row, wgc.Buffer)

    assert_type(wgc.sum(b), wgc.Buffer)
    assert_type(wgc.sum(b, axis=0, keepdims=True), wgc.Buffer)
    assert_type(wgc.max(b), wgc.Buffer)
    assert_type(wgc.min(b), wgc.Buffer)
    assert_type(wgc.mean(b), wgc.Buffer)
    assert_type(wgc.reduce_sum(b, axis=None), wgc.Buffer)
    assert_type(wgc.argmax(b), wgc.Buffer)
    assert_type(b.sum(), wgc.Buffer)
    assert_type(b.max(axis=0), wgc.Buffer)

    assert_type(a.to_numpy(), np.ndarray)
    assert_type(a.shape, tuple[int, ...])
    np.testing.assert_array_equal((a @ b).to_numpy(), a.to_numpy() @ b.to_numpy())
    assert wgc.read_list(wgc.sum(b, axis=-1)) == [2.0, 2.0]
    a.free()


def commands() -> None:
    x = wgc.from_numpy(np.ones(1000, np.float32))
    y = wgc.empty((1000,), "f32")
    cmd = wgc.run_kernel_async("scale", [x], y, {"scalar": 2.0})
    assert_type(cmd, wgc.Command[wgc.Buffer])
    out = cmd.wait()
    assert_type(out, wgc.Buffer)
    assert out.to_numpy()[0] == 2.0
    done = wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [x], "output": y})
    assert_type(done.wait(), "wgc.Buffer | None")
    assert_type(wgc.run_kernel("relu", [x], y), wgc.Buffer)
    assert_type(x.read_async().wait(), np.ndarray)


def pipelines() -> None:
    x = wgc.from_numpy(np.linspace(-1, 1, 8, dtype=np.float32))
    y = wgc.empty((8,), "f32")
    z = wgc.empty((8,), "f32")
    p = (wgc.pipeline("demo")
         .add(kernel="scale", inputs=[x], output=y, params={"scalar": 4.0})
         .add(kernel="relu", inputs=[y], output=z))
    assert_type(p, wgc.Pipeline)
    cmd = p.submit()
    assert_type(cmd, wgc.Command[None])
    cmd.wait()
    assert np.allclose(z.to_numpy(), np.maximum(x.to_numpy() * 4, 0))
    wgc.free_pipeline(p)


def streams() -> None:
    s = wgc.create_stream("work")
    assert_type(s, wgc.Stream)
    x = s.upload(np.linspace(-1, 1, 1000, dtype=np.float32))
    assert_type(x, wgc.Buffer)
    y = wgc.empty(1000, "f32")
    run = s.run_kernel("relu", [x], y)
    assert_type(run.wait(), wgc.Buffer)
    result = s.download(y)
    ev = s.record_event()
    assert_type(ev, wgc.Event)
    s.sync()
    assert_type(result.wait(), np.ndarray)
    assert result.wait().min() == 0.0


def inference() -> None:
    node = helper.make_node("Relu", ["input"], ["output"])
    graph = helper.make_graph([node], "relu",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(proto)
    model = wgc.ml.load_onnx(proto.SerializeToString())
    assert_type(model, wgc.ml.Model)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(model(x), np.maximum(x, 0))
    model.free()


def dask_arrays() -> None:
    import dask.array as da

    a = np.linspace(-1, 1, 64, dtype=np.float32)
    x = da.concatenate([da.from_array(a[:32]), da.from_array(a[32:])])  # two chunks
    y = wgc.dask.map_blocks("relu", x)
    assert_type(y, da.Array)
    np.testing.assert_array_equal(y.compute(), np.maximum(a, 0))
    assert_type(wgc.dask.sum(x), da.Array)


if __name__ == "__main__":
    buffers_and_operators()
    commands()
    pipelines()
    streams()
    inference()
    dask_arrays()
    print("ok")
