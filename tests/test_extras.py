"""What a user without an optional extra sees: each feature that needs one fails once, with a
WgComputeError naming pip install "wgcompute[...]", and the CLI exits with one clean line.

Each case runs in a fresh interpreter in which the extra's packages cannot be imported (a
sys.meta_path finder placed before wgcompute is imported refuses them, as a missing
installation does), then exercises the public API or the CLI entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

# a fresh interpreter per case, end to end: `make test` and CI run them, `make test-fast` not
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "data")

PRELUDE = """
import importlib.abc, json, sys
BLOCKED = {blocked!r}

class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
"""


def without(blocked, code: str, *args) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where the ``blocked`` packages do not import."""
    src = PRELUDE.format(blocked=set(blocked)) + textwrap.dedent(code)
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", src, *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)


def result(r: subprocess.CompletedProcess):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


CATCH = """
import numpy as np
import wgcompute as wgc

def attempt(f):
    try:
        f()
    except Exception as e:
        return [type(e).__name__, str(e), isinstance(e, wgc.WgComputeError),
                isinstance(e, ImportError)]
    return None
"""

ML = {"onnx", "onnxruntime", "PIL"}
DASK = {"dask", "distributed"}
IMAGE = {"imageio", "tqdm"}
WINDOW = {"rendercanvas", "glfw"}


def test_ml_without_onnx_names_the_extra(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")  # a file: the check for the extra comes before reading it
    r = without(ML, CATCH + """
path = sys.argv[1]
print(json.dumps({"load": attempt(lambda: wgc.ml.load_onnx(path)),
                  "bytes": attempt(lambda: wgc.ml.load_onnx(b"\\x08\\x07")),
                  "register": attempt(lambda: wgc.ml.register_model("net_x", path)),
                  "relu": wgc.ml.relu(np.array([-1.0, 2.0], np.float32)).tolist()}))
""", model)
    got = result(r)
    for key in ("load", "bytes", "register"):
        name, msg, is_wgc, is_import = got[key]
        assert name == "MissingExtraError" and is_wgc and is_import, got[key]
        assert 'pip install "wgcompute[ml]"' in msg and "onnx" in msg, msg
    assert "load_onnx" in got["load"][1] and "register_model" in got["register"][1]
    assert got["relu"] == [0.0, 2.0]  # the operators need no extra


def test_infer_without_onnx_is_one_line(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    r = without(ML, """
import wgcompute.cli
sys.exit(wgcompute.cli.main(["infer", sys.argv[1], sys.argv[2]]))
""", model, os.path.join(DATA, "chelsea.png"))
    assert r.returncode in (1, 2), r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("wgcompute infer: error: ") and \
        'pip install "wgcompute[ml]"' in lines[0], lines


def test_dask_without_the_extra(tmp_path):
    r = without(DASK, CATCH + """
has = hasattr(wgc, "dask")
try:
    wgc.dask
except AttributeError as e:
    attr = [type(e).__name__, str(e), isinstance(e, wgc.WgComputeError),
            type(e.__cause__).__name__]
def imp():
    import wgcompute.dask  # noqa: F401
def imp_from():
    from wgcompute import dask  # noqa: F401
print(json.dumps({"has": has, "attr": attr, "import": attempt(imp),
                  "from": attempt(imp_from), "dir": "dask" in dir(wgc)}))
""")
    got = result(r)
    assert got["has"] is False
    name, msg, is_wgc, cause = got["attr"]
    assert name == "MissingExtraAttributeError" and is_wgc and cause == "MissingExtraError"
    assert 'pip install "wgcompute[dask]"' in msg and "wgc.dask" in msg, msg
    for key in ("import", "from"):
        assert got[key][0] == "MissingExtraError" and got[key][3], got[key]
        assert 'pip install "wgcompute[dask]"' in got[key][1]


def test_process_on_a_cluster_without_dask_is_one_line(tmp_path):
    r = without(DASK, """
import wgcompute.cli
sys.exit(wgcompute.cli.main(["process", sys.argv[1], "-o", sys.argv[2], "--pipeline",
                             "invert", "--workers", "1", "--no-progress"]))
""", os.path.join(DATA, "chelsea.png"), tmp_path / "out")
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr, r.stderr
    assert 'pip install "wgcompute[dask]"' in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_image_files_without_imageio(tmp_path):
    r = without(IMAGE, CATCH + """
img = wgc.image.from_numpy(np.zeros((2, 3, 3), np.uint8))
print(json.dumps({"load": attempt(lambda: wgc.image.load(sys.argv[1])),
                  "save": attempt(lambda: wgc.image.save(img, sys.argv[2])),
                  "frames": attempt(lambda: wgc.image.load_frames(sys.argv[1])),
                  "has": wgc.image.has_imageio()}))
""", os.path.join(DATA, "chelsea.png"), tmp_path / "x.png")
    got = result(r)
    assert got["has"] is False
    for key in ("load", "save", "frames"):
        name, msg, is_wgc, is_import = got[key]
        assert name == "MissingExtraError" and is_wgc and is_import, got[key]
        assert 'pip install "wgcompute[image]"' in msg and "imageio" in msg, msg
        assert "cannot decode" not in msg
    assert not (tmp_path / "x.png").exists()


def test_process_without_imageio_is_one_line(tmp_path):
    r = without(IMAGE, """
import wgcompute.cli
sys.exit(wgcompute.cli.main(["process", sys.argv[1], "-o", sys.argv[2], "--pipeline",
                             "invert"]))
""", os.path.join(DATA, "chelsea.png"), tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert 'pip install "wgcompute[image]"' in r.stderr


def test_surface_and_view_without_the_window_extra(tmp_path):
    r = without(WINDOW, CATCH + """
print(json.dumps({"surface": attempt(lambda: wgc.create_surface(8, 8, offscreen=True)),
                  "window": attempt(lambda: wgc.create_surface(8, 8, offscreen=False))}))
""")
    got = result(r)
    for key in ("surface", "window"):
        name, msg, is_wgc, is_import = got[key]
        assert name == "MissingExtraError" and is_wgc, got[key]
        assert 'pip install "wgcompute[window]"' in msg and "rendercanvas" in msg, msg
    r = without(WINDOW, """
import wgcompute.cli
sys.exit(wgcompute.cli.main(["view", "--frames", "1", "--out", sys.argv[1]]))
""", tmp_path)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert 'pip install "wgcompute[window]"' in r.stderr


def test_hold_clocks_without_the_nvidia_extra():
    """On a machine without an NVIDIA GPU (or without nvidia-ml-py) hold_clocks=True is a
    DeviceError naming why; the device opens normally without it."""
    r = without({"pynvml", "cuda"}, CATCH + """
print(json.dumps({"hold": attempt(lambda: wgc.device(hold_clocks=True))}))
""")
    name, msg, is_wgc, _ = result(r)["hold"]
    assert name == "DeviceError" and is_wgc and msg.startswith("hold_clocks: cannot hold"), msg


def test_the_installed_extras_work_here():
    """The reference for the cases above: with every extra installed, the same calls reach
    their real work (the blocked runs differ only by the missing packages)."""
    r = without(set(), """
import wgcompute as wgc
print(json.dumps({"dask": hasattr(wgc, "dask"),
                  "image": wgc.image.load(sys.argv[1]).shape}))
""", os.path.join(DATA, "chelsea.png"))
    got = result(r)
    assert got["dask"] is True and got["image"] == [300, 451, 4]


@pytest.mark.parametrize("module", ["onnx", "dask", "imageio.v3", "rendercanvas", "PIL"])
def test_require_gives_the_module_when_installed(module):
    from wgcompute._extras import require

    assert require(module, "a test").__name__ == module
    assert np is not None
