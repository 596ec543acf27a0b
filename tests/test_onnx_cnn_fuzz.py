"""Random convolutional ONNX graphs against onnxruntime: hypothesis builds graphs from 3×3 and
1×1 convolutions (with and without a bias, stride 1 or 2), depthwise 3×3 convolutions,
BatchNormalization (folded into the convolution before it where it can be), ReLU, Clip(0, 6)
and HardSwish, residual adds of values of one shape, max and average pooling, and a global
average pool with a linear layer at the end (or not), as MobileNet and ResNet are made. Values
the fusions would swallow are sometimes graph outputs too. Each model is loaded, run twice at
one batch size (the second call replays) and once at another, and compared with onnxruntime's
CPU provider.

CI runs a fixed, derandomized set of graphs; ``WGCOMPUTE_FUZZ_EXAMPLES=300`` runs more."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx", reason="onnx and onnxruntime (the reference): "
                                          "pip install 'wgcompute[ml]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
from fuzz_helpers import OnnxGraph, calls_near_reference  # noqa: E402

EXAMPLES = int(os.environ.get("WGCOMPUTE_FUZZ_EXAMPLES", "10"))
C = 8
LAYERS = ["conv3", "conv3_s2", "conv1", "conv1_nobias", "depthwise", "bn", "relu", "relu6",
          "hardswish", "residual", "maxpool", "avgpool"]


class _Graph(OnnxGraph):
    def conv(self, x, k, stride=1, group=1, bias=True):
        w = self.const(self.rng.standard_normal((C, C // group, k, k)) / (k * np.sqrt(C)))
        ins = [x, w] + ([self.const(self.rng.standard_normal(C) / 4)] if bias else [])
        return self.op("Conv", *ins, kernel_shape=[k, k], pads=[k // 2] * 4,
                       strides=[stride, stride], group=group)

    def layer(self, kind: str, x: str) -> str:
        if kind == "conv3":
            return self.conv(x, 3)
        if kind == "conv3_s2":
            return self.conv(x, 3, stride=2)
        if kind == "conv1":
            return self.conv(x, 1)
        if kind == "conv1_nobias":
            return self.conv(x, 1, bias=False)
        if kind == "depthwise":
            return self.conv(x, 3, group=C)
        if kind == "bn":
            r = self.rng
            return self.op("BatchNormalization", x, self.const(1 + r.standard_normal(C) / 4),
                           self.const(r.standard_normal(C) / 4),
                           self.const(r.standard_normal(C) / 4),
                           self.const(0.5 + r.random(C)), epsilon=1e-5)
        if kind == "relu":
            return self.op("Relu", x)
        if kind == "relu6":
            return self.op("Clip", x, self.const(0.0), self.const(6.0))
        if kind == "hardswish":
            return self.op("HardSwish", x)
        if kind == "maxpool":
            return self.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
        if kind == "avgpool":
            return self.op("AveragePool", x, kernel_shape=[3, 3], strides=[1, 1],
                           pads=[1, 1, 1, 1], count_include_pad=0)
        raise AssertionError(kind)

    def head(self, x: str) -> str:
        flat = self.op("Flatten", self.op("GlobalAveragePool", x))
        return self.op("Gemm", flat, self.const(self.rng.standard_normal((5, C)) / 4),
                       self.const(self.rng.standard_normal(5)), transB=1)

    def finish(self, outs, ranks):
        return self.model("cnn", [("x", ["n", C, "h", "w"])],
                          [(o, [f"d{i}" for i in range(r)]) for o, r in zip(outs, ranks)],
                          opset=17, ir_version=8)


@st.composite
def graphs(draw):
    layers = [(draw(st.sampled_from(LAYERS)), draw(st.integers(0, 99)), draw(st.integers(0, 99)))
              for _ in range(draw(st.integers(1, 10)))]
    outputs = draw(st.lists(st.integers(0, 99), max_size=3))
    return layers, outputs, draw(st.booleans()), draw(st.integers(0, 2**16))


def _build(layers, outputs, head, seed):
    g = _Graph(np.random.default_rng(seed))
    # (value, the layers that shrank it, in order: a stride-2 convolution rounds an odd size
    # up, a pool down, so values of one shape are those of one such history)
    pool = [("x", ())]
    for kind, a, b in layers:
        x, shrunk = pool[a % len(pool)]
        if kind == "residual":  # the sum of two values of one shape
            same = [v for v, s in pool if s == shrunk and v != x]
            if not same:
                continue
            pool.append((g.op("Add", x, same[b % len(same)]), shrunk))
            continue
        if kind in ("conv3_s2", "maxpool"):
            if len(shrunk) >= 2:
                continue
            shrunk = (*shrunk, kind)
        pool.append((g.layer(kind, x), shrunk))
    outs = [pool[-1][0]] + [pool[i % len(pool)][0] for i in outputs]
    outs = [o for o in dict.fromkeys(outs) if o != "x"] or [g.op("Relu", "x")]
    ranks = [4] * len(outs)
    if head:
        outs.append(g.head(pool[-1][0]))
        ranks.append(2)
    return g.finish(outs, ranks)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_random_convolutional_graphs_match_onnxruntime(graph):
    # (the second call replays)
    calls_near_reference(_build(*graph), ((2, C, 13, 12), (2, C, 13, 12), (1, C, 8, 9)),
                         graph[-1], str(graph))
