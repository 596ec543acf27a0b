"""What cffi's C parser makes of wgpu-native's header, kept in wgcompute's cache folder: wgpu-py
parses the whole header with pycparser and makes cffi's declarations of it as it is imported,
most of `import wgcompute`'s time (read back: ~2 ms).
The C type strings parsed while it is imported (wgpu-py's own, and wgcompute's batch of the
types a first GPU use needs, see _ctypes) are kept too: cffi parses each behind a prelude that
declares every typedef of the header, ~30 ms a parse."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys

from .._atomic import write_atomically


def _folder() -> str:
    folder = os.environ.get("WGCOMPUTE_CACHE_DIR")
    if folder:
        return folder
    import platformdirs

    return platformdirs.user_cache_dir("wgcompute")


# what cffi's Parser holds after a parse (the declarations made of it, not the pycparser tree):
# a fresh parser given these is the parser that parsed the header
_STATE = ("_declarations", "_included_declarations", "_anonymous_counter", "_int_constants",
          "_recomplete", "_uses_new_feature")


@contextlib.contextmanager
def cached():
    """While the block imports wgpu-py's native backend, what a fresh cffi parser makes of a
    header it has parsed before (its declarations) and the parses of C type strings are read
    from the cache, keyed by the text parsed (and the typedef names it is parsed after) and the
    versions of cffi, pycparser and Python; parsed and stored otherwise. A cache that cannot be
    read or written only costs the parse."""
    try:
        import cffi
        import pycparser
        from cffi import cparser
    except ImportError:
        yield
        return
    versions = (_FORMAT, cffi.__version__, pycparser.__version__, sys.version)
    parse, parse_header = cparser.Parser._parse, cparser.Parser.parse

    header = []  # set while a header is parsed (its declarations are what is kept)

    def parse_cached(self, csource):
        if header:
            return parse(self, csource)
        # cffi's parse of csource depends on the typedef names declared before it (its
        # prelude declares each) and on nothing else of the earlier declarations
        typedefs = sorted(n for n in self._declarations if n.startswith("typedef "))
        return _through(_path(*versions, *typedefs, csource),
                        lambda: _without_prelude(parse(self, csource)))

    def parse_header_cached(self, csource, override=False, packed=False, pack=None,
                            dllexport=False):
        fresh = not any(getattr(self, a, None) for a in _STATE[:5])
        if not fresh or override or packed or pack or dllexport or \
                not all(hasattr(self, a) for a in _STATE):
            return parse_header(self, csource, override, packed, pack, dllexport)

        def state():
            header.append(csource)
            try:
                parse_header(self, csource)
            finally:
                header.clear()
            return {a: getattr(self, a) for a in _STATE}

        for name, value in _through(_path(*versions, "header", csource), state).items():
            setattr(self, name, value)

    cparser.Parser._parse, cparser.Parser.parse = parse_cached, parse_header_cached
    try:
        yield
    finally:
        cparser.Parser._parse, cparser.Parser.parse = parse, parse_header


def _path(*text: str) -> str | None:
    """The cache file of a parse of ``text`` (None where there is no cache folder)."""
    try:
        digest = hashlib.sha256("\0".join(text).encode()).hexdigest()[:32]
        return os.path.join(_folder(), f"cdef-{digest}.pickle")
    except Exception:  # noqa: BLE001 - no home, no platformdirs: parse every time
        return None


def _through(path: str | None, make):
    """What ``path`` holds, or ``make()``'s result, stored there."""
    if path is not None:
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception:  # noqa: BLE001 - not there yet (or unreadable): parse
            pass
    got = make()
    if path is not None:
        with contextlib.suppress(Exception):  # a read-only home must not break computing
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomically(path, lambda tmp: _write(tmp, got))
    return got


_FORMAT = "wgcompute cdef cache 3"  # (what a cache file holds: see _STATE, _without_prelude)


def _without_prelude(parsed):
    """cffi's parse result without the declarations of its prelude (a `typedef int NAME;` for
    every typedef known), which its readers skip: cffi reads the declarations from the one
    named __dotdotdot__ on (the prelude's last), a type string's parse its last ones."""
    ast, *rest = parsed
    from pycparser import c_ast

    at = next((i for i, d in enumerate(ast.ext) if getattr(d, "name", None) == "__dotdotdot__"),
              None)
    if at is None or type(ast) is not c_ast.FileAST:
        return parsed
    return (c_ast.FileAST(ast.ext[at:], ast.coord), *rest)


def _write(path: str, parsed) -> None:
    with open(path, "wb") as f:  # opened first: a folder that cannot be written costs no pickling
        pickle.dump(parsed, f, protocol=pickle.HIGHEST_PROTOCOL)
