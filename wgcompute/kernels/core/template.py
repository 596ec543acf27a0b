"""The one way wgcompute makes WGSL: a whole ``.wgsl`` file with named parameters (``${expr}``)
and ``#if`` / ``#elif`` / ``#else`` / ``#endif``, ``#for NAME in expr`` / ``#endfor`` and
``#include "family/file.wgsl"`` lines (the file's text, read by the shaders loader, rendered in
place with the same names; a file that includes itself, directly or not, is an error).

Expressions are a small, safe subset of Python read with ``ast`` (names, literals, arithmetic,
comparisons, ``and``/``or``/``not``, ``x if c else y``, indexing, attribute reads, and the
functions in ``FUNCTIONS``); nothing is ``eval``'d. A name the template uses but the caller did
not give is an error naming the template, its line and the name, so a rendered shader never
holds a placeholder. WGSL has no ``#`` syntax of its own, so a line whose first non-blank
character is ``#`` is always a directive. What a template renders is final: nothing edits
rendered WGSL afterwards (tests/test_templates.py checks).
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from ...errors import KernelNotFoundError, WgComputeError


class TemplateError(WgComputeError):
    """A template that cannot be rendered: bad syntax, an unknown name, an unsafe expression.
    ``missing`` is the name that had no value, when that is the error."""

    def __init__(self, message: str, missing: str | None = None):
        super().__init__(message)
        self.missing = missing


def wgsl_literal(value) -> str:
    """A Python value as WGSL text: bools as true/false, ints as written, finite floats in a
    form WGSL parses (``1.0``, ``1e-05``); strings as they are (type names, expressions)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TemplateError(f"{value!r} has no WGSL literal; pass it as a bit pattern "
                                f"(bitcast<f32>(0x7f800000u) is +inf)")
        text = repr(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return value
    raise TemplateError(f"cannot write a {type(value).__name__} into WGSL: {value!r}")


FUNCTIONS = {"len": len, "range": range, "min": min, "max": max, "int": int, "str": str,
             "abs": abs, "enumerate": enumerate, "zip": zip, "lit": wgsl_literal,
             "any": any, "all": all, "hex": hex, "sorted": sorted, "tuple": tuple}

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
        ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitXor: operator.xor}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
          ast.Invert: operator.invert}


class _Eval:
    """Evaluates one parsed expression against the current names."""

    def __init__(self, names: Mapping, where: str):
        self.names = names
        self.where = where

    def __call__(self, node):  # noqa: C901 - one branch per node kind, flat
        t = type(node)
        if t is ast.Expression:
            return self(node.body)
        if t is ast.Constant:
            return node.value
        if t is ast.Name:
            if node.id in self.names:
                return self.names[node.id]
            if node.id in FUNCTIONS:
                return FUNCTIONS[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            raise TemplateError(f"{self.where}: no value for {node.id!r} (given: "
                                f"{', '.join(sorted(self.names)) or 'nothing'})", node.id)
        if t is ast.BinOp and type(node.op) in _BIN:
            return _BIN[type(node.op)](self(node.left), self(node.right))
        if t is ast.UnaryOp and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self(node.operand))
        if t is ast.BoolOp:
            if isinstance(node.op, ast.And):
                result = True
                for v in node.values:
                    result = self(v)
                    if not result:
                        return result
                return result
            result = False
            for v in node.values:
                result = self(v)
                if result:
                    return result
            return result
        if t is ast.Compare:
            left = self(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self(right_node)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if t is ast.IfExp:
            return self(node.body) if self(node.test) else self(node.orelse)
        if t is ast.Subscript:
            return self(node.value)[self(node.slice)]
        if t is ast.Slice:
            return slice(*(self(p) if p is not None else None
                           for p in (node.lower, node.upper, node.step)))
        if t is ast.Attribute and not node.attr.startswith("_"):
            return getattr(self(node.value), node.attr)
        if t in (ast.Tuple, ast.List):
            return tuple(self(e) for e in node.elts)
        if t is ast.Call and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
                and not node.keywords:
            return FUNCTIONS[node.func.id](*(self(a) for a in node.args))
        if t is ast.JoinedStr:
            return "".join(str(self(v)) for v in node.values)
        if t is ast.FormattedValue:
            return format(self(node.value), self(node.format_spec) if node.format_spec else "")
        raise TemplateError(f"{self.where}: {ast.unparse(node)!r} is not allowed in a template "
                            f"expression")


# CPython 3.11's ast.parse on two threads at once can fail ("AST constructor recursion depth
# mismatch"); pipelines compile on several threads (kernels/core/warm.py)
_PARSING = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _parse(expr: str, where: str) -> ast.Expression:
    try:
        with _PARSING:
            return ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise TemplateError(f"{where}: cannot read the expression {expr.strip()!r}: "
                            f"{e.msg}") from None


_DIRECTIVE = re.compile(r"^\s*#\s*(if|elif|else|endif|for|endfor|include)\b(.*)$")
_INCLUDE = re.compile(r'^"([^"]+)"$')
_FOR = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\s+(.+)$")
_PLACEHOLDER = re.compile(r"\$\{([^{}]*)\}")


@dataclass(frozen=True)
class _Line:
    text: str
    number: int


@dataclass(frozen=True)
class _If:
    branches: tuple  # ((condition or None, (nodes...)), ...)
    number: int


@dataclass(frozen=True)
class _Include:
    path: str
    body: tuple
    number: int


@dataclass(frozen=True)
class _For:
    targets: tuple[str, ...]
    iterable: str
    body: tuple
    number: int


class _Parser:
    def __init__(self, text: str, name: str, load, chain: tuple[str, ...] = ()):
        self.lines = text.split("\n")
        self.name = name
        self.load = load
        self.chain = chain + (name,)  # the templates being parsed, outermost first
        self.i = 0

    def where(self, number: int) -> str:
        return f"template {self.name}, line {number}"

    def block(self, closers: tuple[str, ...]) -> tuple[tuple, str | None, str, int]:
        """Nodes up to one of ``closers`` (returned with its argument text and line)."""
        nodes = []
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            number = self.i + 1
            self.i += 1
            m = _DIRECTIVE.match(raw)
            if not m:
                nodes.append(_Line(raw, number))
                continue
            word, rest = m.group(1), m.group(2).strip()
            if word in closers:
                return tuple(nodes), word, rest, number
            if word == "if":
                nodes.append(self.if_block(rest, number))
            elif word == "for":
                nodes.append(self.for_block(rest, number))
            elif word == "include":
                nodes.append(self.include(rest, number))
            else:
                raise TemplateError(f"{self.where(number)}: #{word} without its #if/#for")
        if closers:
            raise TemplateError(f"template {self.name}: #{closers[-1]} missing at the end")
        return tuple(nodes), None, "", len(self.lines)

    def if_block(self, condition: str, number: int) -> _If:
        if not condition:
            raise TemplateError(f"{self.where(number)}: #if needs a condition")
        _parse(condition, self.where(number))
        branches = []
        cond: str | None = condition
        while True:
            body, word, rest, at = self.block(("elif", "else", "endif"))
            branches.append((cond, body))
            if word == "endif":
                return _If(tuple(branches), number)
            if cond is None:
                raise TemplateError(f"{self.where(at)}: #{word} after #else")
            if word == "elif":
                if not rest:
                    raise TemplateError(f"{self.where(at)}: #elif needs a condition")
                _parse(rest, self.where(at))
                cond = rest
            else:
                cond = None

    def include(self, spec: str, number: int) -> _Include:
        m = _INCLUDE.match(spec)
        if not m:
            raise TemplateError(f"{self.where(number)}: expected '#include \"family/file.wgsl\"'"
                                f", got {spec!r}")
        path = m.group(1)
        if path in self.chain:
            cycle = " -> ".join(self.chain[self.chain.index(path):] + (path,))
            raise TemplateError(f"{self.where(number)}: #include {path!r} includes itself "
                                f"({cycle})")
        if self.load is None:
            raise TemplateError(f"{self.where(number)}: #include {path!r}, but no loader was "
                                f"given to read it")
        try:
            text = self.load(path)
        except WgComputeError as e:
            raise TemplateError(f"{self.where(number)}: #include {path!r}: {e}") from e
        body, _w, _r, _n = _Parser(text, path, self.load, self.chain).block(())
        return _Include(path, body, number)

    def for_block(self, spec: str, number: int) -> _For:
        m = _FOR.match(spec)
        if not m:
            raise TemplateError(f"{self.where(number)}: expected '#for NAME in EXPR', got "
                                f"{spec!r}")
        _parse(m.group(2), self.where(number))
        body, _word, _rest, _at = self.block(("endfor",))
        targets = tuple(t.strip() for t in m.group(1).split(","))
        return _For(targets, m.group(2), body, number)


@functools.lru_cache(maxsize=256)
def _compile(text: str, name: str, load) -> tuple:
    nodes, _w, _r, _n = _Parser(text, name, load).block(())
    return nodes


_KERNELS = "wgcompute.kernels"


@functools.cache
def load(path: str) -> str:
    """The text of a .wgsl template, named by its family folder under wgcompute/kernels and
    its file name: ``load("reduce/reduce.wgsl")`` (what ``#include`` reads too)."""
    family, _, filename = path.rpartition("/")
    try:
        if not family or not filename:
            raise FileNotFoundError(path)
        return (resources.files(_KERNELS).joinpath(*family.split("/"), filename)
                .read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise KernelNotFoundError(f"shader file {path!r} is not in {_KERNELS} (give a family "
                                  f"folder and a file name, e.g. 'reduce/reduce.wgsl')") \
            from None


_load = load


def _emit(nodes, names: dict, name: str, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, _Line):
            out.append(_substitute(node, names, name))
        elif isinstance(node, _Include):
            _emit(node.body, names, node.path, out)
        elif isinstance(node, _If):
            where = f"template {name}, line {node.number}"
            for cond, body in node.branches:
                if cond is None or _Eval(names, where)(_parse(cond, where)):
                    _emit(body, names, name, out)
                    break
        else:
            where = f"template {name}, line {node.number}"
            for item in _Eval(names, where)(_parse(node.iterable, where)):
                inner = dict(names)
                if len(node.targets) == 1:
                    inner[node.targets[0]] = item
                else:
                    values = tuple(item)
                    if len(values) != len(node.targets):
                        raise TemplateError(f"{where}: {len(node.targets)} names for "
                                            f"{len(values)} values")
                    inner.update(zip(node.targets, values))
                _emit(node.body, inner, name, out)


def _substitute(line: _Line, names: dict, name: str) -> str:
    if "${" not in line.text:
        return line.text
    where = f"template {name}, line {line.number}"
    return _PLACEHOLDER.sub(
        lambda m: wgsl_literal(_Eval(names, where)(_parse(m.group(1), where))), line.text)


def render(text: str, params: Mapping | None = None, *, name: str = "<template>",
           load=_load) -> str:
    """The WGSL ``text`` renders to with ``params``; a template is parsed once and cached.
    ``load(path)`` gives the text of a file named by ``#include`` (default: the kernel
    families' .wgsl files, ``shaders.load``)."""
    nodes = _compile(text, name, load)
    out: list[str] = []
    _emit(nodes, dict(params or {}), name, out)
    rendered = "\n".join(out)
    if "${" in rendered:
        raise TemplateError(f"template {name}: a placeholder is left after rendering "
                            f"(a value that itself holds '${{')")
    return rendered


def const_lines(consts: Mapping[str, tuple[str, object]]) -> str:
    """``const NAME: TYPE = VALUE;`` lines for layer constants: {name: (wgsl type, value)}.
    u32 values get their ``u`` suffix, f32 ones a float literal."""
    lines = []
    for cname, (wtype, value) in consts.items():
        text = wgsl_literal(float(value) if wtype in ("f32", "f16") else value)
        if wtype == "u32":
            text += "u"
        elif wtype == "i32":
            text += "i"
        lines.append(f"const {cname}: {wtype} = {text};")
    return "\n".join(lines)
