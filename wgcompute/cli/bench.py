"""`wgcompute bench`: runs the benchmark suite in benchmarks/ (a checkout's folder, not part of
the installed package) and prints its markdown table; --json/--png keep the results."""

from __future__ import annotations

import importlib
import os
import sys

import wgcompute as wgc

DESCRIPTION = """Run the kernel benchmarks side by side: wgcompute, raw wgpu-py written the
obvious way, numpy on the CPU, and torch / CuPy when importable, in one run.

Examples:
  wgcompute bench --small                  # lavapipe / CI sizes, about a minute
  wgcompute bench --only matmul --json out/kernels.json
  wgcompute bench --suite all              # also every other benchmarks/bench_*.py"""

GROUPS = ("elementwise", "reduce", "softmax", "matmul", "copy", "sweep")


def add_arguments(p) -> None:
    p.add_argument("--small", action="store_true",
                   help="small sizes that a CPU adapter (lavapipe) finishes quickly")
    p.add_argument("--only", default="", metavar="NAME[,NAME]",
                   help=f"run a subset: {', '.join(GROUPS)}")
    p.add_argument("--json", default="", metavar="PATH", help="write the results as JSON")
    p.add_argument("--png", default="", metavar="PATH",
                   help="write the GB/s and TFLOP/s plot (default: next to --json)")
    p.add_argument("--repeat", type=int, default=0, help="timed repetitions (median of N)")
    p.add_argument("--suite", choices=("kernels", "all"), default="kernels",
                   help="kernels (default) or all: every benchmarks/bench_*.py module")


def find_benchmarks() -> str:
    """The folder holding the benchmarks package: the current directory's, else the one next
    to an editable install's source tree."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for root in (os.getcwd(), here):
        if os.path.isfile(os.path.join(root, "benchmarks", "harness.py")):
            return root
    raise wgc.ArgumentError("bench: no benchmarks/ folder found; run `wgcompute bench` from the "
                        "wgcompute repository root (the suite is not part of the wheel)")


def _import(root: str, name: str):
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(f"benchmarks.{name}")


def run(args) -> int:
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in GROUPS]
    if bad:
        raise wgc.ArgumentError(f"--only: unknown {', '.join(bad)}; expected one or more of "
                            f"{', '.join(GROUPS)}")
    if args.repeat < 0:
        raise wgc.ArgumentError(f"--repeat: expected a positive count, got {args.repeat}")
    root = find_benchmarks()
    argv = (["--small"] if args.small else []) + (["--only", ",".join(only)] if only else [])
    argv += (["--json", args.json] if args.json else []) + (["--png", args.png] if args.png
                                                            else [])
    argv += ["--repeat", str(args.repeat)] if args.repeat else []
    rc = _import(root, "bench_kernels").run(argv)
    if args.suite == "all":
        import subprocess

        names = sorted(f[:-3] for f in os.listdir(os.path.join(root, "benchmarks"))
                       if f.startswith("bench_") and f.endswith(".py") and f != "bench_kernels.py")
        for name in names:
            print(f"\n## {name}", flush=True)
            cmd = [sys.executable, "-m", f"benchmarks.{name}"]
            if args.json:
                cmd += ["--json", os.path.join(os.path.dirname(os.path.abspath(args.json)),
                                               f"{name}.json")]
            rc = max(rc, subprocess.call(cmd, cwd=root))
    return rc
