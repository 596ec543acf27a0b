"""unique's programs on a sorted array: the flags of where its groups of equal values start
(a nan is never equal: each is a group), their exclusive scan (its last word the number of
groups), and the compactions that make the values, first indices, counts and inverse."""

from __future__ import annotations

from ...errors import DtypeError, ShapeError
from ..core.base import BuiltinKernel, Param
from .programs import FLAG, WG, Step, groups_for, kind, scan_steps, scan_temps, words
from .sort import ORDERED

_FIELDS = (("n", "u32"), ("m", "u32"))
COMPACT = Step("unique_step_compact", "sort/unique.wgsl", ("src", "flags", "pos"), _FIELDS)
COUNTS = Step("unique_step_counts", "sort/unique.wgsl", ("starts",), _FIELDS)
INVERSE = Step("unique_step_inverse", "sort/unique.wgsl", ("src", "flags", "pos"), _FIELDS)


def _one_d(name: str, **named) -> None:
    for arg, b in named.items():
        if b.ndim != 1:
            raise ShapeError(f"{name}: {arg} is {b.shape}; expected a 1-D array")


class GroupStarts(BuiltinKernel):
    """flags (u32, n + 1): 1 where the sorted 1-D x's element i starts a group of equal
    values (-0.0 equals +0.0; nan equals nothing), 0 elsewhere and at n."""

    name = "group_starts"
    inputs = ("x",)
    dtypes = ("u32",)
    description = "1 where a sorted array's group of equal values starts (u32, n + 1 words)"
    not_in_place = "it writes a result of its own"

    def output_spec(self, inputs, params):
        return (inputs[0].size + 1,), "u32"

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        _one_d(self.name, x=x)
        if x.dtype not in ORDERED:
            raise DtypeError(f"{self.name}: x is {x.dtype}; expected one of "
                             f"{', '.join(ORDERED)}")
        if output.shape != (x.size + 1,):
            raise ShapeError(f"{self.name}: out is {output.shape}; expected ({x.size + 1},)")

    def passes(self, inputs, output, params):
        (x,) = inputs
        c = {"STEP": "flag", "KIND": kind(x.dtype), "W": words(x.dtype)}
        return [], [(FLAG, ["in0"], "out", {"c": c, "u": {"n": x.size, "rowlen": x.size},
                                            "groups": groups_for(x.size + 1, WG)})]


class ExclusiveScan(BuiltinKernel):
    """The exclusive prefix sum of 1-D u32 words (integers wrap around)."""

    name = "exclusive_scan_u32"
    inputs = ("a",)
    dtypes = ("u32",)
    description = "exclusive prefix sum of u32 words"
    not_in_place = "each output word sums many input words"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        _one_d(self.name, a=a)
        if a.dtype != "u32" or output.shape != a.shape:
            raise ShapeError(f"{self.name}: a is {a.shape} {a.dtype}, out {output.shape}; "
                             f"expected u32 words and an out of a's shape")

    def passes(self, inputs, output, params):
        (a,) = inputs
        if not a.size:
            return [], []
        return scan_temps(a.size), scan_steps("in0", "out", a.size, "tmp0", "tmp1")


class Compact(BuiltinKernel):
    """out[pos[i]] = src[i] where flags[i] is 1 (``iota``: i itself, an int32 position):
    ``out`` (given) holds one element per group."""

    name = "unique_compact"
    inputs = ("src", "flags", "pos")
    dtypes = ORDERED

    def __init__(self, iota: bool):
        self.iota = iota
        self.name = "unique_starts" if iota else "unique_compact"
        self.description = ("the positions where flags are 1, in order" if iota else
                            "the elements where flags are 1, in order")
        self.not_in_place = "it writes a result of its own"

    def check(self, inputs, output, params) -> None:
        src, flags, pos = inputs
        _one_d(self.name, src=src, flags=flags, pos=pos, out=output)
        n = src.size
        if flags.size < n or pos.size < n or output.size > n:
            raise ShapeError(f"{self.name}: src {src.shape}, flags {flags.shape}, pos "
                             f"{pos.shape}, out {output.shape}; expected flags and pos of at "
                             f"least src's size and out of at most it")
        want = "s32" if self.iota else src.dtype
        if output.dtype != want or src.dtype not in ORDERED:
            raise DtypeError(f"{self.name}: src is {src.dtype} and out {output.dtype}; "
                             f"expected out {want}")

    def passes(self, inputs, output, params):
        src = inputs[0]
        c = {"STEP": "compact", "W": words(src.dtype), "IOTA": self.iota, "WG": WG}
        return [], [(COMPACT, ["in0", "in1", "in2"], "out", {
            "c": c, "u": {"n": src.size, "m": output.size},
            "groups": groups_for(src.size, WG)})]


class Counts(BuiltinKernel):
    """out[g] = the size of group g, from the groups' start positions and n."""

    name = "unique_counts"
    inputs = ("starts",)
    dtypes = ("s32",)
    params = (Param("n", "u32", doc="the number of sorted elements"),)
    description = "group sizes from their start positions"
    not_in_place = "each count reads the next group's start"

    def check(self, inputs, output, params) -> None:
        (starts,) = inputs
        _one_d(self.name, starts=starts)
        if starts.dtype != "s32" or output.shape != starts.shape:
            raise ShapeError(f"{self.name}: starts {starts.shape} {starts.dtype}, out "
                             f"{output.shape}")

    def passes(self, inputs, output, params):
        (starts,) = inputs
        return [], [(COUNTS, ["in0"], "out", {
            "c": {"STEP": "counts", "WG": WG}, "u": {"n": params["n"], "m": starts.size},
            "groups": groups_for(starts.size, WG)})]


class Inverse(BuiltinKernel):
    """out[index[i]] = the group of the element sorted to position i (index: the sort's
    permutation)."""

    name = "unique_inverse"
    inputs = ("index", "flags", "pos")
    dtypes = ("s32",)
    description = "each element's group, from the sort's permutation and the groups' flags"
    not_in_place = "elements are written where the permutation says"

    def check(self, inputs, output, params) -> None:
        index, flags, pos = inputs
        _one_d(self.name, index=index, flags=flags, pos=pos)
        if index.dtype != "s32" or output.size != index.size or flags.size < index.size \
                or pos.size < index.size:
            raise ShapeError(f"{self.name}: index {index.shape} {index.dtype}, flags "
                             f"{flags.shape}, pos {pos.shape}, out {output.shape}")

    def passes(self, inputs, output, params):
        (index, _, _) = inputs
        return [], [(INVERSE, ["in0", "in1", "in2"], "out", {
            "c": {"STEP": "inverse", "WG": WG}, "u": {"n": index.size},
            "groups": groups_for(index.size, WG)})]


GROUP_STARTS = GroupStarts()
EXCLUSIVE_SCAN = ExclusiveScan()
COMPACT_VALUES = Compact(False)
COMPACT_STARTS = Compact(True)
COUNTS_OP = Counts()
INVERSE_OP = Inverse()
