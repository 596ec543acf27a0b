"""What the differential tests share: an ONNX graph under construction (constants and nodes
named in order), onnxruntime's session of it (the reference), and a run of functions in
threads that start together."""

from __future__ import annotations

import threading

import numpy as np


class OnnxGraph:
    """Nodes and initializers of a graph being built; ``rng`` draws the constants."""

    def __init__(self, rng):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng, self.nodes, self.inits, self.k = rng, [], [], 0

    def const(self, value, dtype=np.float32) -> str:
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(self.numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def model(self, name: str, inputs, outputs, opset: int, ir_version: int):
        """The checked model of the graph: ``inputs`` and ``outputs`` (name, shape) pairs of
        float tensors (a shape's names are symbolic dimensions)."""
        import onnx

        h = self.helper
        graph = h.make_graph(
            self.nodes, name,
            [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, sh) for n, sh in inputs],
            [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, sh) for n, sh in outputs],
            self.inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        m.ir_version = ir_version
        onnx.checker.check_model(m)
        return m

    def op(self, op: str, *ins: str, **attrs) -> str:
        self.k += 1
        out = f"v{self.k}"
        self.nodes.append(self.helper.make_node(op, list(ins), [out], name=f"{op}_{self.k}",
                                                **attrs))
        return out


def reference(model):
    """onnxruntime's CPU session of ``model`` with its basic graph optimizations only: its
    extended ones broke a valid graph of linear layers and an attention (onnxruntime 1.32:
    "Node input 'v3' is not a graph input, initializer, or output of a previous node")."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def assert_near_reference(model, sess, onnx_model, x, what: str, tol: float = 1e-4) -> None:
    """wgcompute's ``model`` run on input ``x`` against ``sess`` (``reference(onnx_model)``):
    every output of the same shape and within ``tol`` relative to its largest value
    (``what`` names the case in a failure)."""
    want = sess.run(None, {"x": x})
    names = [o.name for o in onnx_model.graph.output]
    for name, got, w in zip(names, model.run({"x": x}), want, strict=True):
        assert got.shape == w.shape, name
        np.testing.assert_allclose(got, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())),
                                   err_msg=f"{name} of {what}")


def calls_near_reference(onnx_model, shapes, seed: int, what: str, tol: float = 1e-4,
                         **load) -> None:
    """``onnx_model`` loaded by wgcompute (``load``: load_onnx's options) and called on a
    random input of each of ``shapes`` in turn (a shape seen before replays), each call
    against onnxruntime's (``assert_near_reference``)."""
    import wgcompute as wgc

    model = wgc.ml.load_onnx(onnx_model, **load)
    sess = reference(onnx_model)
    rng = np.random.default_rng(seed)
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        assert_near_reference(model, sess, onnx_model, x, f"{what}, input {shape}", tol)


def in_threads(fn, n: int, timeout: float = 120) -> list:
    """``fn(i)`` for i in range(n), each in a thread of its own, all released at once; their
    results in order (a thread that does not finish within ``timeout`` s fails the test)."""
    results: list = [None] * n
    start = threading.Barrier(n)

    def work(i):
        start.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    return results


class held_copies:
    """``with held_copies(nbytes):`` automatic fusion holds strided copies (transposes) of
    results from ``nbytes`` up (0: of every size, as the tests of reading them in place need
    on their small data; None: its default), as it was on leaving."""

    def __init__(self, nbytes: int | None):
        self.nbytes = nbytes

    def __enter__(self):
        from wgcompute import _fusion_auto

        self.old = _fusion_auto.HOLD_BYTES
        if self.nbytes is not None:
            _fusion_auto.HOLD_BYTES = self.nbytes
        return self

    def __exit__(self, *exc):
        from wgcompute import _fusion_auto

        _fusion_auto.HOLD_BYTES = self.old
