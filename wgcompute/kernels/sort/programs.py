"""The sort family's programs as step kernels (radix count and scatter, scans, extraction,
group flags, binary search, unique's compaction): each renders its template for constants
the op chose; the ops in sort.py and unique.py chain them in one compute pass."""

from __future__ import annotations

from ...errors import ArgumentError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

WG = 256  # threads of a workgroup; a radix pass has WG digits or a multiple of WG
ITEMS = 4  # elements per invocation of the other programs
SCAN_ITEMS = 16
CHUNK = WG * SCAN_ITEMS  # words a scan workgroup covers
RADIX_BITS = 8  # the digit of 64-bit keys' passes
# The digit of 32-bit keys' passes (and their rows'): 8 (4 passes, 256 digits) or 11 (3 passes
# of 2,048 digits: a quarter less memory traffic and 5 dispatches fewer, each tile ranked in 3
# rounds of 4 bits instead of 2, segments of 8 tiles so that the histograms stay as small).
# Measured on an H200 (64M f32, wall with a synchronize): 8 bits 4.59 ms sort / 6.67 argsort,
# 11 bits 8.86 / 10.53 (its scatter writes ~8 records a digit and segment where 8 bits write
# whole tiles' runs: the writes coalesce far less). 8 it is.
RADIX_BITS_32 = 8
# Tests set these False to exercise the workgroup-memory scan on adapters with subgroups and
# the small tiles on adapters with more workgroup memory than WebGPU's default.
use_subgroups = True
wide_tiles = True
# The radix passes read records of one word (a 32-bit key, no index) four to a load.
# Measured on an H200 (64M f32, GPU time): a pass's count 145 -> 86 us, its scatter 692 ->
# 674; the sort 3.49 -> 3.18 ms.
vector_loads = True
# Elements a radix invocation takes at most (the tile: WG times it). Measured on an H200
# (64M f32): 8 sorted in 4.45 ms, 16 in 5.08 (argsort 6.38 and 9.01 ms). Again later, with the
# scans in workgroup memory too and 4,096 segments: sort 4.57 ms at 8 with subgroup scans
# (4.97-6.41 elsewhere); argsort 6.04 ms at 4 with 4,096 segments, 6.75 at these defaults.
# (Counting each tile's digits with workgroup atomics as its records load, instead of finding
# the digit boundaries in the sorted tile, made the scatter 8% slower: 958 us a pass, 887.)
# Once more with the ranking's counts in registers and two tiles a segment: 8 4.05 ms, 4 5.18.
max_items = 8
# ... for records of two words or more (an index, a 64-bit key): 4. Measured on an H200, 4
# against 8: argsort of 64M f32 6.09 / 6.54 ms; of 32M f64 8.65 / 14.81 and s64 8.13 / 13.04;
# sort of 32M f64 6.43 / 7.26, of s64 5.94 / 5.96.
max_items_wide_records = 4
# (A count workgroup taking 2 or 4 one-tile segments, all their loads in flight before any is
# counted, measured on an H200: 157 and 198 us a pass against one tile's 153.)

_SORT_FIELDS = (("n", "u32"), ("blocks", "u32"), ("shift", "u32"), ("word", "u32"),
                ("rowlen", "u32"), ("nv", "u32"), ("per", "u32"))
# Segments of tiles a radix workgroup runs through, at most: as many as there are tiles (one
# tile a workgroup) unless there are more. Measured on an H200 (64M f32, 32,768 tiles): 2,048
# segments of 16 tiles sorted in 4.61 ms, one tile a segment in 4.45.
SEGMENTS = 1 << 22
# (Two tiles a segment, half the histograms to count, scan and read back, measured on an H200
# (64M f32, GPU time): 3.18 ms against one tile's 3.31, but one tile a segment lets the
# scatter read each tile's histogram for its digits' first places: 3.02.)
_DEFAULTS = {"STEP": "", "KIND": "u", "W": 1, "DESC": False, "ROW": False, "PAY": False,
             "FIRST": False, "SR": 1, "DR": 1, "WG": WG, "ITEMS": ITEMS, "SHM": 1,
             "SIDE": "left", "SUB": False, "D": WG, "ROUNDS": 2,
             "VEC": False, "TH": False}


class Step(BuiltinKernel):
    """One program of the family. Its params are ``c`` (the template's constants, part of
    the pipeline key) and ``u`` (the uniform's values) and ``groups`` (workgroups); the op
    that chains it has checked the buffers."""

    dtypes = ("u32", "s32", "f32", "f64", "s64", "u64", "c64")
    not_in_place = "a sort step reads other elements than the one it writes"
    params = (Param("c", "constants", {}), Param("u", "uniform", {}),
              Param("groups", "u32", 1))

    def __init__(self, name: str, template: str, inputs: tuple[str, ...], fields):
        self.name = name
        self.template = template
        self.inputs = inputs
        self.fields = fields

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (), tuple(sorted(params["c"].items())))

    def render(self, key: PipelineKey):
        consts = dict(_DEFAULTS, **dict(key.constants))
        consts["SGARGS"] = (",\n        @builtin(subgroup_invocation_id) sid: u32,\n"
                            "        @builtin(subgroup_size) ssize: u32") if consts["SUB"] else ""
        # the scatter's per-invocation nibble counters: 4 bits each while a count fits (at most
        # ITEMS), in CW words
        consts["FB"] = 4 if consts["ITEMS"] < 16 else 8
        consts["CW"] = 16 * consts["FB"] // 32
        consts["LANES"] = ", ".join(f"{i}u" for i in range(consts["CW"]))
        src = shaders.render(shaders.load(self.template), consts, name=self.template)
        return src, self.fields

    def launches(self, inputs, output, params, device):
        groups = params["groups"]
        if groups == 0:
            return []
        u = {f: 0 for f, _ in self.fields}
        u.update(params["u"])
        return [Launch(fold_grid(groups, device, self.name), u)]


COUNT = Step("sort_count", "sort/sort.wgsl", ("src",), _SORT_FIELDS)
SCATTER = Step("sort_scatter", "sort/sort.wgsl", ("src", "offs"), _SORT_FIELDS)
SCATTER_TH = Step("sort_scatter_th", "sort/sort.wgsl", ("src", "offs", "th"), _SORT_FIELDS)
EXTRACT = Step("sort_extract", "sort/sort.wgsl", ("src",), _SORT_FIELDS)
FLAG = Step("sort_flag", "sort/sort.wgsl", ("src",), _SORT_FIELDS)
SEARCH = Step("sort_search", "sort/sort.wgsl", ("x", "v"), _SORT_FIELDS)
GATHER = Step("sort_gather", "sort/sort.wgsl", ("x", "v"), _SORT_FIELDS)
OKEY = Step("sort_okey", "sort/sort.wgsl", ("src",), _SORT_FIELDS)
NONZERO = Step("sort_nonzero", "sort/sort.wgsl", ("src",), _SORT_FIELDS)
SCAN_REDUCE = Step("scan_reduce", "sort/scan.wgsl", ("a",), (("n", "u32"),))
SCAN_TOP = Step("scan_top", "sort/scan.wgsl", ("a",), (("n", "u32"),))
SCAN_DOWN = Step("scan_down", "sort/scan.wgsl", ("a", "b"), (("n", "u32"),))
COL_REDUCE = Step("scan_colreduce", "sort/scan.wgsl", ("a",), (("n", "u32"),))
COL_TOP = Step("scan_coltop", "sort/scan.wgsl", ("a",), (("n", "u32"),))
COL_DOWN = Step("scan_coldown", "sort/scan.wgsl", ("a", "b"), (("n", "u32"),))
COL_ITEMS = 64  # tiles a column-scan invocation runs through


def radix_bits(w: int) -> int:
    """The digit's bits of the radix passes for keys of ``w`` words (RADIX_BITS_32: 8 or 11)."""
    if RADIX_BITS_32 not in (8, 11):
        raise ArgumentError(f"sort: RADIX_BITS_32 is {RADIX_BITS_32!r}; expected 8 or 11")
    return RADIX_BITS_32 if w == 1 else RADIX_BITS


def radix_config(device, rec: int, bits: int = RADIX_BITS) -> dict:
    """The radix programs' digits and tile for records of ``rec`` words: digits of ``bits``
    where the workgroup memory holds their scatter (else 8 bits: 11-bit ones need 27 KiB), the
    most elements an invocation (16, 8 or 4; at most max_items, max_items_wide_records for
    records of several words) whose tile it holds (4 in WebGPU's default 16 KiB), and subgroup
    scans where the adapter has them."""
    def shm(items: int) -> int:  # the staged tile (a word of padding per 8) or the counters
        return max(WG * items * rec + WG * items // 8, 9 * WG)

    def need(items: int) -> int:  # the scatter's bytes: the tile, WG words, 2 a digit, 16
        return (shm(items) + WG + 2 * digits + 16) * 4

    digits = 1 << bits
    limit = device.limit("max-compute-workgroup-storage-size")
    items = 4
    most = max_items if rec == 1 else min(max_items, max_items_wide_records)
    for wide in (8, 16):
        if wide_tiles and wide <= most and need(wide) <= limit:
            items = wide
    if need(items) > limit and bits != RADIX_BITS:
        return radix_config(device, rec, RADIX_BITS)
    return {"BITS": bits, "ITEMS": items, "SHM": shm(items), "D": digits,
            "ROUNDS": -(-bits // 4),
            "SUB": use_subgroups and device.has("subgroup")}


def groups_for(n: int, per: int) -> int:
    return -(-n // per)


def scan_temps(n: int) -> list:
    """The two temporaries scan_steps needs for ``n`` words (the chunks' sums and their scan)."""
    parts = max(groups_for(n, CHUNK), 1)
    return [((parts,), "u32"), ((parts,), "u32")]


def scan_steps(src, dst, n: int, sums, scanned) -> list:
    """Steps writing the exclusive prefix sum of ``n`` u32 words of ``src`` into ``dst``
    (refs), through ``sums`` and ``scanned``, the temporaries of scan_temps(n)."""
    parts = groups_for(n, CHUNK)
    c = {"WG": WG, "ITEMS": SCAN_ITEMS}
    u = {"n": n}
    return [(SCAN_REDUCE, [src], sums, {"c": dict(c, STEP="reduce"), "u": u,
                                        "groups": parts}),
            (SCAN_TOP, [sums], scanned, {"c": dict(c, STEP="top"), "u": {"n": parts},
                                         "groups": 1}),
            (SCAN_DOWN, [src, scanned], dst, {"c": dict(c, STEP="down"), "u": u,
                                              "groups": parts})]


def col_scan_temps(tiles: int, digits: int = WG) -> list:
    """The two temporaries col_scan_steps needs for ``tiles`` histograms of ``digits``."""
    groups = max(groups_for(tiles, COL_ITEMS), 1)
    return [((groups * digits,), "u32"), (((groups + 1) * digits,), "u32")]


def col_scan_steps(src, dst, tiles: int, sums, scanned, digits: int = WG) -> list:
    """Steps writing the radix offsets of ``tiles`` histograms of ``digits`` (a multiple of
    WG; ``src``, tile-major) into ``dst``: each (tile, digit)'s place in digit-major order."""
    groups = groups_for(tiles, COL_ITEMS)
    c = {"WG": WG, "ITEMS": COL_ITEMS, "D": digits}
    u = {"n": tiles}
    wide = digits // WG  # workgroups a group of tiles takes (WG digits each)
    return [(COL_REDUCE, [src], sums, {"c": dict(c, STEP="colreduce"), "u": u,
                                       "groups": groups * wide}),
            (COL_TOP, [sums], scanned, {"c": dict(c, STEP="coltop"), "u": {"n": groups},
                                        "groups": 1}),
            (COL_DOWN, [src, scanned], dst, {"c": dict(c, STEP="coldown"), "u": u,
                                             "groups": groups * wide})]


def kind(dtype: str) -> str:
    """The key's kind of a sortable dtype: "f" (f32, f64), "i" (s32, s64), "u" (u32, u64) or
    "c" (c64: by the real part, then the imaginary part)."""
    return {"f32": "f", "f64": "f", "s32": "i", "s64": "i", "u32": "u", "u64": "u",
            "c64": "c"}[str(dtype)]


def words(dtype: str) -> int:
    return 2 if str(dtype) in ("f64", "s64", "u64", "c64") else 1


def check_size(name: str, n: int) -> None:
    """Indices and positions are u32 in the shaders, and int32 in results."""
    if n >= 2**31:
        raise ShapeError(f"{name}: {n} elements; at most {2**31 - 1} are sorted at once "
                         f"(positions are int32)")
