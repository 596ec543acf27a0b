"""`import wgcompute` loads what computing on a Buffer needs and no more: the modules of other
features (images, user kernels, streams, wgc.fuse, the array namespace's linalg and fft, WGSL
reflection's parser, the tuning cache's file lock, asyncio) load on their first use, under
the same names as before."""

import json
import subprocess
import sys

import wgcompute as wgc

DEFERRED = ("wgcompute.image", "wgcompute._fusion", "wgcompute.streams",
            "wgcompute.kernels.user.elementwise", "wgcompute.kernels.user.reduction",
            "wgcompute.array_api.linalg", "wgcompute.array_api.fft", "lark", "asyncio",
            "filelock")


def _run(code: str):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_and_a_first_computation_load_no_other_feature():
    loaded = _run("import json, sys, numpy as np, wgcompute as wgc\n"
                  "y = (wgc.from_numpy(np.ones(4, np.float32)) * 2).to_numpy()\n"
                  "assert y.tolist() == [2.0] * 4\n"
                  f"print(json.dumps([m for m in {DEFERRED!r} if m in sys.modules]))")
    assert loaded == []


def test_the_deferred_names_load_on_first_use():
    got = _run("import json, wgcompute as wgc, wgcompute.array_api as xp\n"
               "from wgcompute import *  # noqa\n"
               "names = [wgc.image.__name__, wgc.fuse.__name__, wgc.Stream.__name__,\n"
               "         wgc.ElementwiseKernel.__name__, ReductionKernel.__name__,\n"
               "         create_stream.__name__, xp.linalg.__name__, xp.fft.__name__,\n"
               "         wgc.stream_map.__name__, type(wgc.stream_map).__name__]\n"
               "print(json.dumps(names))")
    assert got == ["wgcompute.image", "fuse", "Stream", "ElementwiseKernel", "ReductionKernel",
                   "create_stream", "wgcompute.array_api.linalg", "wgcompute.array_api.fft",
                   "stream_map", "function"]


def test_deferred_names_are_listed():
    import wgcompute.array_api as xp

    for name in ("image", "fuse", "Stream", "Event", "upload", "ElementwiseKernel",
                 "ReductionKernel"):
        assert name in dir(wgc) and name in wgc.__all__, name
    assert {"linalg", "fft"} <= set(dir(xp))


def test_wgpu_natives_header_and_first_types_are_parsed_once_then_read_from_the_cache(tmp_path):
    """wgpu-py parses wgpu-native's C header (pycparser) as it is imported, and cffi parses
    each C type string behind a prelude of every typedef: the first process stores those
    parses in wgcompute's cache folder, later ones parse nothing, lay the C types out alike
    and compute the same."""
    import os

    code = ("import json, pycparser.c_parser as cp\n"
            "parses = []\n"
            "parse = cp.CParser.parse\n"
            "cp.CParser.parse = lambda self, *a, **k: parses.append(1) or parse(self, *a, **k)\n"
            "import numpy as np, wgcompute as wgc\n"
            "from wgpu.backends.wgpu_native import ffi\n"
            "y = (wgc.from_numpy(np.arange(4, dtype=np.float32)) * 2).to_numpy().tolist()\n"
            "n = len(parses)\n"
            "items = [ffi.typeof(t + ' *').item for t in ('WGPUBindGroupEntry',  # (parsed\n"
            "    'WGPUDeviceDescriptor', 'WGPUStringView', 'WGPULimits')]  # or read: primed)\n"
            "layout = [(ffi.sizeof(t), [(f, ffi.offsetof(t, f)) for f, _ in t.fields])\n"
            "          for t in items]\n"
            "print(json.dumps([n, y, layout, len(parses) - n]))")
    env = dict(os.environ, WGCOMPUTE_CACHE_DIR=str(tmp_path))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    files = [p.name for p in tmp_path.iterdir()]
    assert files and all(n.startswith("cdef-") for n in files), files
    (first, y1, layout1, more1), (second, y2, layout2, more2) = runs
    assert first >= 2 and second == 0  # (the header and the type strings; then none)
    assert more1 == more2 == 0  # (the types asked for were parsed with the first use's)
    assert layout1 == layout2 and len(layout1) == 4
    assert y1 == y2 == [0.0, 2.0, 4.0, 6.0]
