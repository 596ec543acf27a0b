"""The registry of named kernels: built-ins, aliases, and the user's own WGSL kernels."""

from __future__ import annotations

import math
import os
import threading

import numpy as np

from .. import shaders
from ..dtypes import DTYPES
from ..dtypes import dtype as resolve_dtype
from ..errors import ArgumentError, KernelNotFoundError
from ..runtime import Device, current_device, open_devices
from .base import REQUIRED, Kernel, Launch, Param, PipelineKey, fold_grid

_kernels: dict[str, Kernel] = {}
_aliases: dict[str, str] = {"multiply": "elementwise_multiply", "add": "elementwise_add",
                            "sub": "elementwise_sub", "divide": "elementwise_divide"}
_lock = threading.Lock()


def _check_free(name: str, replace: bool) -> None:
    if not replace and (name in _kernels or name in _aliases):
        raise ArgumentError(f"name: a kernel named {name!r} already exists "
                            f"(pass replace=True to redefine it)")


def add(kernel: Kernel, replace: bool = False, compiled=None,
        device: Device | None = None) -> Kernel:
    """Register ``kernel``. Replacing drops the old kernel's cached pipelines on every device
    (they are keyed by name, and would otherwise keep running the old shader); ``compiled``
    goes into ``device``'s cache."""
    with _lock:
        _check_free(kernel.name, replace)
        _aliases.pop(kernel.name, None)
        _kernels[kernel.name] = kernel
        for dev in open_devices():
            with dev.pipelines_lock:
                for key in [k for k in dev.pipelines if k.kernel == kernel.name]:
                    del dev.pipelines[key]
        if compiled is not None and device is not None:
            with device.pipelines_lock:
                device.pipelines[compiled.key] = compiled
    return kernel


def alias(name: str, target: str) -> None:
    _aliases[name] = target


def get(name) -> Kernel:
    if isinstance(name, Kernel):
        return name
    if not isinstance(name, str):
        raise ArgumentError(f"kernel: expected a kernel name (str), got {type(name).__name__}")
    k = _kernels.get(_aliases.get(name, name))
    if k is None:
        import difflib

        near = difflib.get_close_matches(name, list(_kernels) + list(_aliases), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise KernelNotFoundError(f"kernel: no kernel named {name!r}{hint} "
                                  f"(wgc.kernels() lists them)")
    return k


def names() -> list[str]:
    return sorted(_kernels)


_ACCESS = ("read", "read_write", "uniform")
_SCALARS = ("f32", "i32", "u32", "f16", "f64", "i64", "T")  # "T": the kernel's dtype, as ${T}


class CustomKernel(Kernel):
    """A user's WGSL kernel. Binding i is the i-th declared binding: reads first, then the
    one read_write output, then an optional uniform holding ``params`` in declared order."""

    def __init__(self, name, source, inputs, output, params, workgroup_size, dtypes, grid,
                 checked=True):
        self.name = name
        self.checked = checked
        self.source_text = source
        self.inputs = inputs
        self.output = output
        self.param_fields = params
        self.params = tuple(Param(n, t, 0 if n == "n" else REQUIRED) for n, t in params)
        self.workgroup_size = workgroup_size
        self.dtypes = dtypes
        self.grid = grid
        self.description = "user kernel"

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        src = self.source_text
        if "${" in src:
            try:
                src = shaders.render(src, {"T": t, "WG": self.workgroup_size,
                                           "ENABLE": shaders.enable_directives([t])})
            except (KeyError, ValueError) as e:
                raise ArgumentError(f"{self.name}: template placeholder {e} has no value; "
                                    f"available: T, WG, ENABLE") from None
        return src, tuple((n, t if pt == "T" else pt) for n, pt in self.param_fields)

    def launches(self, inputs, output, params, device):
        values = dict(params)
        if "n" in values:
            values["n"] = output.size
        if self.grid is not None:
            wg = self._check_grid(self.grid(inputs, output, params), device)
            return [Launch(wg, values)] if all(wg) else []
        groups = math.ceil(output.size / self.workgroup_size)
        return [Launch(fold_grid(groups, device, self.name), values)] if groups else []


    def _check_grid(self, wg, device) -> tuple[int, int, int]:
        """The user's grid() result: 1 to 3 whole, non-negative counts. (Past 65,535 per
        dimension the command fails with wgpu's validation message, as a failed command.)"""
        ok = isinstance(wg, (list, tuple)) and 1 <= len(wg) <= 3 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in wg)
        if not ok:
            raise ArgumentError(f"{self.name}: grid() must return 1 to 3 non-negative ints "
                                f"(workgroup counts), got {wg!r}")
        return (tuple(int(v) for v in wg) + (1, 1))[:3]


def register_kernel(name: str, source: str, *, bindings, params=None, workgroup_size: int = 256,
                    dtypes=("f32",), grid=None, replace: bool = False,
                    checked: bool = True) -> Kernel:
    """Register your own WGSL kernel under ``name`` and compile it now.

    ``source`` is WGSL text or a path to a .wgsl file; ``${T}`` (the output's WGSL type),
    ``${WG}`` and ``${ENABLE}`` are filled in if present. ``bindings`` lists
    ``(name, access)`` pairs in binding order with access "read", "read_write" (exactly one:
    the output) or "uniform" (last; its struct's fields are ``params``, a dict of name to
    WGSL scalar type, or "T" for the ${T} type, in declaration order; a field named "n" is
    set to the output's element
    count). By default one invocation runs per output element over a grid folded into
    x and y: index it as ``(wid.y * nwg.x + wid.x) * WG + lid``; or pass
    ``grid(inputs, output, params) -> (x, y, z)`` workgroup counts.

    ``checked=False`` compiles the shader without naga's runtime checks (index clamping of
    workgroup and local arrays, a bounding counter in every loop), as the built-in kernels
    are: faster loops, but an index out of range then reads or writes whatever is there, and
    a loop that never ends hangs the GPU."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(f"name: expected an identifier-like string, got {name!r}")
    if not isinstance(source, str):
        raise ArgumentError(f"source: expected WGSL text or a path, got {type(source).__name__}")
    if source.endswith(".wgsl") and "\n" not in source:
        if not os.path.exists(source):
            raise ArgumentError(f"source: file {source!r} does not exist")
        with open(source, encoding="utf-8") as f:
            source = f.read()
    if isinstance(bindings, dict):
        bindings = list(bindings.items())
    try:
        bindings = [(str(n), str(a)) for n, a in bindings]
    except (TypeError, ValueError):
        raise ArgumentError("bindings: expected a list of (name, access) pairs") from None
    accesses = [a for _, a in bindings]
    bad = [a for a in accesses if a not in _ACCESS]
    if bad:
        raise ArgumentError(f"bindings: access {bad[0]!r} is not one of {', '.join(_ACCESS)}")
    if accesses.count("read_write") != 1:
        raise ArgumentError("bindings: exactly one binding must be 'read_write' (the output)")
    order = [_ACCESS.index(a) for a in accesses]
    if order != sorted(order) or accesses.count("uniform") > 1:
        raise ArgumentError("bindings: declare reads first, then the read_write output, then "
                            "at most one uniform")
    if params is not None and not isinstance(params, dict):
        raise ArgumentError(f"params: expected a dict of field name to WGSL scalar type, got "
                            f"{type(params).__name__}")
    params = dict(params or {})
    for pn, pt in params.items():
        if pt not in _SCALARS:
            raise ArgumentError(f"params: field {pn!r} has type {pt!r}; expected one of "
                                f"{', '.join(_SCALARS)}")
    if params and "uniform" not in accesses:
        raise ArgumentError("params: declared, but bindings has no 'uniform' entry")
    if "uniform" in accesses and not params:
        raise ArgumentError("bindings: a 'uniform' binding needs params (its struct fields)")
    if not isinstance(workgroup_size, int) or workgroup_size < 1:
        raise ArgumentError(f"workgroup_size: expected a positive int, got {workgroup_size!r}")
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    if not isinstance(dtypes, (list, tuple)) or not dtypes:
        raise ArgumentError(f"dtypes: expected a non-empty list of dtype names, got {dtypes!r}")
    dts = tuple(resolve_dtype(d, "dtypes").name for d in dtypes)
    if not isinstance(checked, bool):
        raise ArgumentError(f"checked: expected True or False, got {checked!r}")
    if grid is not None and not callable(grid):
        raise ArgumentError("grid: expected a callable(inputs, output, params) -> (x, y, z)")
    with _lock:
        _check_free(name, replace)  # before compiling: a taken name must not reach the cache
    k = CustomKernel(name, source, tuple(n for n, a in bindings if a == "read"),
                     next(n for n, a in bindings if a == "read_write"),
                     tuple(params.items()), workgroup_size, dts, grid, checked)
    # Compiled outside the cache, so a shader that fails (or a name taken meanwhile) leaves
    # the cache as it was; compile errors surface now.
    device = current_device()
    compiled = k._compile(PipelineKey(name, (dts[0],), ()), device)
    return add(k, replace=replace, compiled=compiled, device=device)
