"""`wgcompute view`: the live image-processing viewer (a glfw window), or N frames rendered
headless to PNG files with --frames N --out DIR."""

from __future__ import annotations

from wgcompute.viewer import KEYS, help_text, view

DESCRIPTION = f"""\
Open the live image-processing viewer: gaussian blur -> sharpen -> grayscale -> edges ->
brightness/contrast, run on every frame on the GPU and shown with run_to_surface (the
image never returns to the CPU). Without IMAGE an animated pattern is shown. The title
shows FPS and GPU milliseconds per frame.

keys:
{help_text()}

examples:
  wgcompute view photo.png
  wgcompute view --frames 30 --out frames/ --keys "5:2,10:RR,20:3"
"""

assert "s" in KEYS  # the screenshot key documented above


def _size(text: str) -> tuple[int, int]:
    import argparse

    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 1 or int(h) < 1:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT like 640x400, got {text!r}")
    return int(w), int(h)


def add_arguments(p) -> None:
    p.add_argument("image", nargs="?", help="an image file (PNG, JPEG, ...); default: an "
                   "animated pattern")
    p.add_argument("--frames", type=int, metavar="N",
                   help="render N frames headless (offscreen) instead of opening a window")
    p.add_argument("--out", metavar="DIR", help="with --frames: write frame_NNNN.png here; "
                   "in a window: where `s` saves screenshots (default: .)")
    p.add_argument("--keys", default="", metavar="FRAME:KEYS,...",
                   help='key presses to replay before the given frames, e.g. "3:2,6:RR" '
                   '(_ is space)')
    p.add_argument("--size", type=_size, default=(640, 400), metavar="WxH",
                   help="size of the animated pattern (default 640x400)")


def run(args) -> int:
    import sys

    import wgcompute as wgc

    if (args.image or args.out) and not wgc.image.has_imageio():
        what = "reading IMAGE" if args.image else "writing PNG files to --out"
        print(f"wgcompute view: error: {what} needs imageio, which is not installed: "
              f"{wgc.image.INSTALL_HINT}", file=sys.stderr)
        return 2
    view(args.image, frames=args.frames, out=args.out, keys=args.keys, size=args.size)
    return 0
