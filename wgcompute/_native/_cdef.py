"""What cffi's C parser makes of wgpu-native's header, kept in wgcompute's cache folder: wgpu-py
parses the whole header with pycparser as it is imported, most of `import wgcompute`'s time.
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


@contextlib.contextmanager
def cached():
    """While the block imports wgpu-py's native backend, a fresh cffi parser's parse of a
    header it has parsed before is read from the cache (the same pycparser tree, keyed by the
    header's text and the versions of cffi, pycparser and Python); parsed and stored otherwise.
    A cache that cannot be read or written only costs the parse."""
    try:
        import cffi
        import pycparser
        from cffi import cparser
    except ImportError:
        yield
        return
    parse = cparser.Parser._parse

    def parse_cached(self, csource):
        # cffi's parse of csource depends on the typedef names declared before it (its
        # prelude declares each) and on nothing else of the earlier declarations
        typedefs = sorted(n for n in self._declarations if n.startswith("typedef "))
        text = "\0".join((_FORMAT, cffi.__version__, pycparser.__version__, sys.version,
                          *typedefs, csource))
        try:
            path = os.path.join(_folder(), f"cdef-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
                                           ".pickle")
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception:  # not there yet (or unreadable): parse
            pass
        got = _without_prelude(parse(self, csource))
        with contextlib.suppress(Exception):  # a read-only home must not break computing
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomically(path, lambda tmp: _write(tmp, got))
        return got

    cparser.Parser._parse = parse_cached
    try:
        yield
    finally:
        cparser.Parser._parse = parse


_FORMAT = "wgcompute cdef cache 2"  # (what a cache file holds: see _without_prelude)


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
