"""Imports point down only (ARCHITECTURE.md's layer table), read from each module's source
with ast: module-level and lazy (in-function) imports alike, unless listed below; and no
import circle, lazy imports counted."""

import ast
from pathlib import Path

import pytest

import wgcompute as wgc

# the package being imported (the source tree here, the installed wheel on the GPU machine)
PKG = Path(wgc.__file__).resolve().parent

# module (or package prefix) -> layer. A new module must be placed here: the test says so.
LAYERS = {
    "wgcompute.errors": 0, "wgcompute.dtypes": 0, "wgcompute._version": 0,
    "wgcompute._args": 0,  # argument checks shared by commands and streams (timeouts)
    "wgcompute._atomic": 0,  # files written whole (a temporary, then a rename)
    "wgcompute._extras": 0,  # which extra brings an optional module, and the error without it
    "wgcompute._native": 1,  # the wall: the only code touching wgpu-native / wgpu-py internals
    "wgcompute._queue": 2,  # fences and the submitter of one device
    "wgcompute._pools": 2,  # a device's staging pools and host threads
    "wgcompute.clocks": 2,  # the GPU's clocks (NVML) and holding them up (a CUDA context)
    "wgcompute.runtime": 3,  # Device: owns everything of one logical device; the default
    "wgcompute._adapters": 3,  # the adapters wgpu finds and the choice of one (runtime's)
    "wgcompute._device_parts": 3,  # Device's current-device block, synchronize, memory counts
    "wgcompute.transfers": 4,  # uploads, downloads, readbacks over a device's pools
    "wgcompute.buffer": 5,
    "wgcompute._buffer_memory": 5, "wgcompute._buffer_numpy": 5,  # parts of buffer's Buffer
    "wgcompute.autotune": 6,  # tuned choices per device and adapter
    "wgcompute.kernels": 7,
    "wgcompute.commands": 8,
    "wgcompute._lazy": 8,  # each device's open batch of queued operators (lazy execution)
    "wgcompute._command": 8,  # Command and Status, re-exported by commands
    "wgcompute.pipeline": 9,
    "wgcompute.recipes": 9,  # a Pipeline as data; installs itself into pipeline.py
    "wgcompute.timeline": 10, "wgcompute.streams": 10, "wgcompute.stream_map": 10,
    "wgcompute.surface": 10, "wgcompute.image": 10,
    "wgcompute.image_files": 10, "wgcompute.image_stages": 10,  # parts of image's wgc.image
    "wgcompute.stream_lanes": 10, "wgcompute.surface_programs": 10,  # stream_map's, surface's
    "wgcompute._multiproc": 10, "wgcompute._multiproc_worker": 10,  # a process per device
    "wgcompute._multiproc_common": 10,  # what the parent and its workers share
    "wgcompute.ml": 12,  # ONNX models: above pipelines, streams and the array namespace
    "wgcompute.array": 10,  # array operations (astype, operators, views) over kernels, pipelines
    "wgcompute._gather": 10, "wgcompute._setitem": 10,  # array's advanced indexing, assignment
    "wgcompute.array_api": 11,  # the array API standard's namespace, over arrays and kernels
    "wgcompute._fusion": 11, "wgcompute._fusion_trace": 10,  # wgc.fuse and what it traces with
    "wgcompute._fusion_auto": 10,  # queued elementwise operators held and fused (_lazy's hooks)
    "wgcompute._fusion_held": 10,  # automatic fusion's held DAG and copies on a batch
    "wgcompute._fusion_quick": 10,  # the short path of a planned elementwise operator
    "wgcompute._fusion_xp": 11,  # the array namespace's elementwise functions, traced
    "wgcompute": 13,  # the facade (__init__): may use every layer, no library module uses it
    "wgcompute.dask": 14,  # work on a Dask cluster: above the facade, which loads it on use
    "wgcompute.cli": 15, "wgcompute.viewer": 15,  # the app layer: public names only
    "wgcompute.__main__": 15,  # `python -m wgcompute`: runs the CLI
}
APP = 15
PUBLIC = set(wgc.__all__)

# Upward imports done lazily, on purpose, each with its reason. Keep this list short: an entry
# must not close a circle (test_no_import_circle_counting_lazy_imports checks).
ALLOWED_LAZY_UP = {
    ("wgcompute", "wgcompute.dask"):
        "wgc.dask is loaded on first use, so that `import wgcompute` does not import dask; "
        "wgcompute.dask is the facade's own subpackage, loaded after the facade is complete",
}

# Upward imports under `if TYPE_CHECKING:`, for annotations only: they never run, so they
# are no import at all (and no circle), but they still need a reason here.
TYPE_ONLY_UP = {
    ("wgcompute.buffer", "wgcompute.commands"):
        "Buffer.read_async/write_async are annotated as returning Commands",
    ("wgcompute", "wgcompute.dask"):
        "wgc.dask, handed out by __getattr__, is spelled for type checkers",
}

# Private modules the app layer may use, each with its reason.
APP_MAY_USE = {
    "wgcompute._extras": "the one table of which extra brings which module: the CLI checks an "
                         "extra up front, once, with the same message as the library",
    "wgcompute.autotune": "`wgcompute tune` reports the tuning cache's path and how many "
                          "choices it holds for the adapter before and after each batch",
}

# Third-party modules only some of the package may import, and how.
WINDOW_LIBS = ("rendercanvas", "glfw")


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if name == prefix or name.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def known_modules() -> set[str]:
    return {module_name(p) for p in PKG.rglob("*.py")}


def imports_of(path: Path):
    """(target module, line, lazy) for each import of a wgcompute module or a window lib that
    runs (at module level, or lazily in a function)."""
    for target, line, when, _names in imports_with_names(path):
        if when != TYPING:
            yield target, line, when == LAZY


MODULE, LAZY, TYPING = "module", "lazy", "typing"  # when an import runs: see _import_nodes


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.Module):
    """(node, when) for each import statement and importlib.import_module("...") call: MODULE
    when it runs as the module is imported (at top level, or in a top-level if/try/class),
    LAZY when a function runs, TYPING never (under `if TYPE_CHECKING:`)."""
    def walk(nodes, when):
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, TYPING)
                yield from walk(node.orelse, when)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, when
            elif (isinstance(node, ast.Call) and node.args
                  and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)
                  and (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
                       or isinstance(node.func, ast.Name) and node.func.id == "import_module")):
                yield node, when
            inner = when
            if when == MODULE and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda)):
                inner = LAZY
            yield from walk(ast.iter_child_nodes(node), inner)

    yield from walk(tree.body, MODULE)


def _resolve(package: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    base = package.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_with_names(path: Path):
    """(target module, line, when: MODULE, LAZY or TYPING, names taken from it: () for a
    whole module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    me = module_name(path)
    package = me if is_package(path) else me.rpartition(".")[0]
    modules = known_modules()
    for node, when in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, when, ()
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.level, node.module)
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in modules:
                    yield sub, node.lineno, when, ()
                else:
                    yield base, node.lineno, when, (a.name,)
        else:  # importlib.import_module("name") or ("..name", __name__ / __package__)
            name = node.args[0].value
            level = len(name) - len(name.lstrip("."))
            anchor = node.args[1] if len(node.args) > 1 else None
            if level and isinstance(anchor, ast.Name):
                pkg = me if anchor.id == "__name__" else package
                name = _resolve(pkg, level, name[level:] or None)
            yield name, node.lineno, when, ()


SOURCES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_imports_point_down(path):
    me = module_name(path)
    mine = layer_of(me)
    assert mine is not None, (f"{me} is in no layer: place it in tests/test_layers.py's LAYERS "
                              f"(and in ARCHITECTURE.md's table)")
    problems = []
    for target, line, when, names in imports_with_names(path):
        if not (target == "wgcompute" or target.startswith("wgcompute.")):
            continue
        theirs = layer_of(target)
        if theirs is None:
            problems.append(f"line {line}: imports {target}, which is in no layer")
            continue
        if mine == APP:
            # public names only: what `import wgcompute` exports, wherever it is taken from
            private = [n for n in names if n not in PUBLIC]
            if target in APP_MAY_USE:
                continue
            if theirs != APP and target != "wgcompute" and (not names or private):
                problems.append(f"line {line}: app module imports "
                                f"{', '.join(private) or 'the module'} from {target}; use "
                                f"the public names of `wgcompute` only")
            continue
        allowed = ALLOWED_LAZY_UP if when == LAZY else TYPE_ONLY_UP if when == TYPING else {}
        if theirs > mine and (me, target) not in allowed:
            how = {LAZY: "lazily ", TYPING: "for type checkers ", MODULE: ""}[when]
            problems.append(f"line {line}: layer {mine} {how}imports {target} (layer {theirs})")
    assert not problems, f"{me}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_window_libraries_only_in_surface_and_lazily(path):
    me = module_name(path)
    for target, line, lazy in imports_of(path):
        if target.split(".")[0] not in WINDOW_LIBS:
            continue
        if layer_of(me) == APP:
            continue
        assert me == "wgcompute.surface", f"{me} line {line} imports {target}"
        assert lazy, f"wgcompute.surface line {line} imports {target} at module level"


def test_importing_wgcompute_loads_no_window_library():
    import subprocess
    import sys

    code = ("import sys, wgcompute; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rendercanvas', "
            "'glfw')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_allowed_lazy_imports_still_exist():
    """An exception that is no longer needed is removed from the list."""
    found = {LAZY: set(), TYPING: set()}
    for path in SOURCES:
        me = module_name(path)
        for target, _, when, _names in imports_with_names(path):
            if when in found:
                found[when].add((me, target))
    assert found[LAZY] & set(ALLOWED_LAZY_UP) == set(ALLOWED_LAZY_UP)
    assert found[TYPING] & set(TYPE_ONLY_UP) == set(TYPE_ONLY_UP)


# -- the wall around wgpu's internals -------------------------------------------------------------
# Only wgcompute._native may touch wgpu-native's C API, wgpu-py's private attributes or
# rendercanvas's privates: a wgpu upgrade then breaks one package, which falls back to the
# public API by itself.
WALL = "wgcompute._native"
PRIVATE_MODULES = ("wgpu.backends", "wgpu._classes", "wgpu._coreutils", "wgpu._async")
PRIVATE_ATTRS = {"_internal", "_poller", "_poll_func", "_process_events", "_ffi",
                 "_map_state", "_device_lost_callback", "_libf"}
PRIVATE_NAMES = {"ffi", "lib", "libf"}  # as names bound by an import from wgpu.backends


def _private_uses(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PRIVATE_MODULES):
                    yield node.lineno, f"import {a.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith(PRIVATE_MODULES):
                yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRS:
            yield node.lineno, f".{node.attr}"


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_wgpu_internals_only_behind_the_wall(path):
    me = module_name(path)
    if me == WALL or me.startswith(WALL + "."):
        return
    found = list(_private_uses(path))
    assert not found, (f"{me} reaches into wgpu/rendercanvas internals (only {WALL} may): "
                       + "; ".join(f"line {n}: {what}" for n, what in found))


def test_the_wall_test_would_catch_a_leak(tmp_path):
    leak = tmp_path / "leak.py"
    leak.write_text("from wgpu.backends.wgpu_native._ffi import lib\n"
                    "def f(buf):\n    return buf._internal\n")
    assert [w for _, w in _private_uses(leak)] == [
        "from wgpu.backends.wgpu_native._ffi import ...", "._internal"]


# -- no import circles ----------------------------------------------------------------------------

def _graph(include_lazy: bool) -> dict[str, dict[str, tuple[int, str]]]:
    """module -> {module it imports: (line, when)}: what runs, so no TYPING imports. One kind
    of edge is left out: a package's __init__ importing its own submodule lazily (wgc.dask on
    first use, _native choosing its backend). Python imports a package before any of its
    submodules, so the submodule needs the package loaded anyway and may use it; by the time
    the package's function runs, the package is complete. A package importing its submodules
    at module level is kept: that is the path its users' imports take."""
    modules = known_modules()
    packages = {module_name(p) for p in SOURCES if is_package(p)}
    graph: dict[str, dict[str, tuple[int, str]]] = {m: {} for m in modules}
    for path in SOURCES:
        me = module_name(path)
        for target, line, when, _names in imports_with_names(path):
            if when == TYPING or (when == LAZY and not include_lazy):
                continue
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # a name imported from a module
            if target not in modules or target == me:
                continue
            if when == LAZY and me in packages and target.startswith(me + "."):
                continue
            graph[me].setdefault(target, (line, when))
    return graph


def _cycle(graph) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _circles(graph) -> list[list[str]]:
    """The modules of each import circle (strongly connected part of more than one module)."""
    reach = {n: set(graph.get(n, ())) for n in graph}
    for n in graph:  # transitive closure: the package is small, this stays fast
        todo = list(reach[n])
        while todo:
            m = todo.pop()
            for k in graph.get(m, ()):
                if k not in reach[n]:
                    reach[n].add(k)
                    todo.append(k)
    seen: set[str] = set()
    out = []
    for n in sorted(graph):
        if n in seen or n not in reach[n]:
            continue
        part = sorted(m for m in reach[n] if n in reach.get(m, ()))
        seen.update(part)
        out.append(part)
    return out


def _describe(graph) -> str:
    circle = _cycle(graph)
    if circle is None:
        return ""
    steps = []
    for a, b in zip(circle, circle[1:]):
        line, when = graph[a][b]
        steps.append(f"  {a} line {line}{' (in a function)' if when == LAZY else ''} -> {b}")
    parts = "; ".join(f"{len(p)} modules: {', '.join(p)}" for p in _circles(graph))
    return "import circle:\n" + "\n".join(steps) + f"\ncircles ({parts})"


def test_no_import_circle_at_module_level():
    graph = _graph(include_lazy=False)
    assert _cycle(graph) is None, _describe(graph)


def test_no_import_circle_counting_lazy_imports():
    """Every import that runs counts, in a function or not: a lower module needing an upper
    one is inverted (the upper one installs what the lower one calls), never imported lazily."""
    graph = _graph(include_lazy=True)
    assert _cycle(graph) is None, _describe(graph)


def test_the_circle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _circles({"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"d"}}) == [["a", "b"],
                                                                                ["d"]]


def test_lazy_and_type_only_imports_are_told_apart(tmp_path):
    pkg = tmp_path / "wgcompute"
    pkg.mkdir()
    for name in ("errors", "array"):
        (pkg / f"{name}.py").write_text("")
    src = pkg / "probe.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "from . import errors\n"
                   "if TYPE_CHECKING:\n    from .commands import Command\n"
                   "try:\n    import numpy\nexcept ImportError:\n    pass\n"
                   "def f():\n    from . import array\n"
                   "    return importlib.import_module('.ml', __package__)\n")
    global PKG
    saved, PKG = PKG, tmp_path / "wgcompute"
    try:
        found = [(t, w) for t, _, w, _ in imports_with_names(src)]
    finally:
        PKG = saved
    assert found == [("typing", MODULE), ("wgcompute.errors", MODULE),
                     ("wgcompute.commands", TYPING), ("numpy", MODULE),
                     ("wgcompute.array", LAZY), ("wgcompute.ml", LAZY)]


def test_the_layers_above_install_what_the_lower_ones_call():
    """buffer.py and pipeline.py import nothing above them: array, commands and recipes
    install themselves there when imported, which `import wgcompute` does."""
    import sys

    buffer, pipeline = sys.modules["wgcompute.buffer"], sys.modules["wgcompute.pipeline"]
    assert sys.modules["wgcompute._buffer_numpy"]._array is sys.modules["wgcompute.array"]
    assert buffer._commands is sys.modules["wgcompute.commands"]
    assert pipeline._recipes is sys.modules["wgcompute.recipes"]
    a = wgc.buffer([1.0, 2.0], dtype="f32")
    assert (a + a).to_numpy().tolist() == [2.0, 4.0]
    assert a.read_async().wait().tolist() == [1.0, 2.0]


def test_a_layer_not_installed_yet_is_a_clear_error():
    from wgcompute.buffer import NotInstalled

    slot = NotInstalled("wgcompute.array", "a Buffer's operators")
    with pytest.raises(wgc.WgComputeError, match=r"a Buffer's operators need wgcompute\.array"
                                                 r", which is not imported yet"):
        slot.binary("add", None, None)


SUBMITTERS = ("runtime.py", "_queue.py")  # Device.submit and the Submitter behind it


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_work_reaches_the_queue_only_through_device_submit(path):
    """One submit path: every module hands its command buffers to Device.submit; only the
    device (runtime.py) calls its Submitter, and only the Submitter calls the queue."""
    if path.relative_to(PKG).as_posix().startswith("_native") or path.name in SUBMITTERS:
        return
    text = path.read_text()
    for needle in ("submitter.submit", "link.submit(", "queue.submit(", "submit_sync("):
        assert needle not in text, f"{path.name} calls {needle}: submit through Device.submit"
