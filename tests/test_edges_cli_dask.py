"""Edges of `wgcompute infer`, wgc.dask and wgc.image's pipeline text: models that end in
(Log)Softmax against onnxruntime, label files and batch sizes that do not fit, a model with
external data as cluster work (a decoy data file in the worker's working directory), f16
reductions against numpy, scheduler addresses that are not addresses, pipeline text nested
past the parser, and a resize larger than the adapter's buffers."""

import json
import os

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.cli import main

PHOTOS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "examples", "data")
PHOTOS = sorted(os.path.join(PHOTOS_DIR, n) for n in os.listdir(PHOTOS_DIR)
                if n.endswith((".jpg", ".png")))
SIZE, CLASSES = 32, 7


# -- infer ---------------------------------------------------------------------------------------
def _classifier(path, last=None, *, external=None, classes=CLASSES, seed=0):
    """A small ONNX classifier: (N, 3, SIZE, SIZE) -> global average pool -> flatten -> Gemm
    -> ``last`` (None, "Softmax" or "LogSoftmax"), saved at ``path`` (its weights in the file
    ``external`` beside it when given)."""
    onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, classes)) * 6).astype(np.float32)
    b = rng.standard_normal(classes).astype(np.float32)
    nodes = [helper.make_node("GlobalAveragePool", ["input"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "w", "b"], ["logits" if last else "output"])]
    if last:
        nodes.append(helper.make_node(last, ["logits"], ["output"], axis=1))
    graph = helper.make_graph(
        nodes, "edge_classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", classes])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=external, size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return str(path)


def _ort_outputs(model_path, photos):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")
    from wgcompute.cli.infer import IMAGENET_MEAN, IMAGENET_STD, load_crop

    x = np.stack([load_crop(p, SIZE)[..., :3] for p in photos]).astype(np.float32) / 255
    x = ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2).astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0].astype(np.float64)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _infer(capsys, *args):
    rc = main(["infer", *map(str, args), "--no-progress"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _shown(out):
    """Per image: the (class, prob) pairs `infer --json` printed, every class."""
    return [[(t["class"], t["prob"]) for t in r["top"]] for r in json.loads(out)["results"]]


def _check(shown, want):
    assert len(shown) == len(want)
    for pairs, row in zip(shown, want):
        classes = [k for k, _ in pairs]
        assert classes == list(np.argsort(-row, kind="stable")), (pairs, row)
        np.testing.assert_allclose([p for _, p in pairs], row[classes], atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("last", ["Softmax", "LogSoftmax"])
def test_infer_does_not_apply_softmax_twice(tmp_path, capsys, last):
    """A model that ends in Softmax gives probabilities already (shown as onnxruntime gives
    them); one that ends in LogSoftmax gives their logarithms (shown as their exp)."""
    path = _classifier(tmp_path / "m.onnx", last)
    want = _ort_outputs(path, PHOTOS)
    if last == "LogSoftmax":
        want = np.exp(want)
    assert np.allclose(want.sum(axis=1), 1) and want.max() > 0.5  # far from uniform
    rc, out, err = _infer(capsys, path, *PHOTOS, "--json", "--top", CLASSES, "--batch", 2)
    assert rc == 0, err
    _check(_shown(out), want)


def test_infer_softmax_flag_forces_it_either_way(tmp_path, capsys):
    soft = _classifier(tmp_path / "soft.onnx", "Softmax")
    plain = _classifier(tmp_path / "plain.onnx")
    probs, logits = _ort_outputs(soft, PHOTOS), _ort_outputs(plain, PHOTOS)
    for path, flag, want in ((soft, "yes", _softmax(probs)), (soft, "no", probs),
                             (soft, "auto", probs), (plain, "auto", _softmax(logits)),
                             (plain, "yes", _softmax(logits)), (plain, "no", logits)):
        rc, out, err = _infer(capsys, path, *PHOTOS, "--json", "--top", CLASSES,
                              "--softmax", flag)
        assert rc == 0, (flag, err)
        _check(_shown(out), want)
    with pytest.raises(SystemExit) as e:
        main(["infer", soft, PHOTOS[0], "--softmax", "maybe"])
    assert e.value.code == 2 and "--softmax" in capsys.readouterr().err


def test_infer_labels_must_match_the_classes(tmp_path, capsys):
    path = _classifier(tmp_path / "m.onnx")
    for n in (CLASSES + 1, CLASSES - 1):
        labels = tmp_path / f"labels{n}.txt"
        labels.write_text("\n".join(f"name {i}" for i in range(n)) + "\n")
        rc, out, err = _infer(capsys, path, PHOTOS[0], "--labels", labels)
        assert rc == 2 and out == "", err
        assert err.startswith("wgcompute infer: error: --labels: ")
        assert f"{n} names" in err and f"{CLASSES} classes" in err


def test_infer_batch_larger_than_the_images_is_clamped(tmp_path, capsys):
    path = _classifier(tmp_path / "m.onnx", "Softmax")
    rc, want, _ = _infer(capsys, path, *PHOTOS, "--json", "--batch", len(PHOTOS))
    assert rc == 0
    rc, out, err = _infer(capsys, path, *PHOTOS, "--json", "--batch", 10 ** 9)
    assert rc == 0, err
    assert out == want
    assert f"--batch: 1000000000 is more than the {len(PHOTOS)} image(s)" in err


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_infer_workers_carry_a_models_external_data(tmp_path, capsys, monkeypatch):
    """A model whose weights live in a file beside it, classified on a worker process whose
    working directory holds a decoy file of the same name: the worker computes what this
    process and onnxruntime compute from the model's own folder."""
    pytest.importorskip("distributed", reason="needs wgcompute[dask]")
    (tmp_path / "model").mkdir()
    path = _classifier(tmp_path / "model" / "m.onnx", "Softmax", external="weights.bin")
    real = (tmp_path / "model" / "weights.bin").read_bytes()
    decoy = tmp_path / "elsewhere"
    decoy.mkdir()
    (decoy / "weights.bin").write_bytes(np.frombuffer(real, np.float32)[::-1].tobytes())
    monkeypatch.chdir(decoy)
    want = _ort_outputs(path, PHOTOS)
    args = [path, *PHOTOS, "--json", "--top", CLASSES, "--batch", 2]
    rc1, out1, err1 = _infer(capsys, *args)
    rc2, out2, err2 = _infer(capsys, *args, "--workers", 1)
    assert rc1 == 0 and rc2 == 0, err1 + err2
    _check(_shown(out1), want)
    assert out2 == out1
    w = wgc.dask.work(wgc.ml.load_onnx(path))
    assert w.recipe.data is not None and w.recipe.path is None  # the weights travel inline


# -- wgc.dask ------------------------------------------------------------------------------------
def test_dask_f16_reductions_accumulate_wider():
    """f16 chunks whose sums pass f16's largest value (65504): the mean is numpy's 1.0 (the
    chunks sum in f32, as its docstring says), and a sum whose parts overflow f16 but whose
    total does not is numpy's too."""
    da = pytest.importorskip("dask.array", reason="needs wgcompute[dask]")
    a = np.ones(200_000, np.float16)
    x = da.from_array(a, chunks=100_000)
    with _sync():  # dask's local scheduler: each chunk on this process's device
        m = wgc.dask.mean(x).compute()
        assert m.dtype == np.float16 and m == np.mean(a) == 1.0
        b = np.concatenate([np.full(20_000, 3, np.float16), np.full(20_000, -3, np.float16),
                            np.full(20_000, 2, np.float16)])  # partial sums 60000, -60000
        y = da.from_array(b, chunks=20_000)
        s = wgc.dask.sum(y, split_every=2).compute()
        assert s.dtype == b.sum().dtype == np.float16 and s == b.sum() == 40_000
        np.testing.assert_array_equal(wgc.dask.mean(y.reshape(3, 20_000), axis=1).compute(),
                                      b.reshape(3, 20_000).mean(axis=1))


def _sync():
    import dask

    return dask.config.set(scheduler="synchronous")


@pytest.mark.parametrize("address", ["nonsense://h:1", "127.0.0.1:notaport", "tcp://",
                                     "tcp://host", "tcp://127.0.0.1:99999"])
def test_dask_connect_names_a_bad_scheduler_address(address):
    pytest.importorskip("distributed", reason="needs wgcompute[dask]")
    with pytest.raises(wgc.ArgumentError, match="scheduler") as e:
        with wgc.dask.connect(scheduler=address):
            pass
    assert repr(address) in str(e.value)


# -- wgc.image ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-" * 1000 + "1", "-" * 10_000 + "1", "+" * 5000 + "1",
                                   "1" + "+1" * 100_000, "not " * 1000 + "1",
                                   "[" * 1000 + "1" + "]" * 1000, "(" * 300 + "1" + ")" * 300,
                                   "- " * 1000 + "1", "~" * 2000 + "1"])
def test_pipeline_text_nested_too_deep_is_refused(value):
    text = f"grayscale | gaussian_blur(radius={value})"
    with pytest.raises(wgc.ArgumentError, match="--pipeline stage 2 of 2") as e:
        wgc.image.parse_pipeline(text)
    assert "gaussian_blur" in str(e.value)


def test_process_pipeline_nested_too_deep_exits_2(tmp_path, capsys):
    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    rc = main(["process", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--pipeline",
               "gaussian_blur(radius=" + "-" * 10_000 + "1)", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("wgcompute process: error: --pipeline stage 1 of 1: ")
    assert "Traceback" not in err


def test_pipeline_literal_values_still_parse():
    stages = wgc.image.parse_pipeline("gaussian_blur(radius=3, sigma=1.5e-0) | "
                                      "convolve2d(weights=[[0, -1, 0], [-1, 5, -1], [0, -1, 0]])")
    assert stages[0].params == {"radius": 3, "sigma": 1.5}
    np.testing.assert_array_equal(stages[1].weights, [[0, -1, 0], [-1, 5, -1], [0, -1, 0]])


def test_resize_beyond_the_adapters_buffers_names_size():
    img = wgc.image.from_numpy(np.zeros((8, 8, 4), np.uint8))
    limit = wgc.current_device().limit("max-buffer-size")
    side = int((limit // 4) ** 0.5) + 2
    for size in ((10 ** 6, 10 ** 6), (side, side)):
        with pytest.raises(wgc.DeviceError, match=r"^resize: param 'size'") as e:
            wgc.image.apply("resize", img, size=size)
        assert str(size) in str(e.value) and "max-buffer-size" in str(e.value)
    small = wgc.image.apply("resize", img, size=(3, 5))  # what fits still runs
    assert small.shape == (3, 5, 4)
