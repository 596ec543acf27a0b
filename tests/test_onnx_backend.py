"""ONNX's own backend test suite (onnx.backend.test, shipped in the onnx wheel) run through
wgcompute.ml.backend: the node tests of every operator wgcompute claims, the
pytorch-converted and pytorch-operator cases, and the "real" light models (ResNet-50,
SqueezeNet, ShuffleNet, VGG-19, AlexNet, DenseNet-121, Inception v1/v2, ZFNet-512) against
their stored outputs. Tolerances are the suite's own (rtol 1e-3, atol 1e-7 unless a case
says otherwise). docs/guide/inference.md lists what is excluded and why; EXCLUDED below is
that list, each pattern with its reason."""

import os
import tempfile

import pytest

pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")

import onnx.backend.test  # noqa: E402

from wgcompute.ml.backend import WgcBackend  # noqa: E402

# The "real" cases write their inputs under $ONNX_HOME: keep that out of the user's home.
os.environ.setdefault("ONNX_HOME", tempfile.mkdtemp(prefix="wgc-onnx-home-"))

# The operators wgcompute claims (node tests are named test_<op>_...).
CLAIMED = ("conv", "basic_conv_with_padding", "basic_conv_without_padding", "convtranspose",
           "batchnorm", "relu", "clip", "leakyrelu", "sigmoid", "hardsigmoid", "hardswish",
           "tanh", "add", "sub", "mul", "div", "sum", "maxpool", "averagepool",
           "globalaveragepool", "globalmaxpool", "gemm", "matmul", "flatten", "reshape",
           "squeeze", "unsqueeze", "transpose", "concat", "softmax", "logsoftmax", "dropout",
           "identity", "lrn", "constant", "constantofshape", "shape", "gather", "cast")
LIGHT_MODELS = ("resnet50", "squeezenet", "shufflenet", "vgg19", "bvlc_alexnet", "densenet121",
                "inception_v1", "inception_v2", "zfnet512")

# pattern -> why it is not run. Everything else matching CLAIMED (and the pytorch cases) runs.
EXCLUDED = {
    # dtypes: wgcompute's kernels compute float tensors; integers are shape parameters only
    r"_u?int(8|16|32|64)(_|$)": "integer tensors: the kernels compute f32/f16 (integers are "
                                "shape parameters folded on the host)",
    r"^test_maxpool_2d_uint8": "integer tensors",
    r"^test_cast(like)?_.*(FLOAT8|FLOAT4|INT4|UINT4|INT2|UINT2|BFLOAT16|E8M0|STRING)":
        "8-bit, 4-bit, 2-bit, bfloat16 and string types do not exist in wgcompute",
    r"^test_castlike_.*(FLOAT16_to_FLOAT|FLOAT_to_FLOAT16|DOUBLE|FLOAT_to_FLOAT)":
        "CastLike is not claimed (Cast is)",
    r"_expanded(_ver\d+)?_cpu$": "the expanded variants run the operator's function body, made "
                                 "of operators not claimed (Where, Less, ReduceMax, Exp...)",
    # features outside inference on 1-D/2-D NCHW tensors
    r"^test_(averagepool|maxpool)_3d": "3-D pooling (1-D and 2-D only)",
    r"^test_convtranspose_3d": "3-D transposed convolution (1-D and 2-D only)",
    r"^test_(AvgPool|MaxPool|Conv)3d": "3-D pooling / convolution (1-D and 2-D only)",
    r"^test_maxpool_with_argmax": "MaxPool's Indices output",
    r"^test_training_dropout": "training mode (inference only)",
    r"^test_batchnorm_.*training_mode": "training mode (inference only)",
    r"^test_identity_(opt|sequence)": "optional and sequence types",
    r"^test_softmax_cross_entropy": "a loss, not the Softmax operator",
    r"^test_constant_pad": "the Pad operator",
    r"^test_gather_elements": "GatherElements is not claimed (Gather is)",
    r"^test_Embedding": "an integer-indexed lookup: its work would be done on the host",
    # the pytorch cases whose operators wgcompute does not claim
    r"^test_(PReLU|ELU|SELU|Softplus|Softsign|Softmin|GLU|PoissonNLLLLoss|ConstantPad2d|"
    r"ZeroPad2d|ReplicationPad2d|ReflectionPad2d)": "operators not claimed (PRelu, Elu, Selu, "
                                                    "Softplus, Neg, Split, Exp, Pad, Abs)",
    r"^test_operator_(exp|params|pow|repeat|reduced|basic|symbolic_override|index|pad|max|"
    r"min|sqrt|chunk|selu)": "operators not claimed (Exp, Neg, Pow, Tile, ReduceSum/Mean, "
                             "InstanceNormalization, Slice of a computed tensor, Pad, Max, Min, "
                             "Sqrt, Split, Selu)",
    r"^test_operator_(add_broadcast|add_size1_singleton_broadcast|add_size1_right_broadcast|"
    r"addconstant)": "float64 inputs holding uninitialized memory from the export "
                     "(1e-309..1e+223): they do not fit float32, which wgcompute computes in",
}

backend_test = onnx.backend.test.BackendTest(WgcBackend, __name__)
for _op in CLAIMED:
    backend_test.include(rf"^test_{_op}(_.*)?_cpu$")
for _m in LIGHT_MODELS:
    backend_test.include(rf"^test_{_m}_cpu$")
backend_test.include(r"^test_[A-Z][A-Za-z0-9]*(_.*)?_cpu$")  # pytorch-converted
backend_test.include(r"^test_(operator|softmax|log_softmax)_[a-z0-9_]*_cpu$")  # pytorch-operator
for _pattern in EXCLUDED:
    backend_test.exclude(_pattern)

globals().update(backend_test.test_cases)
