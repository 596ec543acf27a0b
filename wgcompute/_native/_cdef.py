"""What cffi's C parser makes of wgpu-native's header, kept in wgcompute's cache folder: wgpu-py
parses the whole header with pycparser as it is imported, most of `import wgcompute`'s time."""

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
        if self._declarations:  # the parse depends on earlier declarations: not cached
            return parse(self, csource)
        text = "\0".join((cffi.__version__, pycparser.__version__, sys.version, csource))
        try:
            path = os.path.join(_folder(), f"cdef-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
                                           ".pickle")
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception:  # not there yet (or unreadable): parse
            pass
        got = parse(self, csource)
        with contextlib.suppress(Exception):  # a read-only home must not break computing
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomically(path, lambda tmp: _write(tmp, got))
        return got

    cparser.Parser._parse = parse_cached
    try:
        yield
    finally:
        cparser.Parser._parse = parse


def _write(path: str, parsed) -> None:
    with open(path, "wb") as f:  # opened first: a folder that cannot be written costs no pickling
        pickle.dump(parsed, f, protocol=pickle.HIGHEST_PROTOCOL)
