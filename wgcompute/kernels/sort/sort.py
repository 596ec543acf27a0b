"""The stable sort along the last axis of a batch of rows (values, or the int32 permutation),
ascending or descending: a least-significant-digit radix sort on keys made from the
elements' bits, 8 bits a pass (programs.RADIX_BITS_32 selects 11 for 32-bit keys: fewer
passes, but slower on an H200), reduce-then-scan.

How: each pass counts its digit per segment of the elements (tiles of 1,024 or 2,048
elements, one tile a segment for 8-bit digits and 8 for 11-bit ones unless programs.SEGMENTS
says fewer segments; the histograms stored segment-major), scans the histograms in
digit-major order (so every segment knows where each of its digits goes), and moves each
segment's records there, tile by tile, each tile sorted stably by the digit in workgroup
memory first (rounds of 4-bit ranking) so that each digit's records leave together. Elements
move as their bits (nan payloads and -0.0 survive); their keys order floats with -0.0 equal
to +0.0 and every nan last (first when descending: the keys are inverted). Rows are sorted
together: after the key's passes, passes over the row number (each record carries its index)
put the rows back in order, stably. 32-bit dtypes take 4 passes (3 with 11-bit digits),
64-bit ones 8, plus one per digit of the row number. On an H200, 64M f32 sort in 3.2-3.4 ms
and argsort in 5.5-5.6 ms, a call and its synchronize (CuPy: 1.84 ms sort); with 11-bit
digits (before the ranking counted in registers) 8.86 and 10.53 ms."""

from __future__ import annotations

from ...errors import DtypeError, ShapeError
from ..core.base import BuiltinKernel, Param
from . import programs
from .programs import (
    COUNT,
    EXTRACT,
    SCATTER,
    SCATTER_TH,
    WG,
    check_size,
    col_scan_steps,
    col_scan_temps,
    groups_for,
    kind,
    radix_bits,
    radix_config,
    words,
)

SORTABLE = ("f32", "f64", "s32", "s64", "u32", "u64")
ORDERED = SORTABLE + ("c64",)  # complex numbers by real part, then imaginary part


def _digits(w: int, rows: int, bits: int) -> list[tuple[bool, int, int]]:
    """(row pass?, word, shift) of each radix pass of ``bits``, least significant first."""
    out = [(False, word, shift) for word in range(w) for shift in range(0, 32, bits)]
    if rows > 1:
        out += [(True, 0, shift) for shift in range(0, (rows - 1).bit_length(), bits)]
    return out


class Sort(BuiltinKernel):
    """Stable sort of each row (the last axis) of x: its values, or with ``indices`` the
    int32 positions in the row that sort it."""

    name = "sort"
    inputs = ("x",)
    dtypes = ORDERED
    params = (Param("descending", "bool", False, "largest first (still stable)"),
              Param("indices", "bool", False, "the permutation (s32) instead of the values"))
    description = "stable sort along the last axis (values, or the s32 permutation)"
    not_in_place = "a sort moves elements between positions"
    scratch_temps = True  # every pass writes its temporaries whole before they are read

    def output_spec(self, inputs, params):
        (x,) = inputs
        return x.shape, "s32" if params.get("indices") else x.dtype

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.dtype not in ORDERED:
            raise DtypeError(f"sort: x is {x.dtype}; expected one of {', '.join(ORDERED)}")
        want = "s32" if params["indices"] else x.dtype
        if output.dtype != want or output.shape != x.shape:
            raise ShapeError(f"sort: out is {output.shape} {output.dtype}; expected "
                             f"{x.shape} {want}")
        check_size("sort", x.size)

    def passes(self, inputs, output, params):
        (x,) = inputs
        total = x.size
        if total == 0:
            return [], []
        rowlen = x.shape[-1] if x.ndim else 1
        rows = total // rowlen
        w = words(x.dtype)
        pay = params["indices"] or rows > 1
        rec = w + int(pay)
        config = radix_config(x.device, rec, radix_bits(w))
        bits, d = config.pop("BITS"), config["D"]
        tiles = groups_for(total, WG * config["ITEMS"])
        # tiles a workgroup runs through: D / WG of them, so that the histograms of wider
        # digits are no larger than 8-bit ones of a tile each
        per = max(groups_for(tiles, programs.SEGMENTS), d // WG)
        blocks = groups_for(tiles, per)
        # one tile a segment of 8-bit digits: the scatter reads each tile's histogram for its
        # digits' first places (measured on an H200, 64M f32: its pass 672 -> 605 us)
        th = per == 1 and d == WG
        digits = _digits(w, rows, bits)
        hist = d * blocks
        temps = [((total * rec,), "u32"), ((total * rec,), "u32"), ((hist,), "u32"),
                 ((hist,), "u32"), *col_scan_temps(blocks, d)]
        consts = {"KIND": kind(x.dtype), "W": w, "DESC": params["descending"], "PAY": pay,
                  "DR": rec, **config}
        steps = []
        src = "in0"
        for i, (row, word, shift) in enumerate(digits):
            last = i == len(digits) - 1
            dst = "out" if last and not pay else f"tmp{i % 2}"
            sr = w if i == 0 else rec
            # records of one word read four to a load (vector_loads: tests turn it off)
            c = dict(consts, ROW=row, FIRST=i == 0, SR=sr,
                     VEC=sr == 1 and programs.vector_loads)
            u = {"n": total, "blocks": blocks, "shift": shift, "word": word,
                 "rowlen": rowlen, "per": per}
            steps.append((COUNT, [src], "tmp2", {"c": dict(c, STEP="count"), "u": u,
                                                 "groups": blocks}))
            steps += col_scan_steps("tmp2", "tmp3", blocks, "tmp4", "tmp5", d)
            if th:
                steps.append((SCATTER_TH, [src, "tmp3", "tmp2"], dst, {
                    "c": dict(c, STEP="scatter", TH=True), "u": u, "groups": blocks}))
            else:
                steps.append((SCATTER, [src, "tmp3"], dst, {"c": dict(c, STEP="scatter"),
                                                            "u": u, "groups": blocks}))
            src = dst
        if pay:
            c = dict(consts, STEP="extract", SR=rec, PAY=params["indices"], ITEMS=4, SUB=False)
            steps.append((EXTRACT, [src], "out", {"c": c, "u": {"n": total, "rowlen": rowlen},
                                                  "groups": groups_for(total, WG)}))
        return temps, steps


SORT = Sort()
