"""matmul reading operands through element strides in place (params "_la" / "_lb"), and
automatic fusion holding a queued permutation copy so that a matmul of its result reads the
source through the permutation's strides: attention's head transposes (perm (1, 0, 2) of
(S, B·H, D), (0, 2, 1, 3) and (0, 2, 3, 1) of (B, S, H, D)) then cost no copy. Checked
against numpy on the adapter the suite runs on."""

import numpy as np
import pytest
from conftest import assert_product_close, float_dtype, queued_labels

import wgcompute as wgc
from wgcompute import _lazy
from wgcompute import array_api as xp
from wgcompute.errors import ArgumentError, ShapeError

# (automatic fusion holds the strided copies of these small arrays, as it does from 1 MiB up)
pytestmark = pytest.mark.usefixtures("held_copies")


def _product(rng, dt, a_src, a_perm, b_src, b_perm):
    """(labels queued by permute, permute, matmul; the product; numpy's product in f64)."""
    an = rng.standard_normal(a_src).astype(dt)
    bn = rng.standard_normal(b_src).astype(dt)
    a, b = wgc.buffer(an), wgc.buffer(bn)
    dev = a.device
    dev.synchronize()
    pa = xp.permute_dims(a, a_perm) if a_perm else a
    pb = xp.permute_dims(b, b_perm) if b_perm else b
    c = pa @ pb
    labels = queued_labels(dev)
    want = np.matmul(np.transpose(an, a_perm) if a_perm else an,
                     np.transpose(bn, b_perm) if b_perm else bn, dtype=np.float64)
    return labels, c, want


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("a_src,a_perm,b_src,b_perm", [
    # ViT: (S, B·H, D) heads to (B·H, S, D); K^T as one permutation (1, 2, 0)
    ((13, 6, 64), (1, 0, 2), (13, 6, 64), (1, 2, 0)),
    ((13, 6, 65), (1, 0, 2), (13, 6, 65), (1, 2, 0)),   # D unaligned: scalar loads
    ((6, 11, 11), None, (11, 6, 64), (1, 0, 2)),         # P · V
    ((6, 11, 11), None, (11, 6, 65), (1, 0, 2)),
    # BERT: (B, S, H, D) to (B, H, S, D) and K to (B, H, D, S)
    ((2, 9, 3, 64), (0, 2, 1, 3), (2, 9, 3, 64), (0, 2, 3, 1)),
    ((2, 9, 3, 33), (0, 2, 1, 3), (2, 9, 3, 33), (0, 2, 3, 1)),
    # broadcast batch: b's view has no B dimension
    ((2, 7, 3, 16), (0, 2, 1, 3), (7, 3, 16), (1, 2, 0)),
    # a 2-D matrix times a batched view (its rows strided)
    ((5, 12), None, (12, 3, 4), (1, 0, 2)),
    # vectors: a 1-D operand before a view
    ((8,), None, (8, 3, 6), (1, 0, 2)),
])
def test_permuted_operands_are_read_in_place(autofused, a_src, a_perm, b_src, b_perm, dtype,
                                             rng):
    dt = float_dtype(dtype)
    labels, c, want = _product(rng, dt, a_src, a_perm, b_src, b_perm)
    assert labels == ["matmul"]  # no strided_copy queued: the product reads the sources
    assert_product_close(c.to_numpy(), want, dtype)


def test_layout_that_does_not_qualify_is_copied_first(autofused, rng):
    # (D, S, B) to (B, S, D): neither matrix stride of the view is 1
    labels, c, want = _product(rng, np.float32, (8, 7, 3), (2, 1, 0), (3, 8, 5), None)
    assert labels == ["region_copy", "matmul"]  # permute_dims copies through region_copy
    assert_product_close(c.to_numpy(), want, "f32")


@pytest.mark.parametrize("a_src,b_src", [((9, 4, 12), (12, 20)), ((5, 3, 8), (8,))])
def test_a_view_that_would_split_one_product_is_copied_first(autofused, a_src, b_src, rng):
    """A permuted a times one shared matrix (a linear layer on a sequence-first input): the
    copy makes one 2-D product of all of a's rows, the view would make one small product per
    batch (3x slower on an H200 for ViT's input projection), so the copy is queued first."""
    labels, c, want = _product(rng, np.float32, a_src, (1, 0, 2), b_src, None)
    assert labels == ["region_copy", "matmul"]
    assert_product_close(c.to_numpy(), want, "f32")


def test_permuted_source_is_read_as_it_was(autofused, rng):
    qn = rng.standard_normal((5, 4, 8)).astype(np.float32)
    q = wgc.buffer(qn)
    p = xp.permute_dims(q, (1, 0, 2))
    q += 1.0  # writes the source: the held permutation is queued first
    c = p @ xp.permute_dims(q, (1, 2, 0))
    want = np.matmul(np.transpose(qn, (1, 0, 2)), np.transpose(qn + 1, (1, 2, 0)),
                     dtype=np.float64)
    assert_product_close(c.to_numpy(), want, "f32")


@pytest.mark.parametrize("perm", [(1, 0), (1, 0, 2)])
def test_product_of_a_held_copy_outlives_its_freed_source(autofused, perm, rng):
    """The source freed after the copy was asked for: the copy is made (the product cannot
    read a freed buffer) and the product reads it."""
    an = rng.standard_normal((6, 4, 5)[:len(perm)]).astype(np.float32)
    wn = rng.standard_normal((an.shape[perm[-1]], 3)).astype(np.float32)
    a, w = wgc.buffer(an), wgc.buffer(wn)
    p = xp.permute_dims(a, perm)
    a.free()
    c = p @ w
    assert_product_close(c.to_numpy(), np.transpose(an, perm).astype(np.float64) @ wn, "f32")


def test_strided_copy_of_a_flat_buffer_is_read_in_place(autofused, rng):
    """A copy of a 1-D buffer into rows (every other row of a flat source) and a product of
    it: the product reads the flat buffer through the copy's strides."""
    flat_n = rng.standard_normal(40).astype(np.float32)
    wn = rng.standard_normal((4, 3)).astype(np.float32)
    flat, w = wgc.buffer(flat_n), wgc.buffer(wn)
    dev = flat.device
    dev.synchronize()
    rows = _lazy.enqueue("strided_copy", [flat], wgc.empty((5, 4), "f32"),
                         {"strides": (8, 1), "offset": 0})
    c = rows @ w
    assert queued_labels(dev) == ["matmul"]
    want = flat_n.reshape(5, 8)[:, :4].astype(np.float64) @ wn
    assert_product_close(c.to_numpy(), want, "f32")


def test_held_copies_queued_as_the_batch_fills(autofused, rng):
    """An op that needs several held copies queued first, the first of which fills the batch
    (its flush queues the others): each copy is queued once and reads the source as it was."""
    an = rng.standard_normal((3, 4, 8)).astype(np.float32)
    a, w = wgc.buffer(an), wgc.buffer(np.eye(8, dtype=np.float32))
    dev = a.device
    for fill in range(_lazy.MAX_OPS - 3, _lazy.MAX_OPS + 1):
        dev.synchronize()
        x = a
        for _ in range(fill):
            x = x @ w  # one dispatch each
        perms = [xp.permute_dims(a, p) for p in ((1, 0, 2), (0, 2, 1), (2, 1, 0))]
        a += 0.0  # writes their source: all three queued first
        for p, got in zip(((1, 0, 2), (0, 2, 1), (2, 1, 0)), perms):
            np.testing.assert_array_equal(got.to_numpy(), np.transpose(an, p))
        np.testing.assert_allclose(x.to_numpy(), an, rtol=1e-6, atol=1e-6)


def test_chained_heads_product_queues_no_copies(autofused, rng):
    """Q·K^T, softmax-free scaling, then ·V: the three head permutations are read in place."""
    s, bh, d = 17, 4, 64
    qkv = [rng.standard_normal((s, bh, d)).astype(np.float32) for _ in range(3)]
    q, k, v = (wgc.buffer(x) for x in qkv)
    dev = q.device
    dev.synchronize()
    scores = xp.permute_dims(q, (1, 0, 2)) @ xp.permute_dims(k, (1, 2, 0))
    out = scores @ xp.permute_dims(v, (1, 0, 2))
    assert queued_labels(dev) == ["matmul", "matmul"]
    qn, kn, vn = (x.astype(np.float64) for x in qkv)
    want = (np.transpose(qn, (1, 0, 2)) @ np.transpose(kn, (1, 2, 0))) @ \
        np.transpose(vn, (1, 0, 2))
    assert_product_close(out.to_numpy(), want, "f32")


def test_a_new_buffer_leaves_held_copies_held(autofused, rng):
    """Uploading into a new buffer (a model's weight on its first use) does not queue the
    held copies first: nothing held can touch it, and the product still reads them in
    place. Writing into an existing buffer still does (program order)."""
    q, k = (wgc.buffer(rng.standard_normal((5, 3, 8)).astype(np.float32)) for _ in range(2))
    dev = q.device
    dev.synchronize()
    qh, kh = xp.permute_dims(q, (1, 0, 2)), xp.permute_dims(k, (1, 2, 0))
    w = wgc.buffer(np.full((3, 5, 5), 0.5, np.float32))  # a fresh upload
    out = (qh @ kh) * w
    assert queued_labels(dev) == ["matmul"]
    want = (np.transpose(q.to_numpy(), (1, 0, 2)).astype(np.float64)
            @ np.transpose(k.to_numpy(), (1, 2, 0))) * 0.5
    assert_product_close(out.to_numpy(), want, "f32")
    dev.synchronize()
    qh = xp.permute_dims(q, (1, 0, 2))
    wgc.buffer(np.ones(4, np.float32))
    assert dev.lazy.held  # still held
    w.write(np.ones((3, 5, 5), np.float32))  # an existing buffer: held work goes first
    assert not dev.lazy.held
    np.testing.assert_array_equal(qh.to_numpy(), np.transpose(q.to_numpy(), (1, 0, 2)))


@pytest.mark.parametrize("keep", [False, True])
def test_transpose_of_a_held_permutation_is_one_view(autofused, keep, rng):
    """ONNX's attention: K's heads permuted, then their last two axes swapped (K^T): the
    product reads K through both at once; the first permutation's result is written only if
    it is still referenced."""
    qn = rng.standard_normal((9, 4, 16)).astype(np.float32)
    kn = rng.standard_normal((9, 4, 16)).astype(np.float32)
    q, k = wgc.buffer(qn), wgc.buffer(kn)
    dev = q.device
    dev.synchronize()
    heads = xp.permute_dims(k, (1, 0, 2))
    s = xp.permute_dims(q, (1, 0, 2)) @ xp.matrix_transpose(heads)
    assert queued_labels(dev) == ["matmul"]
    if not keep:
        del heads
    want = np.transpose(qn, (1, 0, 2)).astype(np.float64) @ np.transpose(kn, (1, 2, 0))
    assert_product_close(s.to_numpy(), want, "f32")
    if keep:
        np.testing.assert_array_equal(heads.to_numpy(), np.transpose(kn, (1, 0, 2)))


def _direct(an, bn, params):
    return _lazy.enqueue("matmul", [wgc.buffer(an), wgc.buffer(bn)], None, params).to_numpy()


@pytest.mark.parametrize("offset", [0, 3, 4])
def test_matmul_reads_through_strides_and_offset(offset, rng):
    """The params themselves: a (2, 5, 7) view of a flat buffer, with an offset, and b read
    transposed through strides."""
    flat = rng.standard_normal(200).astype(np.float32)
    bn = rng.standard_normal((2, 6, 7)).astype(np.float32)  # b's view (2, 7, 6): k rows
    a_view = np.lib.stride_tricks.as_strided(flat[offset:], (2, 5, 7), (4 * 80, 4 * 12, 4))
    got = _direct(flat, bn, {"_la": ((2, 5, 7), (80, 12, 1), offset),
                             "_lb": ((2, 7, 6), (42, 1, 7), 0)})
    assert_product_close(got, np.matmul(a_view, np.swapaxes(bn, -1, -2), dtype=np.float64), "f32")


@pytest.mark.parametrize("config", [None, "32x64x16_4x4_s8", "128x128x16_8x8_u_sb",
                                    "64x64x16_8x8_u_s16"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_views_under_each_kind_of_tile(config, dtype, rng):
    """Split-K (an f16 product through its f32 temporary), one workgroup tile stage, register
    tiles of 8x8: views read in rows and transposed, with offsets that keep vec4 loads (0, 4)
    and one that does not (2), and odd sizes."""
    from wgcompute.kernels.matmul.configs import TileConfig

    dt = float_dtype(dtype)
    params = {}
    if config is not None:
        params["_config"] = TileConfig.parse(config)
        if not params["_config"].fits(wgc.current_device(), 4):
            pytest.skip(f"{config} does not fit this adapter")
    for (m, k, n), off in (((70, 260, 36), 2), ((64, 256, 32), 0), ((64, 256, 32), 4)):
        # a: (2, m, k) rows of a (m, 2, k + 4) buffer; b: (2, k, n) transposed out of (n, 2, k)
        flat_a = rng.standard_normal(off + m * 2 * (k + 4)).astype(dt)
        bn = rng.standard_normal((n, 2, k)).astype(dt)
        a_view = np.lib.stride_tricks.as_strided(
            flat_a[off:], (2, m, k), tuple(dt.itemsize * s for s in (k + 4, 2 * (k + 4), 1)))
        got = _direct(flat_a, bn, dict(params, _la=((2, m, k), (k + 4, 2 * (k + 4), 1), off),
                                       _lb=((2, k, n), (k, 1, 2 * k), 0)))
        want = np.matmul(a_view, np.transpose(bn, (1, 2, 0)), dtype=np.float64)
        assert_product_close(got, want, dtype)


def test_mixed_precision_reads_views(rng):
    dt = float_dtype("f16")
    an = rng.standard_normal((48, 3, 64)).astype(dt)  # a (3, 48, 64) rows 192 apart
    bn = rng.standard_normal((64, 3, 40)).astype(dt)  # b (3, 64, 40) rows 120 apart
    got = _direct(an, bn, {"_la": ((3, 48, 64), (64, 192, 1), 0),
                           "_lb": ((3, 64, 40), (40, 120, 1), 0), "precision": "mixed"})
    a, b = np.transpose(an, (1, 0, 2)), np.transpose(bn, (1, 0, 2))
    want = np.matmul(a, b, dtype=np.float64)
    bound = np.matmul(np.abs(a), np.abs(b), dtype=np.float64)
    assert np.all(np.abs(got - want) <= 0.02 * bound + 1e-2)


def test_matmul_refuses_a_view_past_the_buffer():
    a = np.ones(20, np.float32)
    b = np.ones((4, 3), np.float32)
    with pytest.raises(ShapeError, match=r"matmul: a.*\(5, 4\).*reaches element 20.*20"):
        _direct(a, b, {"_la": ((5, 4), (4, 1), 1)})


def test_matmul_refuses_a_view_with_no_unit_matrix_stride():
    a = np.ones(40, np.float32)
    b = np.ones((4, 3), np.float32)
    with pytest.raises(ArgumentError, match=r"'_la'.*strides \(8, 2\).*1"):
        _direct(a, b, {"_la": ((5, 4), (8, 2), 0)})


@pytest.mark.needs("shader-int64")  # the encoder's token ids and shapes are int64
def test_interpreted_attention_reads_its_heads_in_place(autofused, monkeypatch):
    """An ONNX encoder run by the interpreter (heads split by Reshape and Transpose, K^T a
    second Transpose, the heads merged by a Transpose and a Reshape): no copy, each layer's
    Q, K and V (column views of one merged product) are read in place by the attention
    kernel, which writes its rows where the merge puts them; the result is onnxruntime's."""
    pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")
    import onnxruntime as ort
    import test_onnx_transformer as enc

    m = enc.encoder(False)
    model = wgc.ml.load_onnx(m)
    assert model.path == "interpreted"
    feeds = enc._inputs(np.random.default_rng(1), 64, 15)  # heads above the host-fold size
    model.run(feeds)
    queued = []
    enqueue = _lazy.Batch.enqueue
    monkeypatch.setattr(_lazy.Batch, "enqueue",
                        lambda batch, op: (queued.append(op.label), enqueue(batch, op))[1])
    feeds = enc._inputs(np.random.default_rng(2), 64, 16)
    got = model.run(feeds)[0]
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # linear layers with their bias in, Q, K and V as one product (ml/fuse_linear.py)
    products = queued.count("matmul") + queued.count("matmul_bias")
    assert products == 4 * enc.LAYERS and queued.count("attention") == enc.LAYERS
    # from each layer's first product to the output projection after the attention kernel,
    # no copy (Q, K, V and K^T: 4 copies a layer without the views, the merge of the heads
    # one more where the kernel wrote its rows in place)
    first = [i for i, x in enumerate(queued) if x == "layer_norm"][:2 * enc.LAYERS:2]
    for start, end in zip(first, [i for i, x in enumerate(queued) if x == "attention"],
                          strict=True):
        assert not {"region_copy", "strided_copy"} & set(queued[start:end + 2])
        assert queued[end + 1] in ("matmul", "matmul_bias")


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 3, 1), (2, 1, 4)])
def test_held_slices_of_unstack_read_by_elementwise_ops(autofused, shape, rng):
    """unstack's pieces are held copies; elementwise ops read them through their views, a
    one-element piece too (its view then has no dimensions left, only its offset)."""
    xn = rng.standard_normal(shape).astype(np.float32)
    x = xp.asarray(xn)
    for i, piece in enumerate(xp.unstack(x, axis=1)):
        want = np.isnan(xn[:, i, :]) == np.isnan(xn[:, i, :] * 2)
        got = xp.isnan(piece) == xp.isnan(x[:, i, :] * 2.0)
        np.testing.assert_array_equal(got.to_numpy(), want)
        np.testing.assert_array_equal((piece * 3.0).to_numpy(), xn[:, i, :] * np.float32(3))


def test_reshape_view_is_numpys_reshape_without_a_copy():
    """reshape_view of permuted views of a 5-D array against numpy, for every split of one
    axis and merge of two: a view where numpy reshapes without copying (the same elements),
    None exactly where numpy must copy."""
    import itertools

    from wgcompute.kernels.matmul.shapes import reshape_view

    base = np.arange(2 * 3 * 4 * 5 * 6).reshape(2, 3, 4, 5, 6)
    flat, seen = base.reshape(-1), 0
    for perm in itertools.permutations(range(5)):
        a = base.transpose(perm)
        view = (a.shape, tuple(s // a.itemsize for s in a.strides), 0)
        shapes = [a.shape[:d] + (p, a.shape[d] // p) + a.shape[d + 1:]
                  for d in range(5) for p in range(1, a.shape[d] + 1) if a.shape[d] % p == 0]
        shapes += [a.shape[:d] + (a.shape[d] * a.shape[d + 1],) + a.shape[d + 2:]
                   for d in range(4)]
        for shape in shapes:
            got = reshape_view(view, shape)
            try:
                np.reshape(a, shape, copy=False)
                no_copy = True
            except ValueError:
                no_copy = False
            assert (got is not None) == no_copy, (a.shape, a.strides, shape)
            if got is not None:
                idx = np.lib.stride_tricks.as_strided(np.arange(flat.size), got[0],
                                                      [s * 8 for s in got[1]])
                np.testing.assert_array_equal(flat[idx], a.reshape(shape))
                seen += 1
    assert seen > 1000
