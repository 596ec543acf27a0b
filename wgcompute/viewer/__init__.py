"""The image-processing demo viewer, shipped as wgcompute.viewer: a live pipeline on an image
or an animated pattern, shown through run_to_surface; `wgcompute view` opens it."""

from .app import (
    KEYS,
    STAGES,
    Viewer,
    ViewerState,
    apply_key,
    help_text,
    load_image,
    parse_key_script,
    save_png,
)
from .main import view

__all__ = ["KEYS", "STAGES", "Viewer", "ViewerState", "apply_key", "help_text", "load_image",
           "parse_key_script", "save_png", "view"]
