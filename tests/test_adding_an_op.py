"""docs/guide/adding-an-op.md builds a real op from its own text: its ```python blocks run here
in order (as tests/test_docs.py runs them), then the op they registered is checked further:
its template compiles for f32 and f16, it agrees with numpy at awkward sizes, bad params are
refused naming them. And docs/architecture.md's tables name every module at its layer."""

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import lacks
from test_docs import python_blocks
from test_layers import PKG, layer_of, module_name

import wgcompute as wgc
from wgcompute.kernels.core.base import BuiltinKernel, Compiled
from wgcompute.kernels.core.template import TemplateError

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "guide" / "adding-an-op.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
NAME = "example_axpby"


@pytest.fixture(scope="module")
def page():
    """The page's namespace after its blocks ran (those the adapter can run)."""
    namespace = {"__name__": "__doc_snippet__"}
    blocks = list(python_blocks(PAGE))
    assert len(blocks) >= 4, "the page lost its example"
    for line, source, skip, needs in blocks:
        assert skip is None, f"adding-an-op.md:{line}: every block of this page must run"
        if any(lacks(n) for n in needs):
            continue
        exec(compile(source, f"{PAGE.relative_to(ROOT)}:{line}", "exec"), namespace)
    return namespace


def test_the_page_registers_a_builtin_kernel_defined_by_its_own_text(page):
    kernel = wgc.kernel_info(NAME)
    assert type(kernel) is page["Axpby"]
    assert isinstance(kernel, BuiltinKernel) and kernel.checked is False
    assert kernel.inputs == ("x", "y") and [p.name for p in kernel.params] == ["a", "b"]


@pytest.mark.parametrize("dt", [
    "f32", pytest.param("f16", marks=pytest.mark.needs("shader-f16"))])
def test_the_template_compiles(page, dt):
    kernel = wgc.kernel_info(NAME)
    out = wgc.empty((3,), dt)
    key = kernel.key([out, out], out, {"a": 1.0, "b": 1.0})
    compiled = kernel.compiled(key, wgc.current_device())
    assert isinstance(compiled, Compiled)
    assert ("enable f16;" in compiled.source) == (dt == "f16")
    assert "${" not in compiled.source and "#for" not in compiled.source
    assert compiled.uniform_fields == (("n", "u32"), ("a", "f32"), ("b", "f32"))


@pytest.mark.computes("dt")
@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("n", [1, 255, 256, 257, 64 * 4 * 3 + 1])
def test_against_numpy(page, dt, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dt.replace("f", "float"))
    y = rng.standard_normal(n).astype(x.dtype)
    out = wgc.run_kernel(NAME, [wgc.from_numpy(x), wgc.from_numpy(y)], None,
                         {"a": -1.5, "b": 0.25})
    want = -1.5 * x.astype(np.float64) + 0.25 * y.astype(np.float64)
    rtol, atol = (1e-6, 1e-6) if dt == "f32" else (2e-3, 1e-2)  # f16: a few ulp of terms ~4
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("params, named", [
    ({"alpha": 1.0}, "alpha"),  # unknown
    ({"b": 1.0}, "'a'"),  # a is required
    ({"a": "2"}, "'a'"),  # not a number
    ({"a": 1.0, "b": True}, "'b'"),  # a bool is not a number
    ({"a": 1e300}, "'a'"),  # beyond f32
])
def test_a_wrong_param_is_refused_naming_it(page, params, named):
    x = wgc.from_numpy(np.ones(4, np.float32))
    with pytest.raises(wgc.WgComputeError, match=re.escape(named)):
        wgc.run_kernel(NAME, [x, x], None, params)


def test_other_dtypes_and_shapes_are_refused(page):
    x = wgc.from_numpy(np.ones(4, np.float32))
    with pytest.raises(wgc.DtypeError, match="s32"):
        wgc.run_kernel(NAME, [wgc.buffer([1, 2], dtype="s32")] * 2, None, {"a": 1.0})
    with pytest.raises(wgc.DtypeError, match="dtype f64 is not supported"):
        wgc.run_kernel(NAME, [x, x], wgc.empty((4,), "f64"), {"a": 1.0})
    with pytest.raises(wgc.DtypeError, match="y is f16, x is f32"):  # the kernel's check()
        wgc.run_kernel(NAME, [x, wgc.empty((4,), "f16")], wgc.empty((4,), "f32"), {"a": 1.0})
    with pytest.raises(wgc.ShapeError, match=r"out is \(5,\)"):
        wgc.run_kernel(NAME, [x, x], wgc.empty((5,), "f32"), {"a": 1.0})


def test_a_template_name_left_out_is_an_error_naming_it(page):
    with pytest.raises(TemplateError, match="ITEMS") as e:
        page["shaders"].render(page["AXPBY_WGSL"], {"T": "f32", "WG": 64}, name="axpby.wgsl")
    assert e.value.missing == "ITEMS" and "axpby.wgsl" in str(e.value)


# -- docs/architecture.md names every module at its layer ----------------------------------------
_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|")


def _architecture_rows() -> dict[str, int]:
    """module name -> the layer its table row gives."""
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        layer, path = int(m.group(1)), m.group(2)
        rel = path + "__init__.py" if path.endswith("/") else path
        rows[module_name(PKG / rel)] = layer
    return rows


def test_architecture_names_every_module_at_its_layer():
    rows = _architecture_rows()
    modules = {module_name(p) for p in PKG.rglob("*.py")}
    missing = sorted(modules - set(rows))
    assert not missing, f"docs/architecture.md's tables lack a row for: {', '.join(missing)}"
    unknown = sorted(set(rows) - modules)
    assert not unknown, f"docs/architecture.md has rows for modules that do not exist: {unknown}"
    wrong = [f"{m}: {rows[m]} in the docs, {layer_of(m)} in LAYERS" for m in sorted(rows)
             if rows[m] != layer_of(m)]
    assert not wrong, "docs/architecture.md's layers differ from tests/test_layers.py:\n" + \
        "\n".join(wrong)
