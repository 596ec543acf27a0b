"""Reference architectures written with onnx.helper, with random weights: for tests and
benchmarks that need a real network without downloading one (no trained weights here)."""

from __future__ import annotations

import numpy as np

# torchvision's MobileNetV2 inverted-residual settings: expansion t, channels c, repeats n,
# first stride s
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class _Builder:
    def __init__(self, seed: int, opset: int):
        from onnx import helper

        self.h = helper
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0
        self.opset = opset

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def init(self, prefix: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def node(self, op: str, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(self.h.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, groups: int,
                act: bool) -> str:
        """Conv (no bias) → BatchNormalization → ReLU6 (Clip 0..6), as torchvision's
        Conv2dNormActivation exports before constant folding."""
        fan_in = cin // groups * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        y = self.node("Conv", [x, self.init("w", w.astype(np.float32))], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        bn = [self.rng.uniform(0.5, 1.5, cout), self.rng.normal(0, 0.1, cout),
              self.rng.normal(0, 0.1, cout), self.rng.uniform(0.5, 1.5, cout)]
        y = self.node("BatchNormalization",
                      [y] + [self.init("bn", a.astype(np.float32)) for a in bn], epsilon=1e-5)
        if act:
            lo = self.init("min", np.array(0.0, np.float32))
            hi = self.init("max", np.array(6.0, np.float32))
            y = self.node("Clip", [y, lo, hi])
        return y


def mobilenet_v2(seed: int = 0, num_classes: int = 1000, width: float = 1.0,
                 batch: int | str | None = "N", size: int = 224, opset: int = 13,
                 softmax: bool = False):
    """torchvision's MobileNetV2 (inverted residuals, ReLU6, depthwise 3×3, 1280-wide head,
    dropout, linear classifier) as an onnx.ModelProto with random weights drawn from
    ``seed``: Conv + BatchNormalization + Clip nodes as an export before folding. ``batch``
    is the input's batch axis: a name (dynamic), an int, or None; ``softmax`` appends a
    Softmax (the model then outputs probabilities)."""
    from onnx import TensorProto, helper

    b = _Builder(seed, opset)

    def ch(c):  # torchvision's _make_divisible(c * width, 8)
        v = max(8, int(c * width + 4) // 8 * 8)
        return v + 8 if v < 0.9 * c * width else v

    cin = ch(32)
    x = b.conv_bn("input", 3, cin, 3, 2, 1, True)
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        cout = ch(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = b.conv_bn(y, cin, hidden, 1, 1, 1, True)
            y = b.conv_bn(y, hidden, hidden, 3, stride, hidden, True)
            y = b.conv_bn(y, hidden, cout, 1, 1, 1, False)
            x = b.node("Add", [x, y]) if stride == 1 and cin == cout else y
            cin = cout
    last = max(1280, ch(1280)) if width > 1.0 else 1280
    x = b.conv_bn(x, cin, last, 1, 1, 1, True)
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x], axis=1)
    x = b.node("Dropout", [x])
    w = b.rng.normal(0, 0.01, (num_classes, last)).astype(np.float32)
    x = b.node("Gemm", [x, b.init("fc_w", w), b.init("fc_b", np.zeros(num_classes,
                                                                       np.float32))],
               transB=1)
    if softmax:
        x = b.node("Softmax", [x], axis=-1)
    graph = helper.make_graph(
        b.nodes, "mobilenet_v2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, num_classes])],
        b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="wgcompute")
    model.ir_version = min(model.ir_version, 8)  # loadable by older onnxruntime releases
    return model
