"""Imports point down only (ARCHITECTURE.md's layer table), read from each module's source
with ast: module-level imports strictly, lazy (in-function) ones too unless listed below."""

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
    "wgcompute.transfers": 4,  # uploads, downloads, readbacks over a device's pools
    "wgcompute.buffer": 5,
    "wgcompute.autotune": 6,  # tuned choices per device and adapter
    "wgcompute.kernels": 7,
    "wgcompute.commands": 8,
    "wgcompute.pipeline": 9,
    "wgcompute.recipes": 9,  # a Pipeline as data; pipeline.py reaches it lazily (same layer)
    "wgcompute.timeline": 10, "wgcompute.streams": 10, "wgcompute.stream_map": 10,
    "wgcompute.surface": 10, "wgcompute.image": 10,
    "wgcompute.ml": 11,  # ONNX models: above pipelines and streams, below the facade
    "wgcompute.array": 10,  # array operations (astype, operators, views) over kernels, pipelines
    "wgcompute": 13,  # the facade (__init__): may use every layer, no library module uses it
    "wgcompute.dask": 14,  # work on a Dask cluster: above the facade, which loads it on use
    "wgcompute.cli": 15, "wgcompute.viewer": 15,  # the app layer: public names only
    "wgcompute.__main__": 15,  # `python -m wgcompute`: runs the CLI
}
APP = 15
PUBLIC = set(wgc.__all__)

# Upward imports done lazily, on purpose, each with its reason. Keep this list short.
ALLOWED_LAZY_UP = {
    ("wgcompute.buffer", "wgcompute.commands"):
        "Buffer.read_async/write_async are methods for convenience; commands does the work",
    ("wgcompute.pipeline", "wgcompute.recipes"):
        "a Pipeline pickles as its recipe (Pipeline.recipe, __reduce__); recipes builds them",
    ("wgcompute", "wgcompute.dask"):
        "wgc.dask is loaded on first use, so that `import wgcompute` does not import dask",
    ("wgcompute.buffer", "wgcompute.array"):
        "Buffer's operators, views, indexing and astype are methods, as numpy's; array runs "
        "the kernels",
}

# Private modules the app layer may use, each with its reason.
APP_MAY_USE = {
    "wgcompute._extras": "the one table of which extra brings which module: the CLI checks an "
                         "extra up front, once, with the same message as the library",
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
    """(target module, line, lazy) for each import of a wgcompute module or a window lib."""
    for target, line, lazy, _names in imports_with_names(path):
        yield target, line, lazy


def imports_with_names(path: Path):
    """(target module, line, lazy, names taken from it: () for a whole module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    me = module_name(path)
    package = me if is_package(path) else me.rpartition(".")[0]
    modules = known_modules()
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        lazy = id(node) not in top_level
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno, lazy, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in modules:
                    yield sub, node.lineno, lazy, ()
                else:
                    yield base, node.lineno, lazy, (a.name,)


SOURCES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_imports_point_down(path):
    me = module_name(path)
    mine = layer_of(me)
    assert mine is not None, (f"{me} is in no layer: place it in tests/test_layers.py's LAYERS "
                              f"(and in ARCHITECTURE.md's table)")
    problems = []
    for target, line, lazy, names in imports_with_names(path):
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
        if theirs > mine and not (lazy and (me, target) in ALLOWED_LAZY_UP):
            how = "lazily " if lazy else ""
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
    found = set()
    for path in SOURCES:
        me = module_name(path)
        for target, _, lazy in imports_of(path):
            if lazy and (me, target) in ALLOWED_LAZY_UP:
                found.add((me, target))
    assert found == set(ALLOWED_LAZY_UP)


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

def _graph(include_lazy: bool) -> dict[str, set[str]]:
    modules = known_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in SOURCES:
        me = module_name(path)
        for target, _line, lazy, _names in imports_with_names(path):
            if lazy and not include_lazy:
                continue
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # a name imported from a module
            if target in modules and target != me and not me.startswith(target + "."):
                graph[me].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_no_import_circle_at_module_level():
    circle = _cycle(_graph(include_lazy=False))
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_no_import_circle_even_counting_lazy_imports_except_the_listed_ones():
    graph = _graph(include_lazy=True)
    for (low, high), _why in ALLOWED_LAZY_UP.items():
        graph.get(low, set()).discard(high)
    # a package's __init__ importing its own submodules is not a circle
    for name in list(graph):
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    circle = _cycle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_circle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
