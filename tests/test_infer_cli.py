"""`wgcompute infer` and examples/classify.py on a MobileNetV2 the test builds (random
weights), checked against onnxruntime on the same crops: the probabilities and top classes
of each bundled photo, with batches of 1 and 2 (the last one padded), labels and --json.
On a Dask cluster (--workers, --scheduler, a worker killed mid-run) the run in one process
is the reference: the same bytes of output."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (pip install 'wgcompute[ml]')")

import wgcompute as wgc  # noqa: E402
from wgcompute.cli import main  # noqa: E402
from wgcompute.cli.infer import (  # noqa: E402
    IMAGENET_MEAN,
    IMAGENET_STD,
    crop,
    decode_batches,
    load_crop,
)
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
    x = load_crop(photo, SIZE)[..., :3].astype(np.float32) / 255
    x = ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)[None].astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    logits = sess.run(None, {"input": x})[0][0].astype(np.float64)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def infer(*args):
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    return subprocess.run([sys.executable, "-m", "wgcompute", "infer", *args],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("batch", ["1", pytest.param("2", marks=pytest.mark.slow)])
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


def test_load_crop_matches_the_array_crop_and_refuses_what_it_cannot_decode(tmp_path):
    """load_crop (PIL straight from the file) gives crop()'s pixels where no reduced-scale
    decode applies (the image is less than twice the resize target), and within JPEG's
    rounding where one does; bad files, 16-bit samples and animations are refused by
    name."""
    from PIL import Image

    for photo in PHOTOS:
        for size in (224, 64):
            want = crop(wgc.image.read_file(photo), size)
            got = load_crop(photo, size)
            w, h = Image.open(photo).size
            target = round(size * 256 / 224)
            if photo.endswith(".png") or min(w, h) < 2 * target:  # decoded at full scale
                np.testing.assert_array_equal(got, want)
            else:  # e.g. astronaut.jpg (512²) at 224: decoded at 256², then resized
                diff = np.abs(got.astype(int) - want).mean()
                assert diff < 4, (photo, size, diff)
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(wgc.ArgumentError, match="broken.jpg"):
        load_crop(str(bad), 32)
    wide = tmp_path / "wide.png"
    Image.fromarray(np.arange(40 * 40, dtype=np.uint16).reshape(40, 40)).save(wide)
    with pytest.raises(wgc.DtypeError, match="8-bit"):
        load_crop(str(wide), 32)
    gif = tmp_path / "anim.gif"
    frames = [Image.new("RGB", (40, 40), c) for c in ("red", "blue")]
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    with pytest.raises(wgc.ShapeError, match="2 frames"):
        load_crop(str(gif), 32)


def test_decode_batches_keeps_order_pads_and_reports_failures(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    files = [PHOTOS[0], str(bad), PHOTOS[1], PHOTOS[2], str(bad)]
    got = list(decode_batches(files, 32, 2, threads=3, ahead=1))
    assert len(got) == 3
    (a0, ok0, f0), (a1, ok1, f1), (a2, ok2, f2) = got
    assert [p for _, p in ok0] == [PHOTOS[0]] and [p for p, _ in f0] == [str(bad)]
    assert ok1 == [(0, PHOTOS[1]), (1, PHOTOS[2])] and f1 == []
    assert a2 is None and ok2 == [] and [p for p, _ in f2] == [str(bad)]
    np.testing.assert_array_equal(a0[0], load_crop(PHOTOS[0], 32))
    assert not a0[1].any()  # a failed slot is blank
    np.testing.assert_array_equal(a1[1], load_crop(PHOTOS[2], 32))


# -- on a Dask cluster ------------------------------------------------------------------------
def _images(folder, n):
    from PIL import Image

    folder.mkdir()
    rng = np.random.default_rng(3)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (100 + 7 * (i % 3), 120 + 5 * (i % 4), 3),
                                     dtype=np.uint8)).save(folder / f"im{i:02d}.png")
    return folder


def _main(capsys, *args):
    rc = main(["infer", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_infer_workers_gives_the_bytes_of_one_process(model_path, tmp_path, capsys):
    """Batches of 2 (the last padded) with a corrupt image among the good ones: the same
    JSON, byte for byte, from 2 worker processes as from this one, the same failure report
    and exit code 1; -o writes that JSON too, and leaves no temporary file."""
    pytest.importorskip("distributed", reason="needs wgcompute[dask]")
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    files = [PHOTOS[0], str(bad), *PHOTOS[1:]]
    args = [model_path, *files, "--json", "--top", "3", "--batch", "2", "--no-progress"]
    rc1, out1, err1 = _main(capsys, *args, "-o", tmp_path / "one.json")
    rc2, out2, err2 = _main(capsys, *args, "-o", tmp_path / "two.json", "--workers", "2")
    assert rc1 == rc2 == 1, err2
    assert out1 == out2
    doc = json.loads(out2)
    assert [r["file"] for r in doc["results"]] == PHOTOS
    assert [f["file"] for f in doc["failed"]] == [str(bad)]
    failure = f"1 failed:\n  {bad}: ArgumentError: path: cannot decode"
    assert failure in err1 and failure in err2
    assert (tmp_path / "one.json").read_text() == (tmp_path / "two.json").read_text() == out1
    assert sorted(os.listdir(tmp_path)) == ["broken.jpg", "one.json", "two.json"]


def test_infer_out_and_cluster_arguments_are_checked(model_path, tmp_path, capsys):
    for extra, flag in ((["--workers", "2", "--scheduler", "tcp://x:1"], "--workers"),
                        (["--workers", "0"], "--workers"), (["--workers", "-1"], "--workers"),
                        (["--threads", "0"], "--threads"), (["--batch", "0"], "--batch"),
                        (["-o", tmp_path / "none" / "r.json"], "-o"), (["-o", tmp_path], "-o"),
                        (["--mixed"], "--mixed")):
        rc, out, err = _main(capsys, model_path, PHOTOS[0], *extra)
        assert rc == 2 and err.startswith(f"wgcompute infer: error: {flag}: "), (extra, err)
        assert out == ""
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("distributed", reason="needs wgcompute[dask]")
    with wgc.dask.LocalCluster(n_workers=2, threads_per_worker=4) as cluster, \
            cluster.get_client() as client:
        client.wait_for_workers(2, timeout=120)
        yield client


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_infer_on_a_scheduler_with_a_worker_killed_mid_run(model_path, tmp_path, capsys,
                                                            cluster):
    """A worker SIGKILLed while it classifies: Dask runs its batches again on the other, and
    the output is complete and the same as in one process."""
    src = _images(tmp_path / "in", 24)
    rc1, want, _ = _main(capsys, model_path, src, "--json", "--batch", "2", "--no-progress")
    assert rc1 == 0
    pids = cluster.run(os.getpid)
    got = []
    run = threading.Thread(target=lambda: got.append(_main(
        capsys, model_path, src, "--json", "--batch", "2", "--no-progress", "--scheduler",
        cluster.scheduler.address)))
    run.start()
    for _ in range(3000):
        busy = [w for w, tasks in cluster.processing().items() if tasks and w in pids]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            break
        time.sleep(0.01)
    else:
        raise AssertionError("no worker was busy")
    assert run.is_alive()  # killed mid-run
    run.join(240)
    rc2, out, err = got[0]
    assert rc2 == 0, err
    assert out == want
    cluster.wait_for_workers(2, timeout=120)
