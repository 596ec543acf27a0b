"""What a new user meets in the first minutes, each checked as they would meet it: a quiet
first script on a headless machine, the CLI without the image extra, numpy photos and grey
images, the API page and guides covering what exists, no internal words in user text,
typing metadata in the wheel, and dir(wgc)."""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import wgcompute as wgc

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"


def test_a_first_script_on_a_headless_machine_prints_nothing_to_stderr():
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = ("import wgcompute as wgc; a = wgc.buffer([1.0, 2.0]); "
            "assert wgc.add(a, a).tolist() == [2.0, 4.0]; wgc.adapters()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""


def run_without_imageio(*args, cwd):
    """The CLI as `pip install wgcompute` (no extras) runs it: imageio cannot be imported."""
    code = ("import sys; sys.modules['imageio'] = None; sys.modules['imageio.v3'] = None; "
            "from wgcompute.cli import main; sys.exit(main(sys.argv[1:]))")
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_process_without_the_image_extra_fails_once_up_front(tmp_path):
    r = run_without_imageio("process", str(DATA), "-o", str(tmp_path / "out"), "--pipeline",
                            "grayscale", cwd=tmp_path)
    assert r.returncode == 2
    assert 'pip install "wgcompute[image]"' in r.stderr
    assert "processed" not in r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["--frames", "2", "--out", "frames"],
                                  [str(DATA / "chelsea.png"), "--frames", "1"]])
def test_view_without_the_image_extra_fails_once_up_front(tmp_path, args):
    r = run_without_imageio("view", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert 'pip install "wgcompute[image]"' in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "frames").exists()


def test_a_numpy_photo_through_an_image_kernel_hints_at_image_from_numpy():
    photo = np.asarray(Image.open(DATA / "chelsea.png").convert("RGB"))
    with pytest.raises(wgc.ShapeError, match=r"wgc.image.from_numpy\(photo\)"):
        wgc.image.apply("gaussian_blur", wgc.from_numpy(photo), sigma=1.0)
    blurred = wgc.image.apply("gaussian_blur", wgc.image.from_numpy(photo), sigma=1.0)
    assert blurred.shape == photo.shape[:2] + (4,)


def test_grey_images_come_back_with_one_channel(tmp_path):
    photo = np.asarray(Image.open(DATA / "chelsea.png").convert("RGB"))
    img = wgc.image.from_numpy(photo)
    grey = wgc.image.apply("grayscale", img)
    g = wgc.image.to_numpy(grey, channels=1)
    assert g.shape == photo.shape[:2] and g.dtype == np.uint8
    np.testing.assert_array_equal(g, wgc.image.to_numpy(grey)[..., 0])
    with pytest.raises(wgc.ArgumentError, match="has colour; run the grayscale stage"):
        wgc.image.to_numpy(img, channels=1)
    path = wgc.image.save(grey, tmp_path / "g.png")
    assert Image.open(path).mode == "L"
    np.testing.assert_array_equal(wgc.image.load(path).to_numpy(), wgc.image.to_numpy(grey))


def test_process_writes_opaque_results_as_rgb_and_grey_ones_as_one_channel(tmp_path):
    from wgcompute.cli import main

    assert main(["process", str(DATA / "chelsea.png"), "-o", str(tmp_path / "c"),
                 "--pipeline", "gaussian_blur(sigma=1)", "--no-progress"]) == 0
    assert Image.open(tmp_path / "c" / "chelsea.png").mode == "RGB"
    assert main(["process", str(DATA / "chelsea.png"), "-o", str(tmp_path / "g"),
                 "--pipeline", "grayscale", "--no-progress"]) == 0
    assert Image.open(tmp_path / "g" / "chelsea.png").mode == "L"


def python_blocks(path: Path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S))


def test_the_numpy_guide_is_in_the_site():
    assert (ROOT / "docs" / "guide" / "numpy.md").exists()
    assert "guide/numpy.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert python_blocks(ROOT / "docs" / "guide" / "numpy.md").count("assert") >= 10


def test_guides_and_the_api_page_cover_reductions_softmax_transpose_fill():
    guides = "\n".join(python_blocks(p) for p in (ROOT / "docs" / "guide").glob("*.md"))
    for call in ("wgc.sum(", "wgc.max(", "wgc.mean(", "wgc.argmax(", "wgc.softmax(",
                 "wgc.transpose(", "wgc.fill(", "wgc.astype("):
        assert call in guides, f"no guide example calls {call}"
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in ("reduce_sum", "reduce_max", "reduce_min", "mean", "argmax", "softmax",
                 "transpose", "fill", "astype"):
        assert re.search(rf"^\s+- {name}$", api, re.M), f"api.md does not list {name}"


def test_no_internal_words_reach_users():
    """Users never saw the design notes the library grew from: text they read names the
    thing itself."""
    found = []
    files = [ROOT / "README.md"]
    for folder, pattern in (("docs", "*.md"), ("wgcompute", "*.py"), ("viewer", "*.py"),
                            ("examples", "*.py"), ("examples", "*.md")):
        files += sorted((ROOT / folder).rglob(pattern))
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            random_seed = re.search(r"\bseed\b\s*(=|:|\)|,)|``seed``|rng|random", line, re.I)
            if re.search(r"\bseed(s|'s)?\b", line, re.I) and not random_seed:
                found.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
    r = subprocess.run([sys.executable, "-m", "wgcompute.cli", "demo", "--help"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, XDG_RUNTIME_DIR="/tmp"))
    assert r.returncode == 0 and "seed" not in r.stdout.lower()


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(),
                    reason="builds the wheel from a source checkout; this is a copy of the "
                           "tests beside an installed wheel (the GPU runs)")
@pytest.mark.slow
def test_the_wheel_ships_py_typed_and_the_shaders(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                        str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    if r.returncode and "No matching distribution" in r.stdout + r.stderr:
        pytest.skip("pip reaches no package index for the build backend (setuptools)")
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = tmp_path.glob("wgcompute-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "wgcompute/py.typed" in names
    data = {p.relative_to(ROOT).as_posix() for pattern in ("*.wgsl", "*.lark")
            for p in (ROOT / "wgcompute").rglob(pattern)}
    assert data and data <= names, sorted(data - names)
    # nothing that is no longer in the tree (a stale build/ folder ships moved modules)
    stale = sorted(n for n in names if n.startswith("wgcompute/") and not (ROOT / n).exists())
    assert not stale, f"the wheel holds files the source tree no longer has: {stale}"
    assert (Path(wgc.__file__).parent / "py.typed").exists()


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(),
                    reason="reads pyproject.toml of a source checkout")
def test_the_checkout_is_its_own_package_and_ships_every_template():
    """The source tree is laid out as installed (no package-dir remaps: the checkout imports
    from its root), and each .wgsl template and .lark grammar beside the code that loads it
    is package data of its package."""
    import fnmatch
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in setup, setup["package-dir"]
    find = setup.get("packages", {}).get("find", {}) if isinstance(
        setup.get("packages"), dict) else {}
    listed = setup.get("packages") if isinstance(setup.get("packages"), list) else None
    patterns = setup.get("package-data", {})
    missing = []
    for f in sorted((ROOT / "wgcompute").rglob("*")):
        if f.suffix not in (".wgsl", ".lark"):
            continue
        package = f.parent.relative_to(ROOT).as_posix().replace("/", ".")
        found = (package in listed if listed is not None
                 else any(fnmatch.fnmatch(package, p) for p in find.get("include", ["*"])))
        shipped = any(fnmatch.fnmatch(f.name, p)  # "*": every package's files of that kind
                      for p in (*patterns.get(package, ()), *patterns.get("*", ())))
        if not ((f.parent / "__init__.py").exists() and found and shipped):
            missing.append(f.relative_to(ROOT).as_posix())
    assert not missing, f"not shipped in the wheel: {missing}"


def test_numpy_names_are_listed_by_dir():
    for name in ("sum", "max", "min", "mean", "argmax", "astype", "transpose", "matmul"):
        assert name in dir(wgc), name
    assert wgc.sum(wgc.buffer([[1.0, 2.0], [3.0, 4.0]])).item() == 10.0  # the namespace's
