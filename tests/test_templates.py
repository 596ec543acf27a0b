"""The one WGSL template mechanism (wgcompute.kernels.core.template): parameters, #if/#for
blocks, errors that name the template, line and name; and the shipped .wgsl templates render
into shaders the device's compiler (naga) accepts."""

import pytest

import wgcompute as wgc
from wgcompute.kernels.core.template import TemplateError, const_lines, render, wgsl_literal


def test_parameters_and_expressions():
    text = "let n = ${n}u;\nlet half = ${n // 2}u;\nlet t: ${dtype} = ${lit(scale)};"
    assert render(text, {"n": 7, "dtype": "f32", "scale": 2.0}) == (
        "let n = 7u;\nlet half = 3u;\nlet t: f32 = 2.0;")


def test_if_elif_else_pick_one_branch():
    text = "#if k > 2\nbig\n#elif k == 2\ntwo\n#else\nsmall\n#endif\nend"
    assert render(text, {"k": 3}) == "big\nend"
    assert render(text, {"k": 2}) == "two\nend"
    assert render(text, {"k": 0}) == "small\nend"


def test_nested_for_and_if():
    text = ("#for i in range(n)\n"
            "  #if i % 2 == 0\n"
            "acc = acc + x[${i}];\n"
            "  #endif\n"
            "#endfor")
    assert render(text, {"n": 5}) == "acc = acc + x[0];\nacc = acc + x[2];\nacc = acc + x[4];"


def test_for_unpacks_pairs():
    text = "#for name, value in fields\nconst ${name}: u32 = ${value}u;\n#endfor"
    assert render(text, {"fields": [("A", 1), ("B", 2)]}) == (
        "const A: u32 = 1u;\nconst B: u32 = 2u;")


def test_literals():
    assert wgsl_literal(True) == "true" and wgsl_literal(False) == "false"
    assert wgsl_literal(3) == "3" and wgsl_literal(3.0) == "3.0"
    assert wgsl_literal(1e-5) == "1e-05" and wgsl_literal(-0.5) == "-0.5"
    with pytest.raises(TemplateError, match="no WGSL literal"):
        wgsl_literal(float("inf"))
    assert const_lines({"K": ("u32", 9), "S": ("f32", 1), "N": ("i32", -2)}) == (
        "const K: u32 = 9u;\nconst S: f32 = 1.0;\nconst N: i32 = -2i;")


@pytest.mark.parametrize("text, params, message", [
    ("x = ${missing};", {}, r"template t, line 1: no value for 'missing'"),
    ("a\n#if\nb\n#endif", {}, r"line 2: #if needs a condition"),
    ("#if 1\na", {}, r"#endif missing"),
    ("#endif", {}, r"line 1: #endif without its #if/#for"),
    ("#for x of y\n#endfor", {}, r"expected '#for NAME in EXPR'"),
    ("${__import__('os')}", {}, r"is not allowed"),
    ("${x.__class__}", {"x": 1}, r"is not allowed"),
    ("${open('f')}", {}, r"is not allowed"),
    ("${(}", {}, r"cannot read the expression"),
    ("#if 1\n#else\n#else\n#endif", {}, r"#else after #else"),
])
def test_errors_name_the_template_line_and_cause(text, params, message):
    with pytest.raises(TemplateError, match=message):
        render(text, params, name="t")


def test_a_value_holding_a_placeholder_is_refused():
    with pytest.raises(TemplateError, match="placeholder is left"):
        render("${v}", {"v": "${x}"}, name="t")


def test_a_template_error_is_a_wgcompute_error():
    assert issubclass(TemplateError, wgc.WgComputeError)


def test_a_rendered_template_compiles_on_the_device():
    text = ("@group(0) @binding(0) var<storage, read_write> out: array<${t}>;\n"
            "${consts}\n"
            "@compute @workgroup_size(${wg})\n"
            "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
            "    if (g.x >= N) { return; }\n"
            "    var acc: ${t} = ${t}(0);\n"
            "#for k in range(taps)\n"
            "    acc = acc + ${t}(${k + 1});\n"
            "#endfor\n"
            "    out[g.x] = acc;\n"
            "}\n")
    src = render(text, {"t": "f32", "wg": 64, "taps": 4,
                        "consts": const_lines({"N": ("u32", 10)})}, name="sum_taps")
    name = "template_test_sum_taps"
    if name not in wgc.kernels():
        wgc.register_kernel(name, src, bindings=[("out", "read_write")], workgroup_size=64)
    out = wgc.empty((10,), "f32")
    wgc.run_kernel(name, [], out, {})
    assert out.tolist() == [10.0] * 10


# Calls named .replace / .sub / .subn in wgcompute/kernels that do not edit WGSL text, by
# (file under wgcompute/kernels, enclosing function, the call's function): why each may stay.
_NOT_WGSL_EDITS = {
    ("core/template.py", "_substitute", "_PLACEHOLDER.sub"):
        "the template engine itself, filling ${expr} placeholders",
    ("core/reflect.py", "blank_comments", "re.sub"):
        "blanks comments of a user's shader for the reflection parser (spans kept)",
    ("core/base.py", "wgsl_is_nan", "t.replace"):
        "a type name (vec4<f16> -> vec4<f32>), not shader text",
    ("core/bind.py", "_key", "dataclasses.replace"):
        "a PipelineKey copy, not text",
    ("core/custom.py", "make_kernel", "str(b.type).replace"):
        "a custom kernel's reflected binding type made a type template (its dtype as ${T})",
}


def _text_edit_calls():
    """(file, function, call's function, line) of every .replace/.sub/.subn call in the
    kernel families' Python."""
    import ast
    import pathlib

    root = pathlib.Path(wgc.__file__).parent / "kernels"
    found = []

    def visit(node, scope, rel):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = scope + (child.name,)
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr in ("replace", "sub", "subn"):
                found.append((rel, ".".join(scope) or "<module>", ast.unparse(child.func),
                              child.lineno))
            visit(child, inner, rel)

    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        visit(ast.parse(path.read_text(encoding="utf-8")), (), rel)
    return found


def test_no_rendered_wgsl_is_edited():
    """WGSL comes out of template.render final: no kernel patches shader text with string
    replaces or regular expressions (parameters and #if/#for blocks say what varies)."""
    calls = _text_edit_calls()
    edits = [f"{f}:{line} in {fn}: {call[:70]}(...)" for f, fn, call, line in calls
             if (f, fn, call) not in _NOT_WGSL_EDITS]
    assert not edits, "WGSL text edited outside the template engine:\n" + "\n".join(edits)
    used = {(f, fn, call) for f, fn, call, _ in calls}
    stale = [entry for entry in _NOT_WGSL_EDITS if entry not in used]
    assert not stale, f"allow-list entries that match no call any more (remove them): {stale}"


# -- #include: one file of WGSL shared by several templates ------------------------------------
_FILES = {"fam/inc.wgsl": "fn get(w: ${T}) -> ${T} {\n#if PACKED\n    return w & ${T}(0xffu);\n"
                          "#else\n    return w;\n#endif\n}",
          "fam/a.wgsl": "a\n#include \"fam/b.wgsl\"",
          "fam/b.wgsl": "b\n#include \"fam/a.wgsl\"",
          "fam/self.wgsl": "#include \"fam/self.wgsl\"",
          "fam/bad.wgsl": "x = ${missing};"}


def test_include_renders_the_file_with_the_same_names():
    text = "// top\n#include \"fam/inc.wgsl\"\n#if PACKED\n#include \"fam/inc.wgsl\"\n#endif\nend"
    out = render(text, {"T": "u32", "PACKED": True}, name="t", load=_FILES.__getitem__)
    fn = "fn get(w: u32) -> u32 {\n    return w & u32(0xffu);\n}"
    assert out == f"// top\n{fn}\n{fn}\nend"
    assert render(text, {"T": "f32", "PACKED": False}, name="t", load=_FILES.__getitem__) == (
        "// top\nfn get(w: f32) -> f32 {\n    return w;\n}\nend")


@pytest.mark.parametrize("text, message", [
    ("#include \"fam/a.wgsl\"", r"'fam/a.wgsl' includes itself \(fam/a.wgsl -> fam/b.wgsl "
                               r"-> fam/a.wgsl\)"),
    ("#include \"fam/self.wgsl\"", r"template fam/self.wgsl, line 1: #include 'fam/self.wgsl' "
                                  r"includes itself"),
    ("#include fam/inc.wgsl", r"template t, line 1: expected '#include \"family/file.wgsl\"'"),
    ("#include \"fam/bad.wgsl\"", r"template fam/bad.wgsl, line 1: no value for 'missing'"),
])
def test_include_errors_name_the_file(text, message):
    with pytest.raises(TemplateError, match=message):
        render(text, {}, name="t", load=_FILES.__getitem__)


def test_include_of_a_missing_file_is_a_template_error():
    with pytest.raises(TemplateError, match=r"template t, line 2: #include 'elementwise/nope.wgsl"
                                            r"'.*not in wgcompute.kernels"):
        render("x\n#include \"elementwise/nope.wgsl\"", {}, name="t")


def test_the_u8_lanes_are_written_once():
    """Packed elements (u8, s8, bool: four a u32 word; s16, u16: two) are read and written by
    the functions of elementwise/packed.wgsl, which the elementwise, broadcast, astype and
    where templates include: none of them, nor the Python that fills them, spells the byte
    shifts itself."""
    import pathlib
    import re

    root = pathlib.Path(wgc.__file__).parent / "kernels" / "elementwise"
    shift = re.compile(r"<< \(?l \* 8u|>> \(\(.* % 4u\) \* 8u\)|0xffu\)? << |& m\) << s")
    files = ("elementwise.wgsl", "elementwise_broadcast.wgsl", "astype.wgsl", "where.wgsl",
             "elementwise.py", "arrayops.py", "cast.py", "where.py")
    found = [f"{f}:{n}" for f in files
             for n, line in enumerate((root / f).read_text(encoding="utf-8").splitlines(), 1)
             if shift.search(line)]
    assert not found, found
    from wgcompute.kernels.core import shaders

    packed = shaders.load("elementwise/packed.wgsl")
    for fn in ("lane_u", "lane_s", "put_u", "put_s", "lane_ux4", "lane_sx4", "put_ux4",
               "put_sx4"):
        assert f"fn {fn}(" in packed
