"""Searching on the GPU: searchsorted (a binary search per value), the keys argmin reduces
(argmax of order-reversing keys, nan still first), the nonzero mask count_nonzero sums, and a
gather of a 1-D array by indices."""

from __future__ import annotations

from ...errors import DtypeError, ShapeError
from ..core.base import BuiltinKernel, Param
from .programs import GATHER, NONZERO, OKEY, SEARCH, WG, check_size, groups_for, kind, words
from .sort import ORDERED, SORTABLE


def _sortable(name: str, x, dtypes=SORTABLE) -> None:
    if x.dtype not in dtypes:
        raise DtypeError(f"{name}: x is {x.dtype}; expected one of {', '.join(dtypes)}")
    check_size(name, x.size)


def _elementwise(step, x, params_c, rowlen=1):
    return [], [(step, ["in0"], "out", {"c": params_c, "u": {"n": x.size, "rowlen": rowlen},
                                        "groups": groups_for(x.size, WG)})]


class SearchSorted(BuiltinKernel):
    """For each element of v, where it goes in the sorted 1-D x: the first position
    (side "left") or the one after its equals ("right"), as int32."""

    name = "searchsorted"
    inputs = ("x", "v")
    dtypes = ("s32",)
    params = (Param("side", "side", "left", '"left" or "right"'),)
    description = "binary search of v's elements in the sorted 1-D x (s32 positions)"
    not_in_place = "positions are not values"

    def output_spec(self, inputs, params):
        return inputs[1].shape, "s32"

    def check(self, inputs, output, params) -> None:
        x, v = inputs
        if x.dtype not in SORTABLE or v.dtype != x.dtype:
            raise DtypeError(f"searchsorted: x is {x.dtype} and v {v.dtype}; expected one "
                             f"dtype of {', '.join(SORTABLE)}")
        if x.ndim != 1:
            raise ShapeError(f"searchsorted: x is {x.shape}; expected a 1-D array")
        if output.shape != v.shape or output.dtype != "s32":
            raise ShapeError(f"searchsorted: out is {output.shape} {output.dtype}; expected "
                             f"{v.shape} s32")
        check_size("searchsorted", max(x.size, v.size))

    def passes(self, inputs, output, params):
        x, v = inputs
        c = {"STEP": "search", "KIND": kind(x.dtype), "W": words(x.dtype),
             "SIDE": params["side"]}
        return [], [(SEARCH, ["in0", "in1"], "out",
                     {"c": c, "u": {"n": x.size, "nv": v.size},
                      "groups": groups_for(v.size, WG)})]


class OrderKeys(BuiltinKernel):
    """Keys whose order is x's (``reverse``: the reverse order), nan the largest either
    way: u32 for 32-bit dtypes, s64 for 64-bit ones. argmin is the argmax of the reversed
    keys (its first nan, as numpy's)."""

    name = "order_keys"
    inputs = ("x",)
    dtypes = ("u32", "s64")
    params = (Param("reverse", "bool", False, "keys in the reverse order"),)
    description = "order-preserving (or reversing) integer keys of x's elements"
    not_in_place = "it writes a result of its own"

    def output_spec(self, inputs, params):
        (x,) = inputs
        return x.shape, "s64" if words(x.dtype) == 2 else "u32"

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        _sortable(self.name, x)
        if output.shape != x.shape or output.dtype != self.output_spec(inputs, params)[1]:
            raise ShapeError(f"{self.name}: out is {output.shape} {output.dtype}")

    def passes(self, inputs, output, params):
        (x,) = inputs
        return _elementwise(OKEY, x, {"STEP": "okey", "KIND": kind(x.dtype),
                                      "W": words(x.dtype), "DESC": params["reverse"]})


class NonzeroMask(BuiltinKernel):
    """1 (u32) where x's element is not zero (nan is not), 0 where it is (-0.0 too)."""

    name = "nonzero_mask"
    inputs = ("x",)
    dtypes = ("u32",)
    description = "1 where x is not zero, else 0 (u32)"
    not_in_place = "it writes a result of its own"

    def output_spec(self, inputs, params):
        return inputs[0].shape, "u32"

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        _sortable(self.name, x, ORDERED)
        if output.shape != x.shape:
            raise ShapeError(f"{self.name}: out is {output.shape}, x {x.shape}")

    def passes(self, inputs, output, params):
        (x,) = inputs
        return _elementwise(NONZERO, x, {"STEP": "nonzero", "KIND": kind(x.dtype),
                                         "W": words(x.dtype)})


class Gather(BuiltinKernel):
    """out[j] = x[index[j]] for a 1-D x; the caller has checked every index is in range."""

    name = "gather_1d"
    inputs = ("x", "index")
    dtypes = ORDERED
    description = "x[index] for a 1-D x and in-range int32 indices"
    not_in_place = "an element is read from another position than it is written to"

    def output_spec(self, inputs, params):
        x, index = inputs
        return index.shape, x.dtype

    def check(self, inputs, output, params) -> None:
        x, index = inputs
        _sortable(self.name, x, ORDERED)
        if x.ndim != 1 or index.dtype not in ("s32", "u32"):
            raise ShapeError(f"{self.name}: x is {x.shape} and index {index.dtype}; expected "
                             f"a 1-D x and int32 indices")
        if output.shape != index.shape or output.dtype != x.dtype:
            raise ShapeError(f"{self.name}: out is {output.shape} {output.dtype}")

    def passes(self, inputs, output, params):
        x, index = inputs
        c = {"STEP": "gather", "KIND": kind(x.dtype), "W": words(x.dtype)}
        return [], [(GATHER, ["in0", "in1"], "out", {
            "c": c, "u": {"n": x.size, "nv": index.size},
            "groups": groups_for(index.size, WG)})]


SEARCHSORTED = SearchSorted()
ORDER_KEYS = OrderKeys()
NONZERO_MASK = NonzeroMask()
GATHER_1D = Gather()
