"""unique_values, unique_counts, unique_inverse and unique_all on the GPU: the flattened x
sorted (stably), the starts of its groups of equal values flagged and scanned, the results
compacted; the number of unique values is the one thing read back (it is their shape)."""

from __future__ import annotations

from collections import namedtuple

from .._lazy import enqueue
from ..array import astype, read_element, reshape
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import DtypeError
from ..kernels.sort.search import GATHER_1D
from ..kernels.sort.sort import ORDERED, SORT
from ..kernels.sort.unique import (
    COMPACT_STARTS,
    COMPACT_VALUES,
    COUNTS_OP,
    EXCLUSIVE_SCAN,
    GROUP_STARTS,
    INVERSE_OP,
)
from ._helpers import array, new, refuse_dtype
from ._sorting import sortable

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values"]

UniqueAllResult = namedtuple("UniqueAllResult",
                             ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])

_INDEX = DTYPES["s32"]


class _Groups:
    """x flattened and sorted, with its groups of equal values found: ``m`` of them."""

    def __init__(self, where: str, x, permutation: bool):
        x = array(x, "x")
        if x.dtype.kind not in "fiubc":
            raise refuse_dtype(where, x.dtype, "a numeric or bool dtype")
        if x.dtype.kind == "c" and x.dtype.name not in ORDERED:
            raise DtypeError(f"{where}: {x.dtype} arrays are grouped by their ranks "
                             f"(_WideGroups): the sort kernels order keys of at most 64 bits")
        self.x = x
        self.n = x.size
        self.temps: list[Buffer] = []
        flat = reshape(x, (x.size,))
        wide = flat if x.dtype.kind == "c" else sortable(where, flat)
        if wide.dtype != x.dtype:
            self.temps.append(wide)
        self.index = None
        if permutation:
            self.index = self.keep(enqueue(SORT, [wide], None, {"indices": True}))
            self.sorted = self.keep(enqueue(GATHER_1D, [wide, self.index], None, {}))
        else:
            self.sorted = self.keep(enqueue(SORT, [wide], None, {}))
        self.flags = self.keep(enqueue(GROUP_STARTS, [self.sorted], None, {}))
        self.pos = self.keep(enqueue(EXCLUSIVE_SCAN, [self.flags], None, {}))
        self.m = int(read_element(self.pos, self.n))  # the one read: the result's shape

    def keep(self, b: Buffer) -> Buffer:
        self.temps.append(b)
        return b

    def new(self, shape, dt, label: str) -> Buffer:
        return new(shape, DTYPES[str(dt)], self.x.device, label)

    def values(self) -> Buffer:
        out = enqueue(COMPACT_VALUES, [self.sorted, self.flags, self.pos],
                         self.new((self.m,), self.sorted.dtype, "unique-values"), {})
        if out.dtype == self.x.dtype:
            return out
        try:
            return astype(out, self.x.dtype, casting="unsafe")  # the values came from x
        finally:
            out.free()

    def first_indices(self) -> Buffer:
        return enqueue(COMPACT_VALUES, [self.index, self.flags, self.pos],
                          self.new((self.m,), _INDEX, "unique-indices"), {})

    def counts(self) -> Buffer:
        starts = enqueue(COMPACT_STARTS, [self.sorted, self.flags, self.pos],
                            self.new((self.m,), _INDEX, "unique-starts"), {})
        try:
            return enqueue(COUNTS_OP, [starts], self.new((self.m,), _INDEX,
                                                            "unique-counts"), {"n": self.n})
        finally:
            starts.free()

    def inverse(self) -> Buffer:
        out = self.new((self.n,), _INDEX, "unique-inverse")
        enqueue(INVERSE_OP, [self.index, self.flags, self.pos], out, {})
        return reshape(out, self.x.shape)

    def free(self) -> None:
        for b in self.temps:
            b.free()


class _WideGroups(_Groups):
    """complex128's groups: its elements' keys (128 bits) are past the sort kernels', so x is
    ranked by two stable sorts of float64 keys (imaginary part, then real part: the order
    complex64's keys give), each element's rank (equal elements one, each nan its own) grouped
    as _Groups groups, and the values taken from x at their first occurrences."""

    def __init__(self, where: str, x: Buffer):
        self.flat = reshape(x, (x.size,))
        super().__init__(where, _ranks(self.flat), True)
        self.temps.append(self.x)
        self.x = x  # (the results' shapes and dtype are x's)

    def values(self) -> Buffer:
        from ._indexing import take

        first = self.first_indices()
        try:
            return take(self.flat, first)
        finally:
            first.free()


def _ranks(flat: Buffer) -> Buffer:
    """Each element's rank among the distinct values of complex ``flat`` (int32, from 1; a
    nan is distinct from everything): the sorted order's group starts, scanned, put back."""
    from ._complex import imag, real
    from ._creation import ones
    from ._cumulative import cumulative_sum
    from ._elementwise import binary
    from ._indexing import take
    from ._manipulation import concat
    from ._sorting import argsort

    by_imag = argsort(imag(flat), stable=True)
    perm = take(by_imag, argsort(take(real(flat), by_imag), stable=True))
    s = take(flat, perm)
    starts = concat([ones((min(flat.size, 1),), dtype=DTYPES["bool"], device=flat.device),
                     binary("not_equal", s[1:], s[:-1])])
    ids = cumulative_sum(astype(starts, _INDEX, casting="unsafe"))
    return take(ids, argsort(perm, stable=True))


def _unique(where: str, x, permutation: bool, make):
    x = array(x, "x")
    wide = x.dtype.kind == "c" and x.dtype.name not in ORDERED
    g = _WideGroups(where, x) if wide else _Groups(where, x, permutation)
    try:
        return make(g)
    finally:
        g.free()


def unique_values(x, /) -> Buffer:
    """The unique elements of ``x`` (flattened), sorted (complex numbers by real part, then
    imaginary part); -0.0 and +0.0 are one value (the first in x's order stands for both),
    every nan (complex: with a nan part) is a value of its own (nans last)."""
    return _unique("unique_values", x, False, lambda g: g.values())


def unique_counts(x, /) -> UniqueCountsResult:
    """(values, counts): unique_values and how often each occurs (int32)."""
    return _unique("unique_counts", x, False,
                   lambda g: UniqueCountsResult(g.values(), g.counts()))


def unique_inverse(x, /) -> UniqueInverseResult:
    """(values, inverse_indices): unique_values and, in x's shape, each element's position
    among them (int32)."""
    return _unique("unique_inverse", x, True,
                   lambda g: UniqueInverseResult(g.values(), g.inverse()))


def unique_all(x, /) -> UniqueAllResult:
    """(values, indices, inverse_indices, counts): unique_values, the flat index of each
    value's first occurrence in x, each element's position among the values (x's shape) and
    the values' counts, all int32."""
    return _unique("unique_all", x, True, lambda g: UniqueAllResult(
        g.values(), g.first_indices(), g.inverse(), g.counts()))
