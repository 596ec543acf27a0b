"""The decomposed attention of exported transformers found at load and run as one node
(ml/fuse_attention.py, by the attention kernel where it takes the operands): the patterns
torch and transformers write, each against onnxruntime; the ones that must stay apart."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import wgcompute as wgc  # noqa: E402
from wgcompute.ml.fuse_attention import OP  # noqa: E402


def _model(nodes, inits, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "attention", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _vi(name, shape):
    return helper.make_tensor_value_info(name, T.FLOAT, list(shape))


def _scalar(name, v):
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


def _runtime_root():
    """torch's SDPA scale, computed from Q's shape when the model runs: √(1 / √d) as "r"."""
    return [helper.make_node("Shape", ["q"], ["shape"], name="shape"),
            helper.make_node("Gather", ["shape", "last"], ["d"], axis=0, name="d"),
            helper.make_node("Cast", ["d"], ["df"], to=T.FLOAT, name="cast"),
            helper.make_node("Sqrt", ["df"], ["sd"], name="sqrt_d"),
            helper.make_node("Div", ["one", "sd"], ["s0"], name="inv"),
            helper.make_node("Sqrt", ["s0"], ["r"], name="root")], [
        numpy_helper.from_array(np.asarray(-1, np.int64), "last"), _scalar("one", 1.0)]


def sdpa(feeds, *, where=False, scale_both=True, extra_out=False, axis=-1, runtime=False):
    """torch's SDPA export: Q·√s @ (Kᵀ·√s), + mask, Softmax, [Where(IsNaN, 0)], @ V, for
    ``feeds`` q, k, v (..., S, d) and an optional mask (``runtime``: √s computed from Q's
    shape, as torch writes it; a "gate" in feeds: Q multiplied by it instead of √s)."""
    d, mask = feeds["q"].shape[-1], feeds.get("mask")
    rank = feeds["k"].ndim
    kt_perm = (*range(rank - 2), rank - 1, rank - 2)
    root = 1 / math.sqrt(math.sqrt(d))
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=list(kt_perm), name="kT")]
    if scale_both:
        nodes += [helper.make_node("Mul", ["q", "gate" if "gate" in feeds else "r"], ["qs"],
                                   name="q_scale"),
                  helper.make_node("Mul", ["kt", "r"], ["ks"], name="k_scale"),
                  helper.make_node("MatMul", ["qs", "ks"], ["s"], name="qk")]
        inits = [_scalar("r", root)]
        if runtime:
            more, inits = _runtime_root()
            nodes = more + nodes
    else:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["s0"], name="qk"),
                  helper.make_node("Div", ["s0", "c"], ["s"], name="scale")]
        inits = [_scalar("c", math.sqrt(d))]
    scores = "s"
    if mask is not None:
        nodes.append(helper.make_node("Add", ["mask", "s"], ["sm"], name="add_mask"))
        scores = "sm"
    nodes.append(helper.make_node("Softmax", [scores], ["p"], axis=axis, name="softmax"))
    probs = "p"
    if where:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"], name="isnan"),
                  helper.make_node("Where", ["nan", "zero", "p"], ["pz"], name="where")]
        inits.append(_scalar("zero", 0.0))
        probs = "pz"
    nodes.append(helper.make_node("MatMul", [probs, "v"], ["y"], name="pv"))
    ins = [_vi(name, x.shape) for name, x in feeds.items()]
    q, k, v = feeds["q"], feeds["k"], feeds["v"]
    outs = [_vi("y", (*q.shape[:-1], v.shape[-1]))]
    if extra_out:
        outs.append(_vi("s", (*q.shape[:-1], k.shape[-2])))
    return _model(nodes, inits, ins, outs)


@pytest.fixture
def decomposed(monkeypatch):
    """Q's shape in each call that ran the fused node's original nodes (not the kernel)."""
    from wgcompute.ml import eager_attention

    calls = []
    steps = eager_attention.run_originals
    monkeypatch.setattr(eager_attention, "run_originals",
                        lambda ctx, node, ins: calls.append(ins[0].shape) or steps(ctx, node, ins))
    return calls


def _run_both(m, feeds):
    model = wgc.ml.load_onnx(m)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = model.run(feeds)
    ref = s.run(None, feeds)
    return model, got, ref


def _ops(model):
    return [n.op for n in model.graph.nodes]


def _qkv(rng, b, h, sq, skv, d, dv=None):
    dv = dv or d
    return {"q": rng.standard_normal((b, h, sq, d)).astype(np.float32),
            "k": rng.standard_normal((b, h, skv, d)).astype(np.float32),
            "v": rng.standard_normal((b, h, skv, dv)).astype(np.float32)}


def _close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * max(np.abs(ref).max(), 1))


@pytest.mark.parametrize("scale_both", [True, False], ids=["mul-q-and-kT", "div-scores"])
def test_sdpa_pattern_runs_as_one_node(scale_both, decomposed):
    feeds = _qkv(np.random.default_rng(0), 2, 3, 37, 37, 64)
    model, got, ref = _run_both(sdpa(feeds, scale_both=scale_both), feeds)
    assert _ops(model) == ["Transpose", OP]
    node = model.graph.nodes[1]
    assert node.attrs["scale"] == pytest.approx(1 / 8) and node.attrs["empty"] == "nan"
    _close(got[0], ref[0])
    assert decomposed == []  # the kernel ran


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 19), (1, 1, 11, 19), (2, 3, 11, 19),
                                        (11, 19), (19,)])
def test_masks_of_every_broadcast(mask_shape, decomposed):
    rng = np.random.default_rng(1)
    feeds = _qkv(rng, 2, 3, 11, 19, 32, 24)
    feeds["mask"] = np.where(rng.random(mask_shape) < 0.3, -1e4, 0).astype(np.float32)
    model, got, ref = _run_both(sdpa(feeds), feeds)
    assert OP in _ops(model)
    _close(got[0], ref[0])
    assert decomposed == []


def test_rows_with_no_key_give_zero_under_where_isnan():
    """transformers' export: an all -inf row's softmax is NaN, the Where makes it 0; without
    the Where it stays NaN (onnxruntime agrees on both)."""
    rng = np.random.default_rng(2)
    feeds = _qkv(rng, 1, 2, 6, 9, 16)
    mask = np.zeros((1, 1, 6, 9), np.float32)
    mask[..., 2, :] = -np.inf  # row 2 attends no key
    mask[..., 4, 3:] = -np.inf
    feeds["mask"] = mask
    model, got, ref = _run_both(sdpa(feeds, where=True), feeds)
    assert _ops(model) == ["Transpose", OP] and model.graph.nodes[1].attrs["empty"] == "zero"
    assert np.all(got[0][:, :, 2] == 0)
    _close(got[0], ref[0])
    model, got, ref = _run_both(sdpa(feeds), feeds)
    assert np.isnan(got[0][:, :, 2]).all() and np.isnan(ref[0][:, :, 2]).all()
    ok = np.ones(6, bool)
    ok[2] = False
    _close(got[0][:, :, ok], ref[0][:, :, ok])


def test_what_must_stay_apart_is_not_fused():
    """Scores that are also a graph output, and a softmax over another axis."""
    feeds = _qkv(np.random.default_rng(3), 1, 2, 5, 5, 8)
    model, got, ref = _run_both(sdpa(feeds, extra_out=True), feeds)
    assert OP not in _ops(model)
    for g, r in zip(got, ref, strict=True):
        _close(g, r)
    model, got, ref = _run_both(sdpa(feeds, axis=2), feeds)
    assert OP not in _ops(model)
    _close(got[0], ref[0])


def test_head_sizes_the_kernel_does_not_take_run_decomposed(decomposed):
    """A head of 160 (over the kernel's limit) and 3-D (batch·heads, S, d) operands."""
    rng = np.random.default_rng(4)
    feeds = _qkv(rng, 1, 2, 7, 5, 160)
    model, got, ref = _run_both(sdpa(feeds), feeds)
    assert OP in _ops(model) and decomposed == [(1, 2, 7, 160)]
    _close(got[0], ref[0])
    feeds = {k: v.reshape(2, *v.shape[2:]) for k, v in _qkv(rng, 1, 2, 7, 5, 48).items()}
    model, got, ref = _run_both(sdpa(feeds), feeds)
    assert OP in _ops(model)
    _close(got[0], ref[0])


def test_scale_computed_at_run_time_folds_into_the_kernel(decomposed):
    """torch computes SDPA's scale from Q's shape (Shape, Gather, Cast, Sqrt) when the model
    runs: known on the host then, it folds into the kernel's scale (no multiply kernels)."""
    feeds = _qkv(np.random.default_rng(5), 2, 3, 9, 9, 16)
    model, got, ref = _run_both(sdpa(feeds, runtime=True), feeds)
    (node,) = [n for n in model.graph.nodes if n.op == OP]
    assert node.attrs["factors"] == ["q*", "k*"] and node.inputs[4:] == ["r", "r"]
    _close(got[0], ref[0])
    assert decomposed == []


def test_a_tensor_factor_multiplies_its_operand_first(decomposed):
    """A Mul of Q by a tensor (not a scale) stays exact: Q·gate, then the kernel."""
    rng = np.random.default_rng(6)
    feeds = _qkv(rng, 2, 3, 9, 9, 16)
    feeds["gate"] = rng.random((2, 3, 9, 1)).astype(np.float32)
    model, got, ref = _run_both(sdpa(feeds), feeds)
    (node,) = [n for n in model.graph.nodes if n.op == OP]
    assert node.attrs["factors"] == ["q*"] and node.inputs[4:] == ["gate"]
    _close(got[0], ref[0])
    assert decomposed == []


def _mha_seq_first(rng, b, s, heads, dh):
    """torch's nn.MultiheadAttention as ViT exports it: the input made sequence-first, one
    packed in-projection, Q, K and V gathered from its (3, S, B, E) permutation, each head
    split (S, B·H, dh), transposed, reshaped to (B, H, S, dh); SDPA; heads merged; out-proj."""
    e = heads * dh
    inits, nodes = [], []

    def c(name, v, dt=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(v, dt), name))
        return name

    def n(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    y = n("MatMul", [n("Transpose", ["x"], "xs", perm=[1, 0, 2]),
                     c("w", rng.standard_normal((e, 3 * e)) / 4)], "qkv")
    y = n("Add", [y, c("b", rng.standard_normal(3 * e) / 4)], "qkvb")
    y = n("Unsqueeze", [n("Reshape", [y, c("s5", [s, b, 3, e], np.int64)], "u"),
                        c("ax0", [0], np.int64)], "u0")
    y = n("Squeeze", [n("Transpose", [y], "t", perm=[3, 1, 2, 0, 4]), c("ax3", [3], np.int64)],
          "sq")
    heads4 = []
    for i, nm in enumerate("qkv"):
        g = n("Gather", [y, c(f"i{i}", i, np.int64)], nm + "g", axis=0)
        r = n("Reshape", [g, c(f"r{i}", [s, b * heads, dh], np.int64)], nm + "r")
        t = n("Transpose", [r], nm + "T", perm=[1, 0, 2])
        heads4.append(n("Reshape", [t, c(f"v{i}", [b, heads, s, dh], np.int64)], nm + "4"))
    q, k, v = heads4
    root = c("root", 1 / math.sqrt(math.sqrt(dh)))
    sc = n("MatMul", [n("Mul", [q, root], "qs"),
                      n("Mul", [n("Transpose", [k], "kt", perm=[0, 1, 3, 2]), root], "ks")], "sc")
    o = n("MatMul", [n("Softmax", [sc], "p", axis=-1), v], "o")
    o = n("Reshape", [n("Transpose", [o], "op", perm=[2, 0, 1, 3]),
                      c("m", [s * b, e], np.int64)], "om")
    n("Gemm", [o, c("wo", rng.standard_normal((e, e)) / 4), c("bo", rng.standard_normal(e))],
      "out", transB=1)
    return _model(nodes, inits, [_vi("x", (b, s, e))], [_vi("out", (s * b, e))])


def test_packed_heads_are_read_in_place(monkeypatch):
    """ViT's attention: Q, K and V reach the kernel as views of the packed projection's one
    permutation (through the Gather, Reshape and Transpose of each head, K^T's Transpose
    and the kernel's own), so the only copies are the sequence-first input and that
    permutation: the kernel writes its rows where the merge of the heads (Transpose, then
    Reshape) puts them."""
    from wgcompute import _fusion_auto, _lazy

    if not _fusion_auto.enabled():
        pytest.skip("automatic fusion is off (WGCOMPUTE_FUSE=0): every held copy is made")
    rng = np.random.default_rng(7)
    m = _mha_seq_first(rng, 2, 50, 4, 16)  # heads above the host-fold size
    queued = []
    enqueue = _lazy.Batch.enqueue
    monkeypatch.setattr(_lazy.Batch, "enqueue",
                        lambda batch, op: (queued.append(op.label), enqueue(batch, op))[1])
    feeds = {"x": rng.standard_normal((2, 50, 64)).astype(np.float32)}
    model, got, ref = _run_both(m, feeds)
    assert queued == ["region_copy", "matmul_bias", "region_copy", "attention", "matmul_bias"]
    fused = [n for n in model.graph.nodes if n.op == "FusedAttention"]
    assert len(fused) == 1 and fused[0].attrs["out_perm"] == [2, 0, 1, 3]
    _close(got[0], ref[0])


@pytest.mark.parametrize("heads", [(4, 4), (4, 2)], ids=["heads", "grouped"])
def test_onnx_attention_operator_runs_the_kernel(monkeypatch, heads):
    """ONNX's Attention (opset 23) with a boolean mask, grouped heads and a causal flag: the
    kernel runs it (a row the mask leaves no key gives 0, as the decomposed path does);
    against onnx's reference implementation."""
    from onnx.reference import ReferenceEvaluator

    from wgcompute.ml import eager_nn

    ran = []
    kernel = eager_nn.run_attention
    monkeypatch.setattr(eager_nn, "run_attention",
                        lambda *a: (lambda y: ran.append(y is not None) or y)(kernel(*a)))
    rng = np.random.default_rng(9)
    hq, hkv = heads
    q = rng.standard_normal((2, hq, 6, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, hkv, 9, 16)).astype(np.float32) for _ in range(2))
    mask = rng.random((2, 1, 6, 9)) < 0.8
    mask[1, 0, 4, :] = False  # no key at all: 0
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], is_causal=0)
    graph = helper.make_graph(
        [node], "attention", [_vi("q", q.shape), _vi("k", k.shape), _vi("v", v.shape),
                              helper.make_tensor_value_info("mask", T.BOOL, mask.shape)],
        [_vi("y", q.shape)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    feeds = {"q": q, "k": k, "v": v, "mask": mask}
    got = wgc.ml.load_onnx(m).run(feeds)[0]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert ran == [True]
    assert np.all(got[1, :, 4] == 0)
    ok = np.ones(got.shape, bool)
    ok[1, :, 4] = False  # (onnx's reference gives nan there: a softmax of no key)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape,perm,in_place", [
    ((2, 3, 37, 64), (0, 2, 1, 3), True),  # BERT's merge of the heads: (B, S, H, D)
    ((2, 3, 37, 64), (2, 0, 1, 3), True),  # ViT's, sequence first: (S, B, H, D)
    ((2, 2, 3, 19, 32), (0, 1, 3, 2, 4), True),  # two batch axes, still one stride
    ((2, 2, 3, 19, 32), (1, 3, 0, 2, 4), False),  # batch axes apart: a permuted copy
    ((2, 3, 37, 64), (0, 1, 3, 2), None),  # the last axis moves: not the kernel's to write
], ids=["bshd", "sbhd", "5d", "5d-apart", "last-moves"])
def test_the_merge_of_the_heads_is_written_in_place(shape, perm, in_place, decomposed,
                                                    monkeypatch):
    """Y's Transpose that keeps the last axis (the merge of the heads) joins the fused node:
    the kernel writes each row where the permutation puts it (no copy), or where the batch
    axes do not keep one stride, the permutation is a copy of the kernel's result; a
    Transpose that moves the last axis stays a node of its own. Against onnxruntime."""
    from wgcompute import _lazy

    rng = np.random.default_rng(len(shape) + perm[0])
    b, h, s, d = math.prod(shape[:-3]), shape[-3], shape[-2], shape[-1]
    feeds = {nm: rng.standard_normal(shape).astype(np.float32) for nm in ("q", "k", "v")}
    m = sdpa(feeds)
    m.graph.node.append(helper.make_node("Transpose", ["y"], ["yt"], perm=list(perm),
                                         name="merge"))
    del m.graph.output[:]
    m.graph.output.append(_vi("yt", [shape[p] for p in perm]))
    queued = []
    enqueue = _lazy.Batch.enqueue
    monkeypatch.setattr(_lazy.Batch, "enqueue",
                        lambda batch, op: (queued.append(op.label), enqueue(batch, op))[1])
    model, got, ref = _run_both(m, feeds)
    _close(got[0], ref[0])
    assert decomposed == [] and b * h * s * d  # the kernel ran
    fused = [n for n in model.graph.nodes if n.op == OP]
    assert len(fused) == 1
    if in_place is None:
        assert "out_perm" not in fused[0].attrs and "Transpose" in _ops(model)[1:]
        return
    assert fused[0].attrs["out_perm"] == list(perm) and _ops(model) == ["Transpose", OP]
    after = queued[queued.index("attention") + 1:]
    copies = [x for x in after if x in ("region_copy", "strided_copy", "transpose")]
    assert (copies == []) if in_place else copies, queued
