"""Every ```python block of README.md and docs/**/*.md runs: the blocks of one file in order,
in one fresh namespace, from the repository root. A block opts out only visibly, with
``<!-- no-test: reason -->`` on the line before it, or runs only where the adapter can do what
``<!-- needs: capability, ... -->`` names (tests/conftest.py's ``needs``). And `mkdocs build
--strict` passes."""

import importlib.util
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\s*$")
END = re.compile(r"^```\s*$")
NO_TEST = re.compile(r"^<!--\s*no-test:\s*(?P<reason>.*?)\s*-->\s*$")
NEEDS = re.compile(r"^<!--\s*needs:\s*(?P<needs>.*?)\s*-->\s*$")


def doc_files() -> list[Path]:
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.exists()]


def python_blocks(path: Path):
    """(first line number, source, skip reason or None, capabilities needed) for each ```python
    block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i + 1
            j = start
            while j < len(lines) and not END.match(lines[j]):
                j += 1
            if j == len(lines):
                raise AssertionError(f"{path.name}:{i + 1}: ```python block is never closed")
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = NO_TEST.match(lines[k].strip()) if k >= 0 else None
            reason = None
            if m:
                reason = m.group("reason")
                assert reason, f"{path.name}:{k + 1}: a no-test marker must give its reason"
            n = NEEDS.match(lines[k].strip()) if k >= 0 else None
            needs = tuple(c.strip() for c in n.group("needs").split(",") if c.strip()) if n \
                else ()
            assert not n or needs, f"{path.name}:{k + 1}: a needs marker must name something"
            yield start + 1, "\n".join(lines[start:j]) + "\n", reason, needs
            i = j + 1
        else:
            i += 1


FILES = doc_files()


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(ROOT)) for f in FILES])
@pytest.mark.slow
def test_python_blocks_run(path, monkeypatch, adapter_lacks):
    blocks = list(python_blocks(path))
    if not blocks:
        pytest.skip(f"{path.relative_to(ROOT)} has no ```python blocks")
    monkeypatch.chdir(ROOT)  # snippets use paths as a reader in the repository would
    namespace = {"__name__": "__doc_snippet__"}
    ran = 0
    for line, source, skip, needs in blocks:
        skip = skip or next((why for why in map(adapter_lacks, needs) if why), None)
        if skip is not None:
            print(f"{path.name}:{line}: not run ({skip})")
            continue
        label = f"{path.relative_to(ROOT)}:{line}"
        try:
            exec(compile(source, label, "exec"), namespace)
        except Exception:
            pytest.fail(f"the ```python block at {label} failed:\n{traceback.format_exc()}",
                        pytrace=False)
        ran += 1
    print(f"{path.name}: {ran} block(s) ran")


def test_marker_parsing_is_what_the_docs_promise(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n\n```python\nx = 1\n```\n\n<!-- no-test: needs a window -->\n\n"
                  "```python\nraise SystemExit\n```\n```sh\nnot python\n```\n"
                  "<!-- needs: several-devices, f64 -->\n```python\ny = 2\n```\n")
    got = list(python_blocks(md))
    assert [(line, skip, needs) for line, _, skip, needs in got] == [
        (4, None, ()), (10, "needs a window", ()), (17, None, ("several-devices", "f64"))]
    assert got[0][1] == "x = 1\n"


def test_the_guides_exist_and_have_code():
    for name in ("index.md", "guide/buffers.md", "guide/kernels.md", "api.md"):
        assert (ROOT / "docs" / name).exists(), name
    for name in ("index.md", "guide/buffers.md", "guide/kernels.md"):
        assert list(python_blocks(ROOT / "docs" / name)), f"{name} has no Python example"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[dev]' installs it)")
@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("wgcompute.free_many", "wgcompute.buffer.Buffer",
                 "wgcompute.kernels.core.registry.register_kernel", "wgcompute.runtime.device_info",
                 "wgcompute.errors.ShapeError"):
        assert f'id="{name}"' in api, f"the API reference lacks {name}"
