"""A process's first GPU work, timed in fresh interpreters: ``import wgcompute``, finding the
adapter, opening the device, uploading 4 floats, compiling the kernel of ``x * 2``, submitting it
and waiting for the result, and how much of all that cffi spent parsing C type strings.
Prints the median of each part over ``--runs`` processes.

The import is timed as an installed wgcompute runs it: pip compiles a package's modules to
bytecode when it installs them, so the modules are compiled first (``compileall``, into their
``__pycache__``) and the measured processes may read and write bytecode whatever
PYTHONDONTWRITEBYTECODE says (``--source`` times an import that compiles every module from its
source instead). The import is split into numpy's, wgpu-py's (its package and its native
backend: the wgpu-native library and its C header) and the rest of wgcompute's.

    python benchmarks/first_submit.py [--runs 5] [--without-type-priming] [--fresh-cache]
                                      [--source]

``--without-type-priming`` times the same with wgcompute's batched parse of the C types of a
first use turned off (each type string then parsed alone, as cffi does by itself).
``--fresh-cache`` gives each process an empty cache folder (WGCOMPUTE_CACHE_DIR): the first
process of an installation, which parses wgpu-native's C header itself; otherwise the cache
folder in use keeps that parse after the first process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PARTS = ("import", "  numpy", "  wgpu-py", "  wgcompute", "adapter", "device open", "upload",
         "shader compile", "submit+wait", "total", "C type parsing")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cffi.cparser as cp
parse = cp.Parser.parse_type_and_quals
spent = [0.0]
def timed_parse(self, cdecl):
    t = time.perf_counter()
    try:
        return parse(self, cdecl)
    finally:
        spent[0] += time.perf_counter() - t
cp.Parser.parse_type_and_quals = timed_parse
if NO_PRIME:
    import types
    stub = types.ModuleType("wgcompute._native._ctypes")
    stub.prime = lambda ffi, cdecls=(): 0
    sys.modules["wgcompute._native._ctypes"] = stub
import importlib.abc
wgpu_s = [0.0]  # wgpu-py's package and its native backend, timed as wgcompute imports them
class TimedWgpu(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in ("wgpu", "wgpu.backends.wgpu_native"):
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(name, path, target)
            if spec is not None:
                run = spec.loader.exec_module
                def exec_module(module, run=run):
                    t = time.perf_counter()
                    try:
                        run(module)
                    finally:
                        wgpu_s[0] += time.perf_counter() - t
                spec.loader.exec_module = exec_module
                return spec
        return None
sys.meta_path.insert(0, TimedWgpu())
t_start = time.perf_counter()
import numpy as np
t_np = time.perf_counter()
import wgcompute as wgc
from wgcompute import _adapters
from wgcompute.kernels.core import base
compile_s = [0.0]
compile_fn = base.Kernel._compile
def timed_compile(self, key, device):
    t = time.perf_counter()
    try:
        return compile_fn(self, key, device)
    finally:
        compile_s[0] += time.perf_counter() - t
base.Kernel._compile = timed_compile
t1 = time.perf_counter()
_adapters._default_adapter()
t2 = time.perf_counter()
wgc.default_device()
t3 = time.perf_counter()
x = wgc.from_numpy(np.ones(4, np.float32))
t4 = time.perf_counter()
y = (x * 2).to_numpy()
t5 = time.perf_counter()
assert y.tolist() == [2.0] * 4, y
print(json.dumps({"import": t1 - t_start, "  numpy": t_np - t_start,
                  "  wgpu-py": wgpu_s[0], "  wgcompute": t1 - t_np - wgpu_s[0],
                  "adapter": t2 - t1, "device open": t3 - t2,
                  "upload": t4 - t3, "shader compile": compile_s[0],
                  "submit+wait": t5 - t4 - compile_s[0], "total": t5 - t_start,
                  "C type parsing": spent[0]}))
"""


def one_run(no_prime: bool, fresh_cache: bool = False, source: bool = False) -> dict:
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    if source:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # bytecode looked for where there is none (and, with the flag above, never written)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(),
                                                  f"wgcompute-no-bytecode-{os.getpid()}")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if fresh_cache:
        with tempfile.TemporaryDirectory() as folder:
            return one_run_in(no_prime, dict(env, WGCOMPUTE_CACHE_DIR=folder))
    return one_run_in(no_prime, env)


def one_run_in(no_prime: bool, env: dict) -> dict:
    code = f"NO_PRIME = {no_prime!r}\n" + CHILD
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def compile_modules() -> None:
    """wgcompute's, numpy's and wgpu-py's modules compiled to bytecode, as an installation
    has them (a folder that cannot be written is left as it is)."""
    import compileall
    import importlib.util

    for name in ("wgcompute", "numpy", "wgpu", "cffi", "pycparser", "platformdirs"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                compileall.compile_dir(folder, quiet=2, workers=0)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes to time")
    ap.add_argument("--without-type-priming", action="store_true",
                    help="parse cffi's C types one by one (as without wgcompute's batch)")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="an empty cache folder for each process (the header parsed again)")
    ap.add_argument("--source", action="store_true",
                    help="compile every module from its source (no bytecode)")
    args = ap.parse_args(argv)
    if not args.source:
        compile_modules()
    runs = [one_run(args.without_type_priming, args.fresh_cache, args.source)
            for _ in range(max(1, args.runs))]
    median = {p: statistics.median(r[p] for r in runs) for p in PARTS}
    how = "without" if args.without_type_priming else "with"
    cache = "an empty cache folder each" if args.fresh_cache else "the cache folder in use"
    code = "compiled from source" if args.source else "from bytecode"
    print(f"# first submit of a fresh process: `wgc.from_numpy(np.ones(4, np.float32)) * 2`, "
          f"read back; median of {len(runs)} process(es), {how} batched C type parsing, "
          f"{cache}, modules {code}")
    print(f"{'part':16} {'ms':>8}   (min-max)")
    for p in PARTS:
        values = [r[p] * 1e3 for r in runs]
        print(f"{p:16} {median[p] * 1e3:8.1f}   ({min(values):.0f}-{max(values):.0f})")
    print("(submit+wait includes the readback; C type parsing is spread over the other parts)")
    return median


if __name__ == "__main__":
    main()
