"""WGSL reflection: a shader's entry points (stage, workgroup size, builtins), resource bindings
(group, binding, address space, access, element type) and structs, read with a WGSL parser.

The grammar (wgsl.lark) is parsed by lark's LALR(1) parser; ``reflect(source)`` is cached by
the source text and returns frozen dataclasses. It reads shaders the compiler accepts."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from ...errors import ArgumentError, ShaderCompileError

if TYPE_CHECKING:
    import lark


class _Lark:
    """lark, imported on first use: `import wgcompute` does not load it (built-in kernels never
    reflect); the first user kernel does."""

    def __getattr__(self, name: str):
        import lark

        globals()["lark"] = lark  # later uses go to the module itself
        return getattr(lark, name)


if not TYPE_CHECKING:
    lark = _Lark()


SCALARS = ("f32", "f16", "i32", "u32", "f64", "i64", "u64", "bool")
STAGES = ("compute", "vertex", "fragment")
# WGSL's predeclared aliases (vec4f, mat4x4h, ...), spelled out.
_PREDECLARED = {f"vec{n}{s}": (f"vec{n}", t) for n in (2, 3, 4)
                for s, t in (("f", "f32"), ("h", "f16"), ("i", "i32"), ("u", "u32"))}
_PREDECLARED.update({f"mat{c}x{r}{s}": (f"mat{c}x{r}", t) for c in (2, 3, 4) for r in (2, 3, 4)
                     for s, t in (("f", "f32"), ("h", "f16"))})
_MAT = re.compile(r"mat([234])x([234])$")


# -- what reflection returns -----------------------------------------------------------------
@dataclass(frozen=True)
class TypeRef:
    """A type as declared, aliases resolved: ``name`` and template arguments (TypeRefs, or the
    text of a value argument such as an array's element count)."""

    name: str
    args: tuple = ()

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(str(a) for a in self.args)}>"


@dataclass(frozen=True)
class Field:
    """A struct member: its name, type, and whether @align/@size change its layout."""

    name: str
    type: TypeRef
    layout_attrs: bool = False


@dataclass(frozen=True)
class Binding:
    """A resource variable ``@group(g) @binding(b) var<space, access> name: type``."""

    group: int
    binding: int
    name: str
    space: str  # "storage", "uniform", or "handle" (textures and samplers)
    access: str  # "read" or "read_write" ("read" for uniform and handle)
    type: TypeRef
    element: str | None  # scalar type of an array's elements (vec4<f32> -> f32), else None
    lanes: int  # scalars per array element: 1, a vector's 2-4, a matrix's C*R; 0 if no array
    atomic: bool  # the elements are atomic<...>
    fields: tuple[Field, ...]  # the members of a struct type (a uniform's params), in order
    qualifier_span: tuple[int, int] | None  # where `<storage, read>` is in the source


@dataclass(frozen=True)
class EntryPoint:
    name: str
    stage: str
    workgroup_size: tuple[int, int, int] | None  # compute entry points only
    builtins: tuple[str, ...]  # the @builtin values it takes, in parameter order


@dataclass(frozen=True)
class Reflection:
    entry_points: tuple[EntryPoint, ...]
    bindings: tuple[Binding, ...]  # sorted by (group, binding)
    structs: tuple[tuple[str, tuple[Field, ...]], ...]
    enables: tuple[str, ...]
    # per resource binding, the index expressions it is read or written at anywhere in the
    # module (``x[i]``, ``x[i + p.n]``), as text without spaces: (name, (expr, ...))
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def indexed_at(self, name: str) -> tuple[str, ...]:
        """The index expressions binding ``name`` is indexed with (``x[i]``: "i")."""
        return dict(self.indexes).get(name, ())

    def compute_entry(self, name: str | None = None, what: str = "shader") -> EntryPoint:
        """The @compute entry point named ``name``, or the only one."""
        computes = [e for e in self.entry_points if e.stage == "compute"]
        if name is not None:
            for e in computes:
                if e.name == name:
                    return e
            have = ", ".join(e.name for e in computes) or "none"
            raise ArgumentError(f"entry_point: {what} has no @compute function {name!r} "
                                f"(it has: {have})")
        if len(computes) != 1:
            have = ", ".join(e.name for e in computes)
            raise ArgumentError(
                f"{what} declares {len(computes)} @compute functions"
                + (f" ({have}); pass entry_point= to choose one" if computes else ""))
        return computes[0]

    def binding(self, name: str) -> Binding:
        for b in self.bindings:
            if b.name == name:
                return b
        raise KeyError(name)


# -- the parser -------------------------------------------------------------------------------
_IDENTLIKE = re.compile(r"(?!\d)\w+$")
_SPLIT_REST = {">": "GT", "=": "ASSIGN", ">=": "GE"}


class _TemplateLists:
    """Lark post-lexer: marks the ``<``/``>`` that open and close template lists (TSTART,
    TEND), with WGSL's template list discovery over the token stream, splitting ``>>`` and
    ``>=`` where their first ``>`` closes a list."""

    always_accept = ()

    def process(self, stream):
        toks = list(stream)
        pending: list[tuple[int, int]] = []  # (index of a candidate '<', nesting depth)
        depth = 0
        i = 0
        while i < len(toks):
            t = toks[i]
            ty = t.type
            if (i + 1 < len(toks) and toks[i + 1].type == "LT"
                    and _IDENTLIKE.match(str(t))):
                pending.append((i + 1, depth))
                i += 2
                continue
            if ty in ("GT", "GE", "SHR") or (ty == "ASSIGN_OP" and t == ">>="):
                if pending and pending[-1][1] == depth:
                    j = pending.pop()[0]
                    toks[j] = lark.Token.new_borrow_pos("_TSTART", toks[j], toks[j])
                    toks[i] = lark.Token("_TEND", ">", t.start_pos, t.line, t.column,
                                         t.line, t.column + 1, t.start_pos + 1)
                    rest = str(t)[1:]
                    if rest:
                        toks.insert(i + 1, lark.Token(
                            _SPLIT_REST[rest], rest, t.start_pos + 1, t.line, t.column + 1,
                            t.end_line, t.end_column, t.end_pos))
                i += 1
                continue
            if ty in ("_LPAR", "_LSQB"):
                depth += 1
            elif ty in ("_RPAR", "_RSQB"):
                while pending and pending[-1][1] >= depth:
                    pending.pop()
                depth = max(0, depth - 1)
            elif ty in ("_SEMI", "_LBRACE", "_COLON", "ASSIGN", "ASSIGN_OP"):
                pending.clear()
                depth = 0
            elif ty in ("AND_AND", "OR_OR"):
                while pending and pending[-1][1] == depth:
                    pending.pop()
            i += 1
        return iter(toks)


@functools.cache
def _parser() -> lark.Lark:
    grammar = (resources.files(__package__) / "wgsl.lark").read_text(encoding="utf-8")
    return lark.Lark(grammar, parser="lalr", lexer="basic", postlex=_TemplateLists(),
                     propagate_positions=True, maybe_placeholders=False)


_COMMENT = re.compile(r"//|/\*")
_BLOCK_EDGE = re.compile(r"/\*|\*/")


def blank_comments(source: str) -> str:
    """``source`` with every comment replaced by spaces (newlines kept, so offsets, lines and
    columns stay those of the source). Block comments nest, as WGSL's do."""
    parts = []
    pos = 0
    while (m := _COMMENT.search(source, pos)) is not None:
        start = m.start()
        if m.group() == "//":
            end = source.find("\n", start)
            end = len(source) if end < 0 else end
        else:
            depth, end = 1, m.end()
            while depth and (e := _BLOCK_EDGE.search(source, end)) is not None:
                depth += 1 if e.group() == "/*" else -1
                end = e.end()
            if depth:
                end = len(source)
        parts.append(source[pos:start])
        parts.append(re.sub(r"[^\n]", " ", source[start:end]))
        pos = end
    parts.append(source[pos:])
    return "".join(parts)


def parse(source: str) -> lark.Tree:
    """The syntax tree of a WGSL module. Raises ShaderCompileError where it cannot be read."""
    try:
        return _parser().parse(blank_comments(source))
    except lark.exceptions.UnexpectedInput as e:
        line, col = getattr(e, "line", "?"), getattr(e, "column", "?")
        token = getattr(e, "token", None)
        what = f"unexpected {str(token)!r}" if token is not None else "unexpected input"
        raise ShaderCompileError(
            "reflection", source,
            f"wgcompute's WGSL reader stopped at line {line}, column {col} ({what}); if the "
            f"shader compiles, please report this shader") from None


# -- walking the tree -----------------------------------------------------------------------
def _tok(node) -> str:
    return str(node)


def _children(tree, name: str):
    return [c for c in tree.children if isinstance(c, lark.Tree) and c.data == name]


def _first(tree, name: str):
    found = _children(tree, name)
    return found[0] if found else None


def _idents(tree) -> list[str]:
    return [str(c) for c in tree.children if isinstance(c, lark.Token) and c.type == "IDENT"]


class _Module:
    """The global declarations of one parsed module, and const-expression evaluation."""

    def __init__(self, source: str, tree: lark.Tree):
        self.source = source
        self.consts: dict[str, lark.Tree] = {}
        self.overrides: dict[str, lark.Tree | None] = {}
        self.aliases: dict[str, lark.Tree] = {}
        self.structs: dict[str, tuple[Field, ...]] = {}
        self.struct_builtins: dict[str, list[str]] = {}
        self.vars: list[lark.Tree] = []
        self.functions: list[lark.Tree] = []
        self.enables: list[str] = []
        struct_trees = []
        for node in tree.children:
            kind = node.data
            if kind == "enable":
                self.enables += _idents(node)
            elif kind == "const_decl":
                self.consts[_idents(node)[0]] = node.children[-1]
            elif kind == "override_decl":
                rest = [c for c in node.children
                        if not (isinstance(c, lark.Tree) and c.data in ("attrs", "type_spec"))
                        and not isinstance(c, lark.Token)]
                self.overrides[_idents(node)[0]] = rest[-1] if rest else None
            elif kind == "alias_decl":
                self.aliases[_idents(node)[0]] = _first(node, "type_spec")
            elif kind == "struct_decl":
                struct_trees.append(node)
            elif kind == "global_var":
                self.vars.append(node)
            elif kind == "function_decl":
                self.functions.append(node)
        for node in struct_trees:
            fields, builtins = [], []
            for m in _children(node, "member"):
                attrs = self.attributes(m)
                fields.append(Field(_idents(m)[0], self.type_of(_first(m, "type_spec")),
                                    "align" in attrs or "size" in attrs))
                if "builtin" in attrs:
                    builtins.append(self.text(attrs["builtin"][0]))
            self.structs[_idents(node)[0]] = tuple(fields)
            self.struct_builtins[_idents(node)[0]] = builtins

    # attributes ---------------------------------------------------------------------------
    def attributes(self, node) -> dict[str, list]:
        """{name: [argument expression trees]} of a declaration's attributes."""
        out = {}
        attrs = _first(node, "attrs")
        for a in attrs.children if attrs is not None else ():
            name = str(a.children[0].children[0])
            args = _first(a, "arglist")
            out[name] = list(args.children) if args is not None else []
        return out

    # types ----------------------------------------------------------------------------------
    def type_of(self, node, seen=()) -> TypeRef:
        """A type_spec (or a name expression used as a type) resolved through aliases."""
        name = _idents(node)[0]
        tl = _first(node, "template_list")
        args = tuple(self._type_arg(a, seen) for a in tl.children) if tl is not None else ()
        if not args and name in self.aliases and name not in seen:
            return self.type_of(self.aliases[name], seen + (name,))
        if not args and name in _PREDECLARED:
            base, scalar = _PREDECLARED[name]
            return TypeRef(base, (TypeRef(scalar),))
        return TypeRef(name, args)

    def _type_arg(self, node, seen):
        if isinstance(node, lark.Tree) and node.data == "name":
            return self.type_of(node, seen)
        return self.text(node)

    def text(self, node) -> str:
        if isinstance(node, lark.Token):
            return str(node)
        return " ".join(self.source[node.meta.start_pos:node.meta.end_pos].split())

    # const expressions ----------------------------------------------------------------------
    def evaluate(self, node, what: str, stack=()):
        """The value of a const expression: literals, const and override identifiers (an
        override's default), arithmetic, and the scalar conversions u32/i32/f32."""
        if isinstance(node, lark.Token):
            raise ArgumentError(f"{what}: cannot evaluate {str(node)!r}")
        kind = node.data
        if kind == "number":
            return _number(str(node.children[0]))
        if kind in ("true", "false"):
            return kind == "true"
        if kind == "name" and _first(node, "template_list") is None:
            ident = _idents(node)[0]
            if ident in stack:
                raise ArgumentError(f"{what}: {ident!r} is defined in terms of itself")
            if ident in self.consts:
                return self.evaluate(self.consts[ident], what, stack + (ident,))
            if ident in self.overrides:
                init = self.overrides[ident]
                if init is None:
                    raise ArgumentError(
                        f"{what}: override {ident!r} has no default value; wgcompute does "
                        f"not set pipeline overrides, so give it one "
                        f"(`override {ident}: u32 = 64;`)")
                return self.evaluate(init, what, stack + (ident,))
            raise ArgumentError(f"{what}: {ident!r} is not a const or override declared in "
                                f"the shader")
        if kind == "unary":
            op = str(node.children[0])
            if op not in ("-", "~", "!"):
                self._refuse(node, what)
            value = self.evaluate(node.children[1], what, stack)
            return -value if op == "-" else ~value if op == "~" else not value
        if kind in ("binary", "bitor", "bitxor", "bitand"):
            a = self.evaluate(node.children[0], what, stack)
            b = self.evaluate(node.children[-1], what, stack)
            op = {"bitor": "|", "bitxor": "^", "bitand": "&"}.get(kind) or str(node.children[1])
            return _binary(op, a, b, lambda: self._refuse(node, what))
        if kind == "call":
            fn = _idents(node)[0]
            args = [self.evaluate(a, what, stack) for a in _first(node, "arglist").children]
            conv = {"u32": int, "i32": int, "f32": float, "f16": float, "abs": abs,
                    "min": min, "max": max}.get(fn)
            if conv is None or (fn in ("u32", "i32", "f32", "f16", "abs") and len(args) != 1):
                self._refuse(node, what)
            return conv(*args) if fn in ("min", "max", "abs") else _convert(fn, args[0])
        self._refuse(node, what)

    def _refuse(self, node, what):
        raise ArgumentError(f"{what}: wgcompute cannot evaluate `{self.text(node)}` (it reads "
                            f"literals, consts, overrides with defaults and arithmetic)")


def _number(text: str):
    t = text.lower()
    if t.startswith("0x"):
        if "." in t or "p" in t:
            return float.fromhex(t.rstrip("fh"))
        return int(t.rstrip("iul"), 16)  # i, u, and naga's 64-bit li, lu
    if any(c in t for c in ".e") or t[-1] in "fh":
        return float(t.rstrip("fh"))
    return int(t.rstrip("iul"))


def _convert(fn: str, value):
    if fn in ("u32", "i32"):
        if isinstance(value, float) and not value.is_integer():
            return int(value)  # WGSL truncates toward zero, as int() does
        return int(value)
    return float(value)


def _binary(op: str, a, b, refuse):
    if op == "/":
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                refuse()
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    if op == "%":
        if isinstance(a, int) and isinstance(b, int):
            if b == 0:
                refuse()
            return a - b * _binary("/", a, b, refuse)
        return a - b * int(a / b)
    table = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
             "<<": lambda: a << b, ">>": lambda: a >> b, "&": lambda: a & b,
             "|": lambda: a | b, "^": lambda: a ^ b, "<": lambda: a < b, ">": lambda: a > b,
             "<=": lambda: a <= b, ">=": lambda: a >= b, "==": lambda: a == b,
             "!=": lambda: a != b, "&&": lambda: a and b, "||": lambda: a or b}
    if op not in table:
        refuse()
    return table[op]()


def element_of(t: TypeRef) -> tuple[str | None, int, bool]:
    """(scalar, lanes, atomic) of an array type's elements; (None, 0, False) otherwise."""
    if t.name != "array" or not t.args or not isinstance(t.args[0], TypeRef):
        return None, 0, False
    e = t.args[0]
    atomic = e.name == "atomic"
    if atomic and e.args:
        e = e.args[0]
    if e.name in SCALARS:
        return e.name, 1, atomic
    if e.name in ("vec2", "vec3", "vec4") and e.args and isinstance(e.args[0], TypeRef):
        return e.args[0].name, int(e.name[3]), atomic
    m = _MAT.match(e.name)
    if m and e.args and isinstance(e.args[0], TypeRef):
        return e.args[0].name, int(m.group(1)) * int(m.group(2)), atomic
    return None, 0, atomic


# -- reflect ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def reflect(source: str) -> Reflection:
    """What ``source`` declares: entry points, resource bindings, structs, enables."""
    tree = parse(source)
    mod = _Module(source, tree)
    bindings = []
    for v in mod.vars:
        attrs = mod.attributes(v)
        if "group" not in attrs or "binding" not in attrs:
            continue  # a private or workgroup variable
        name = _idents(v)[0]
        what = f"binding {name!r}"
        tl = _first(v, "template_list")
        qualifier = [mod.text(a) for a in tl.children] if tl is not None else []
        space = qualifier[0] if qualifier else "handle"
        access = qualifier[1] if len(qualifier) > 1 else "read"
        t = mod.type_of(_first(v, "type_spec"))
        element, lanes, atomic = element_of(t)
        fields = mod.structs.get(t.name, ()) if not t.args else ()
        bindings.append(Binding(
            int(mod.evaluate(attrs["group"][0], what)),
            int(mod.evaluate(attrs["binding"][0], what)), name, space, access, t, element,
            lanes, atomic, fields,
            (tl.meta.start_pos, tl.meta.end_pos) if tl is not None else None))
    entries = []
    for f in mod.functions:
        attrs = mod.attributes(f)
        stage = next((s for s in STAGES if s in attrs), None)
        if stage is None:
            continue
        name = _idents(f)[0]
        size = None
        if stage == "compute":
            size = _workgroup_size(mod, attrs.get("workgroup_size"), name)
        builtins = []
        params = _first(f, "params")
        for p in _children(params, "param") if params is not None else ():
            pattrs = mod.attributes(p)
            if "builtin" in pattrs:
                builtins.append(mod.text(pattrs["builtin"][0]))
            else:  # a struct of inputs: its members' builtins
                builtins += mod.struct_builtins.get(mod.type_of(_first(p, "type_spec")).name, [])
        entries.append(EntryPoint(name, stage, size, tuple(builtins)))
    return Reflection(tuple(entries), tuple(sorted(bindings, key=lambda b: (b.group, b.binding))),
                      tuple(mod.structs.items()), tuple(mod.enables),
                      _indexes(mod, tree, {b.name for b in bindings}))


def _indexes(mod: _Module, tree: lark.Tree, names) -> tuple:
    """Where each of ``names`` is indexed directly (``name[expr]``): the expressions' text."""
    found: dict[str, dict[str, None]] = {}
    for node in tree.find_data("index"):
        target, expr = node.children[0], node.children[-1]
        if isinstance(target, lark.Tree) and target.data == "name":
            name = _idents(target)[0]
            if name in names:
                found.setdefault(name, {})["".join(mod.text(expr).split())] = None
    return tuple((n, tuple(v)) for n, v in found.items())


def _workgroup_size(mod: _Module, args, fn: str) -> tuple[int, int, int]:
    what = f"@workgroup_size of {fn!r}"
    if not args:
        raise ArgumentError(f"{what}: the @compute function declares no @workgroup_size")
    values = []
    for a in args:
        v = mod.evaluate(a, what)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ArgumentError(f"{what}: `{mod.text(a)}` is {v!r}; expected a positive "
                                f"integer")
        values.append(v)
    return tuple(values + [1] * (3 - len(values)))


def with_read_write(source: str, binding_numbers) -> str:
    """``source`` with the storage buffers at these @group(0) @binding numbers declared
    ``var<storage, read_write>``: the declarations are found by reflection and only their
    qualifiers are rewritten."""
    by_number = {b.binding: b for b in reflect(source).bindings if b.group == 0}
    spans = []
    for number in binding_numbers:
        b = by_number.get(number)
        if b is None or b.space != "storage" or b.qualifier_span is None:
            raise ArgumentError(f"@binding({number}) is not a storage buffer of the shader")
        if b.access != "read_write":
            spans.append(b.qualifier_span)
    out = source
    for start, end in sorted(set(spans), reverse=True):
        out = out[:start] + "<storage, read_write>" + out[end:]
    return out
