"""The `wgcompute` command line: one module per subcommand (demo, info, process, infer,
tune, view, bench), each with add_arguments(parser) and run(args) -> exit code, imported on use."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

SUBCOMMANDS = {
    "demo": "run the quick start: device, buffers, kernels, read back, timings",
    "info": "print the device table (adapters, features, limits)",
    "process": "run an image pipeline over files, globs or directories",
    "infer": "classify images with an ONNX model (preprocess -> model -> softmax)",
    "tune": "time an ONNX model's kernel configurations ahead of its first use",
    "view": "open the live image-processing viewer (glfw window)",
    "bench": "run the benchmark suite side by side with peers",
}


def _module(name: str):
    return importlib.import_module(f"wgcompute.cli.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wgcompute",
                                     description="GPU compute on WebGPU from Python.")
    from wgcompute import __version__

    parser.add_argument("--version", action="version", version=f"wgcompute {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        try:
            mod = _module(name)
        except ModuleNotFoundError as e:
            if e.name != f"wgcompute.cli.{name}":
                raise
            continue  # not built into this version
        p = sub.add_parser(name, help=help_text, description=getattr(mod, "DESCRIPTION",
                                                                   help_text),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from wgcompute import WgComputeError

    try:
        return int(args._run(args) or 0)
    except WgComputeError as e:
        print(f"wgcompute {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `wgcompute info | head`: the reader left; not an error
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
