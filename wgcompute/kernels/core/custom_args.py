"""The explicit arguments of register_kernel (bindings=, params=, workgroup_size=, dtypes=,
entry_point=, grid=, checked=) checked on their own, and its source read from text or a file."""

from __future__ import annotations

import os
import re

import numpy as np

from ...dtypes import dtype as resolve_dtype
from ...errors import ArgumentError

_ACCESS = ("read", "read_write", "uniform")
_PARAM_TYPES = ("f32", "i32", "u32", "f16", "f64", "i64", "T")
_BARE = re.compile(r"\s*(vec[234]|mat[234]x[234]|array)\s*$")  # a type generator without <...>


def check_args(bindings, params, workgroup_size, dtypes, entry_point, grid, checked):
    """The explicit arguments, on their own; normalized."""
    if bindings is not None:
        bindings = _check_bindings_arg(bindings, params)
    if params is not None:
        if not isinstance(params, dict):
            raise ArgumentError(f"params: expected a dict of field name to WGSL scalar type, "
                                f"got {type(params).__name__}")
        for pn, pt in params.items():
            if not isinstance(pt, str) or not pt.strip() or _BARE.match(pt):
                raise ArgumentError(f"params: field {pn!r} has type {pt!r}; expected a WGSL "
                                    f"type ({', '.join(_PARAM_TYPES)}, vec3<f32>, a struct's "
                                    f"name, ...)")
        params = list(params.items())
    if workgroup_size is not None:
        workgroup_size = _check_workgroup_size_arg(workgroup_size)
    if dtypes is not None:
        if isinstance(dtypes, str):
            dtypes = (dtypes,)
        if not isinstance(dtypes, (list, tuple)) or not dtypes:
            raise ArgumentError(f"dtypes: expected a non-empty list of dtype names, got "
                                f"{dtypes!r}")
        dtypes = tuple(resolve_dtype(d, "dtypes").name for d in dtypes)
    if entry_point is not None and not isinstance(entry_point, str):
        raise ArgumentError(f"entry_point: expected a function name, got {entry_point!r}")
    if not isinstance(checked, bool):
        raise ArgumentError(f"checked: expected True or False, got {checked!r}")
    if grid is not None and not callable(grid):
        raise ArgumentError("grid: expected a callable(inputs, output, params) -> (x, y, z)")
    return bindings, params, workgroup_size, dtypes


def _check_bindings_arg(bindings, params) -> list[tuple[str, str]]:
    """bindings= as (name, access) pairs: reads, one read_write, at most one uniform."""
    if isinstance(bindings, dict):
        bindings = list(bindings.items())
    try:
        bindings = [(str(n), str(a)) for n, a in bindings]
    except (TypeError, ValueError):
        raise ArgumentError("bindings: expected a list of (name, access) pairs") from None
    accesses = [a for _, a in bindings]
    bad = [a for a in accesses if a not in _ACCESS]
    if bad:
        raise ArgumentError(f"bindings: access {bad[0]!r} is not one of "
                            f"{', '.join(_ACCESS)}")
    if not accesses.count("read_write"):
        raise ArgumentError("bindings: at least one binding must be 'read_write' (the "
                            "output)")
    order = [_ACCESS.index(a) for a in accesses]
    if order != sorted(order) or accesses.count("uniform") > 1:
        raise ArgumentError("bindings: declare reads first, then the read_write outputs, "
                            "then at most one uniform")
    if params is not None and "uniform" not in accesses and params:
        raise ArgumentError("params: declared, but bindings has no 'uniform' entry")
    if "uniform" in accesses and not params and params is not None:
        raise ArgumentError("bindings: a 'uniform' binding needs params (its struct "
                            "fields)")
    return bindings


def _check_workgroup_size_arg(workgroup_size) -> tuple[int, int, int]:
    sizes = workgroup_size if isinstance(workgroup_size, (tuple, list)) else \
        (workgroup_size,)
    if not 1 <= len(sizes) <= 3 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
            for v in sizes):
        raise ArgumentError(f"workgroup_size: expected a positive int or 1 to 3 of them, "
                            f"got {workgroup_size!r}")
    return (tuple(int(v) for v in sizes) + (1, 1))[:3]


def read_source(source) -> str:
    """register_kernel's source: WGSL text, or the text of the .wgsl file it names."""
    if not isinstance(source, str):
        raise ArgumentError(f"source: expected WGSL text or a path, got {type(source).__name__}")
    if source.endswith(".wgsl") and "\n" not in source:
        if not os.path.exists(source):
            raise ArgumentError(f"source: file {source!r} does not exist")
        with open(source, encoding="utf-8") as f:
            source = f.read()
    return source
