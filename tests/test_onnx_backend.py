"""ONNX's own backend test suite (onnx.backend.test, shipped in the onnx wheel), EVERY case of
it, through wgcompute.ml.backend: the node tests of every operator, the pytorch-converted and
pytorch-operator cases, the "simple" models and the nine "real" light models (ResNet-50,
SqueezeNet, ShuffleNet, VGG-19, AlexNet, DenseNet-121, Inception v1/v2, ZFNet-512).

Each case either runs and matches the suite's stored outputs with the suite's tolerances
(rtol 1e-3, atol 1e-7 unless the case says otherwise), or is refused by ``load_onnx`` with a
WgComputeError: a model that loads and then fails, or computes a wrong answer, fails here.
A case of an operator wgcompute claims (CLAIMED) may only be refused where REFUSED_CLAIMED
says why. EXCLUDED lists the cases not run at all, each with its reason;
docs/guide/inference.md lists both."""

import glob
import os
import re
import warnings

import pytest

pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")

import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

from wgcompute.errors import WgComputeError  # noqa: E402
from wgcompute.ml.backend import WgcBackend  # noqa: E402

KINDS = ("node", "pytorch-converted", "pytorch-operator", "simple", "real")

# The operators wgcompute claims (node tests are named test_<op>_...): a case of one of them
# must run and be right, unless REFUSED_CLAIMED names it.
CLAIMED = ("conv", "basic_conv_with_padding", "basic_conv_without_padding", "convtranspose",
           "batchnorm", "relu", "clip", "leakyrelu", "sigmoid", "hardsigmoid", "hardswish",
           "tanh", "add", "sub", "mul", "div", "sum", "maxpool", "averagepool",
           "globalaveragepool", "globalmaxpool", "gemm", "matmul", "flatten", "reshape",
           "squeeze", "unsqueeze", "transpose", "concat", "softmax", "logsoftmax", "dropout",
           "identity", "lrn", "constant", "constantofshape", "shape", "gather", "cast",
           "resnet50", "squeezenet", "shufflenet", "vgg19", "bvlc_alexnet", "densenet121",
           "inception_v1", "inception_v2", "zfnet512")
# ... and the pytorch-converted (test_Conv2d...), pytorch-operator and simple models
_CLAIMED_RE = re.compile(rf"^test_({'|'.join(CLAIMED)})(_.*)?$|^test_[A-Z]|^test_operator_"
                         rf"|^test_single_relu_model$")

# pattern -> why wgcompute refuses these cases of claimed operators (at load, a ModelError).
REFUSED_CLAIMED = {
    r"^test_maxpool_2d_uint8$":
        "integer tensors computed at run time: the kernels compute float tensors (integer "
        "tensors only fold on the host)",
    r"^test_cast_\w*(FLOAT8|FLOAT4|INT4|UINT4|INT2|UINT2|BFLOAT16)":
        "8-, 4- and 2-bit types and bfloat16 do not exist in wgcompute",
    r"^test_cast_DOUBLE_to_FLOAT16$|^test_operator_(add_broadcast|add_size1_\w+|addconstant)$":
        "float64 computed at run time: wgcompute computes float32 (and float64 -> float16 "
        "through float32 rounds twice)",
    r"_expanded(_ver\d+)?$": "the operator's function body uses operators wgcompute does not "
                             "run (Where, Less, ReduceMax, Exp...)",
    r"^test_(averagepool|maxpool|convtranspose)_3d|^test_(AvgPool|MaxPool|Conv)3d":
        "3-D convolution and pooling (1-D and 2-D only)",
    r"^test_maxpool_with_argmax": "MaxPool's Indices output",
    r"^test_batchnorm_.*training_mode$": "training mode (inference only)",
    r"^test_identity_(opt|sequence)$": "optional and sequence types",
    r"^test_constant_pad": "the Pad operator",
    r"^test_gather_elements": "GatherElements (Gather is supported)",
    r"^test_(PReLU|ELU|SELU|Softplus|Softsign|Softmin|GLU|PoissonNLLLLoss|ConstantPad2d|"
    r"ZeroPad2d|ReplicationPad2d|ReflectionPad2d)|^test_operator_(basic|chunk|exp|max|min|"
    r"pad|params|pow|reduced_\w+|repeat\w*|selu|sqrt|symbolic_override\w*)$":
        "pytorch cases of operators wgcompute does not run (PRelu, Elu, Selu, Softplus, "
        "Softsign, Neg, Split, Exp, Pad, Abs, Pow, Tile, ReduceSum/Mean, "
        "InstanceNormalization, Max, Min, Sqrt)",
    r"^test_operator_index$": "a Slice of a computed tensor (Slice folds constants only)",
}
_REFUSED_RE = [(re.compile(p), why) for p, why in REFUSED_CLAIMED.items()]

# pattern -> why the case is not run at all. Only cases the harness itself cannot feed.
EXCLUDED: dict[str, str] = {}
_EXCLUDED_RE = [(re.compile(p), why) for p, why in EXCLUDED.items()]

def _all_cases() -> dict:
    cases = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the suite's own overflow warnings while building
        for kind in KINDS:
            for t in load_model_tests(kind=kind):
                cases[t.name] = t
    return cases


CASES = _all_cases()


def _excluded(name: str) -> str | None:
    return next((why for r, why in _EXCLUDED_RE if r.search(name)), None)


def refusal_allowed(name: str) -> str | None:
    """Why ``name`` may be refused: the reason in REFUSED_CLAIMED, "not claimed", or None
    (a claimed case that must run)."""
    if not _CLAIMED_RE.match(name):
        return "operator not claimed"
    return next((why for r, why in _REFUSED_RE if r.search(name)), None)


def _pb(path, type_proto):
    with open(path, "rb") as f:
        data = f.read()
    if not type_proto.HasField("tensor_type"):
        return None  # sequences, optionals, maps: the library refuses these models at load
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def model_and_data(case):
    """(ModelProto, [(inputs, reference outputs)]) of a case."""
    if case.model is not None:  # node cases: built in memory
        return case.model, [([numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto)
                              else x for x in ins],
                             [numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto)
                              else x for x in outs]) for ins, outs in case.data_sets]
    if case.model_dir is not None:
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        sets = []
        for d in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
            n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
            ins = [_pb(os.path.join(d, f"input_{i}.pb"), model.graph.input[i].type)
                   for i in range(n_in)]
            outs = [_pb(os.path.join(d, f"output_{i}.pb"), model.graph.output[i].type)
                    for i in range(n_out)]
            sets.append((ins, outs))
        return model, sets
    # a "real" light model: inputs made as the suite makes them, its stored output
    path = os.path.join(os.path.dirname(onnx.__file__), "..", case.url)
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    ins = [Runner.generate_dummy_data(x, seed=0, name=case.model_name, random=False)
           for x in model.graph.input if x.name not in inits]
    prefix = os.path.splitext(path)[0]
    outs = [numpy_helper.to_array(onnx.load_tensor(f"{prefix}_output_{i}.pb"))
            for i in range(len(model.graph.output))]
    return model, [(ins, outs)]


# The "real" light models are their architectures with every weight a ConstantOfShape fill:
# a few KB that fold into up to 300 MB, over load_onnx's default cap (refused without this).
REAL_FOLDED_BYTES = 1 << 30


def outcome(name: str) -> tuple[str, str]:
    """("passed" | "refused", detail) for a case; raises on a run failure or a wrong answer."""
    case = CASES[name]
    model, data_sets = model_and_data(case)
    kwargs = {"max_folded_bytes": REAL_FOLDED_BYTES} if case.kind == "real" else {}
    try:
        rep = WgcBackend.prepare(model, **kwargs)
    except WgComputeError as e:
        return "refused", str(e)
    try:
        for ins, refs in data_sets:
            outs = list(rep.run(ins))
            Runner.assert_similar_outputs(refs, outs, rtol=case.rtol, atol=case.atol,
                                          model_dir=name)
    finally:
        rep.model.free()
    return "passed", ""


_RUN = sorted(n for n in CASES if _excluded(n) is None)


# the "real" models take seconds each and up to 1.5 GB (VGG-19's folded weights)
@pytest.mark.parametrize("name", [pytest.param(n, marks=(pytest.mark.slow, pytest.mark.bigmem))
                                  if CASES[n].kind == "real" else n for n in _RUN])
def test_backend_case(name):
    kind, detail = outcome(name)
    if kind == "refused":
        assert refusal_allowed(name) is not None, \
            f"{name}: refused at load though its operator is claimed: {detail}"
        assert detail, "a refusal says why"


def test_exclusions_and_refusals_match_cases():
    """Every pattern of EXCLUDED and REFUSED_CLAIMED still names a case of the suite."""
    for pattern in [*EXCLUDED, *REFUSED_CLAIMED]:
        r = re.compile(pattern)
        assert any(r.search(n) for n in CASES), f"{pattern!r} matches no case"
