"""Linear layers reading the same input merged into one product (ml/fuse_linear.py's
merge_siblings: an attention block's query, key and value projections as BERT exports them),
each layer's output a view of its columns: against onnxruntime, the groups that must not merge,
and the nodes it replaced where the kernel does not take the operands."""

import numpy as np
import pytest

import wgcompute as wgc

onnx = pytest.importorskip("onnx", reason="onnx and onnxruntime (the reference): "
                                          "pip install 'wgcompute[ml]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

K = 48


class _Graph:
    def __init__(self, seed=0):
        self.rng, self.nodes, self.inits, self.k = np.random.default_rng(seed), [], [], 0
        # x through Erf, an operator only the interpreter runs (so the model is interpreted,
        # as BERT is for its integer inputs), which the layers then read
        self.x = self.op("Erf", "x")

    def const(self, value, dtype=np.float32):
        self.k += 1
        name = f"c{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op, *ins, **attrs):
        self.k += 1
        out = f"v{self.k}"
        self.nodes.append(helper.make_node(op, list(ins), [out], name=f"{op}_{self.k}", **attrs))
        return out

    def linear(self, x, n, k=K, act=None):
        y = self.op("Add", self.op("MatMul", x, self.const(self.rng.standard_normal((k, n)) / 8)),
                    self.const(self.rng.standard_normal(n)))
        return self.op(act, y) if act else y

    def model(self, outs, rank=3, k=K, out_rank=None):
        dims = [f"d{i}" for i in range(rank - 1)]
        out_dims = [f"o{i}" for i in range(out_rank or rank)]
        graph = helper.make_graph(
            self.nodes, "siblings", [helper.make_tensor_value_info("x", T.FLOAT, dims + [k])],
            [helper.make_tensor_value_info(o, T.FLOAT, out_dims) for o in outs], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def _check(m, x, dtype="f32", tol=1e-5):
    model = wgc.ml.load_onnx(m, dtype=dtype)
    assert model.path == "interpreted"
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for xv in (x, (0.5 * x - 0.25).astype(x.dtype)):  # the second call of a shape: replayed
        for got, ref in zip(model.run({"x": xv}), sess.run(None, {"x": xv}), strict=True):
            assert got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
    return model


def _parts(model):
    return [n.attrs["parts"] for n in model.graph.nodes if "parts" in n.attrs]


def test_query_key_value_become_one_product():
    """Three projections of x, their heads split by Reshape and Transpose, as BERT's."""
    g = _Graph()
    heads = g.const([0, 0, 4, 8], np.int64)
    outs = [g.op("Transpose", g.op("Reshape", g.linear(g.x, 32), heads), perm=[0, 2, 1, 3])
            for _ in range(3)]
    model = _check(g.model(outs, out_rank=4), np.random.default_rng(1).standard_normal((2, 7, K))
                   .astype(np.float32))
    assert _parts(model) == [[32, 32, 32]]


def test_widths_may_differ_and_outputs_may_be_read_twice():
    g = _Graph(1)
    a, b, c = g.linear(g.x, 40), g.linear(g.x, 16), g.linear(g.x, 8)
    both = g.op("Add", g.op("ReduceSum", a, g.const([-1], np.int64)),
                g.op("ReduceSum", b, g.const([-1], np.int64)))  # (3, 5, 1)
    model = _check(g.model([a, both, c]), np.random.default_rng(2).standard_normal((3, 5, K))
                   .astype(np.float32))
    assert _parts(model) == [[40, 16, 8]]


def test_activations_and_inputs_group_them():
    """Only layers of the same x, K and activation merge: two relu layers of x, two plain
    ones of x, and one of another input stay in their groups."""
    g = _Graph(2)
    y = g.op("Sigmoid", g.x)
    outs = [g.linear(g.x, 24, act="Relu"), g.linear(g.x, 16), g.linear(g.x, 24, act="Relu"),
            g.linear(g.x, 8), g.linear(y, 12)]
    model = _check(g.model(outs), np.random.default_rng(3).standard_normal((4, K))
                   .astype(np.float32).reshape(1, 4, K))
    assert sorted(_parts(model)) == [[16, 8], [24, 24]]


def test_f16_model():
    if "shader-f16" not in wgc.device_info()["features"]:
        pytest.skip("adapter lacks shader-f16")
    g = _Graph(3)
    outs = [g.linear(g.x, 32) for _ in range(3)]
    model = _check(g.model(outs), np.random.default_rng(4).standard_normal((2, 9, K))
                   .astype(np.float32), dtype="f16", tol=1e-2)
    assert _parts(model) == [[32, 32, 32]]


def test_operands_the_kernel_does_not_take_run_the_layers_it_replaced():
    """x of one dimension (the product would add a row): each layer as it was exported."""
    g = _Graph(4)
    outs = [g.linear(g.x, 20) for _ in range(2)]
    model = _check(g.model(outs, rank=1), np.random.default_rng(5).standard_normal(K)
                   .astype(np.float32))
    assert _parts(model) == [[20, 20]]
