"""`wgcompute infer` and examples/classify.py on a MobileNetV2 the test builds (random
weights), checked against onnxruntime on the same crops: the probabilities and top classes
of each bundled photo, with batches of 1 and 2 (the last one padded), labels and --json."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")

import wgcompute as wgc  # noqa: E402
from wgcompute.cli.infer import IMAGENET_MEAN, IMAGENET_STD, crop  # noqa: E402
from wgcompute.ml.builders import mobilenet_v2  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PHOTOS = sorted(str(p) for p in (ROOT / "examples" / "data").glob("*.jpg")) + \
    [str(ROOT / "examples" / "data" / "chelsea.png")]
SIZE, CLASSES = 96, 10


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("infer") / "mobilenet_v2.onnx"
    onnx.save(mobilenet_v2(seed=5, size=SIZE, num_classes=CLASSES), str(path))
    return str(path)


def reference_probs(model_path, photo):
    x = crop(wgc.image.read_file(photo), SIZE)[..., :3].astype(np.float32) / 255
    x = ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)[None].astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    logits = sess.run(None, {"input": x})[0][0].astype(np.float64)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def infer(*args):
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    return subprocess.run([sys.executable, "-m", "wgcompute", "infer", *args],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("batch", ["1", "2"])
def test_infer_json_matches_onnxruntime(model_path, tmp_path, batch):
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(f"class {i}" for i in range(CLASSES)) + "\n")
    r = infer(model_path, *PHOTOS, "--json", "--top", "3", "--batch", batch, "--labels",
              str(labels), "--no-progress")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [x["file"] for x in out["results"]] == PHOTOS and out["failed"] == []
    for res in out["results"]:
        want = reference_probs(model_path, res["file"])
        top = np.argsort(-want)[:3]
        assert [t["class"] for t in res["top"]] == list(top)
        assert [t["label"] for t in res["top"]] == [f"class {k}" for k in top]
        np.testing.assert_allclose([t["prob"] for t in res["top"]], want[top], atol=1e-5)
    assert "images/s" in r.stderr


def test_infer_text_output_and_errors(model_path, tmp_path):
    r = infer(model_path, PHOTOS[0], "--top", "2", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{PHOTOS[0]}: ") and "classified 1 of 1 image(s)" in r.stdout
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    r = infer(model_path, PHOTOS[0], str(bad), "--no-progress")
    assert r.returncode == 1 and "broken.jpg" in r.stderr and "1 failed" in r.stderr
    r = infer(str(tmp_path / "missing.onnx"), PHOTOS[0])
    assert r.returncode == 2 and "MODEL" in r.stderr
    r = infer(model_path, PHOTOS[0], "--labels", str(tmp_path / "none.txt"))
    assert r.returncode == 2 and "--labels" in r.stderr


def test_classify_example(model_path):
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "classify.py"), model_path],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("coffee.jpg (mobilenet_v2")
    probs = [float(line.split()[0]) for line in lines[1:6]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
