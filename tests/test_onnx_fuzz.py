"""Random transformer-like ONNX graphs against onnxruntime: hypothesis builds graphs from linear
layers (MatMul + Add, with ReLU, Tanh, opset 20's Gelu or torch's erf form of it after them),
residual adds, LayerNormalization, products and softmaxes of activations (attention's scores,
scaled by a Div or a Mul, keys masked by an additive mask), heads split by Reshape and
Transpose, and Erf on the input (which keeps a model interpreted, as BERT's integer inputs do)
or not. Values the fusions would swallow are sometimes graph outputs too. Each model is loaded,
run twice (the second call of a shape replays) and compared with onnxruntime's CPU provider.

CI runs a fixed, derandomized set of graphs; ``WGCOMPUTE_FUZZ_EXAMPLES=300`` runs more."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx", reason="onnx and onnxruntime (the reference): "
                                          "pip install 'wgcompute[ml]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
from fuzz_helpers import OnnxGraph, calls_near_reference  # noqa: E402
from onnx import TensorProto as T  # noqa: E402

EXAMPLES = int(os.environ.get("WGCOMPUTE_FUZZ_EXAMPLES", "12"))
K, HEADS = 16, 2
LAYERS = ["linear", "linear_relu", "linear_tanh", "linear_gelu", "linear_erf_gelu", "residual",
          "layer_norm", "attention", "masked_attention", "heads", "scale"]


class _Graph(OnnxGraph):
    def linear(self, x, act=None):
        y = self.op("Add", self.op("MatMul", x, self.const(self.rng.standard_normal((K, K)) / 4)),
                    self.const(self.rng.standard_normal(K) / 4))
        if act == "erf_gelu":  # 0.5 * y * (1 + erf(y / sqrt(2))), as torch exports it
            e = self.op("Erf", self.op("Div", y, self.const(math.sqrt(2))))
            return self.op("Mul", self.op("Mul", y, self.op("Add", e, self.const(1.0))),
                           self.const(0.5))
        if act == "Gelu":
            return self.op("Gelu", y)
        return self.op(act, y) if act else y

    def layer(self, kind: str, x: str, other: str) -> str:
        if kind.startswith("linear"):
            act = {"linear": None, "linear_relu": "Relu", "linear_tanh": "Tanh",
                   "linear_gelu": "Gelu", "linear_erf_gelu": "erf_gelu"}[kind]
            return self.linear(x, act)
        if kind == "residual":
            return self.op("Add", x, other)
        if kind == "layer_norm":
            return self.op("LayerNormalization", x, self.const(1 + self.rng.standard_normal(K) / 8),
                           self.const(self.rng.standard_normal(K) / 8), axis=-1, epsilon=1e-5)
        if kind == "attention":  # softmax(x · otherᵀ / √K) · other
            scores = self.op("MatMul", x, self.op("Transpose", other, perm=[0, 2, 1]))
            scaled = self.op("Div", scores, self.const(math.sqrt(K))) if self.rng.random() < 0.5 \
                else self.op("Mul", scores, self.const(1 / math.sqrt(K)))
            return self.op("MatMul", self.op("Softmax", scaled, axis=-1), other)
        if kind == "masked_attention":  # keys masked out by the sign of a projection, added
            # as BERT's exports add (1 - mask) * -10000 to the scores
            key = self.op("Transpose", self.op("MatMul", other, self.const(
                self.rng.standard_normal((K, 1)))), perm=[0, 2, 1])  # (b, 1, s)
            masked = self.op("Mul", self.op("Cast", self.op("Less", key, self.const(-0.5)),
                                            to=T.FLOAT), self.const(-10000.0))
            scores = self.op("MatMul", x, self.op("Transpose", other, perm=[0, 2, 1]))
            scaled = self.op("Add", self.op("Mul", scores, self.const(1 / math.sqrt(K))), masked)
            return self.op("MatMul", self.op("Softmax", scaled, axis=-1), other)
        if kind == "heads":  # split into heads, attend per head, merge back
            shape = self.const([0, 0, HEADS, K // HEADS], np.int64)
            q, v = (self.op("Transpose", self.op("Reshape", t, shape), perm=[0, 2, 1, 3])
                    for t in (x, other))
            kt = self.op("Transpose", self.op("Reshape", other, shape), perm=[0, 2, 3, 1])
            s = self.op("Softmax", self.op("Mul", self.op("MatMul", q, kt),
                                           self.const(1 / math.sqrt(K // HEADS))), axis=-1)
            o = self.op("Transpose", self.op("MatMul", s, v), perm=[0, 2, 1, 3])
            return self.op("Reshape", o, self.const([0, 0, K], np.int64))
        if kind == "scale":
            return self.op("Mul", x, self.const(0.5))
        raise AssertionError(kind)

    def finish(self, outs):
        return self.model("fuzz", [("x", ["b", "s", K])], [(o, ["b", "s", K]) for o in outs],
                          opset=20, ir_version=9)


@st.composite
def graphs(draw):
    layers = [(draw(st.sampled_from(LAYERS)), draw(st.integers(0, 99)), draw(st.integers(0, 99)))
              for _ in range(draw(st.integers(1, 12)))]
    outputs = draw(st.lists(st.integers(0, 99), min_size=0, max_size=4))
    return draw(st.booleans()), layers, outputs, draw(st.integers(0, 2**16))


def _build(erf_input, layers, outputs, seed):
    g = _Graph(np.random.default_rng(seed))
    pool = [g.op("Erf", "x") if erf_input else g.op("Identity", "x")]
    for kind, a, b in layers:
        pool.append(g.layer(kind, pool[a % len(pool)], pool[b % len(pool)]))
    outs = list(dict.fromkeys([pool[-1]] + [pool[i % len(pool)] for i in outputs]))
    return g.finish(outs)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_random_transformer_graphs_match_onnxruntime(graph):
    # (the second call of a shape replays)
    calls_near_reference(_build(*graph), ((2, 5, K), (2, 5, K), (1, 3, K)), graph[-1],
                         str(graph))


@settings(max_examples=max(4, EXAMPLES // 2), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(graphs(), st.sampled_from(["f32", "mixed"]))
def test_random_graphs_in_f16_stay_near_onnxruntime(adapter_lacks, graph, precision):
    """The same graphs loaded with dtype="f16" (weights and activations stored as f16,
    arithmetic in f32; "mixed": products summed in f16 slices where they fill the GPU):
    within f16's error of onnxruntime's f32 (a few units of 2^-11 per operation)."""
    if adapter_lacks("f16"):
        pytest.skip(adapter_lacks("f16"))
    calls_near_reference(_build(*graph), ((2, 5, K),), graph[-1], f"{graph}, {precision}",
                         tol=3e-2, dtype="f16", precision=precision)
