"""Files written whole or not at all: a temporary file beside the destination, then a rename
(os.replace is atomic on one file system), so a reader never sees half a file."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable


def write_atomically(path: str, write: Callable[[str], object]) -> str:
    """Call ``write(tmp)`` to fill a temporary file beside ``path``, then rename it onto
    ``path``; the temporary is removed if anything fails. Returns ``path``.

    Not mkstemp: its 0600 mode would stick to the renamed file; a unique name will do. The
    writer's pid in the name lets wgc.image.remove_stale_temps tell a killed run's leftovers
    from a live run's file."""
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1]
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp{ext}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
