"""The registry of named kernels: built-ins, aliases, and the user's own WGSL kernels, whose
bindings, params, entry point and workgroup size are read from their shader."""

from __future__ import annotations

import pickle
import threading
from string import Template

from ...dtypes import DTYPES
from ...errors import ArgumentError, KernelNotFoundError
from ...runtime import Device, current_device, open_devices
from . import base, custom, shaders
from .base import Kernel
from .custom import CustomKernel, KernelRecipe

_kernels: dict[str, Kernel] = {}
_aliases: dict[str, str] = {"multiply": "elementwise_multiply", "add": "elementwise_add",
                            "sub": "elementwise_sub", "divide": "elementwise_divide"}
_lock = threading.Lock()


def _check_free(name: str, replace: bool) -> None:
    if not replace and (name in _kernels or name in _aliases):
        raise ArgumentError(f"name: a kernel named {name!r} already exists "
                            f"(pass replace=True to redefine it; registering the same shader "
                            f"with the same options again returns the existing kernel)")


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
                # a compile of the old kernel under way then keeps nothing (Kernel.compiled)
                compiling = dev.extras.get("compiling", {})
                for key in [k for k in compiling if k.kernel == kernel.name]:
                    del compiling[key]
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


base.lookup_kernel = get  # how a kernel that travelled by name is found again


def names() -> list[str]:
    return sorted(_kernels)


def kernel_from_recipe(recipe: KernelRecipe) -> Kernel:
    """The custom kernel ``recipe`` describes, registered in this process on first use (and
    again only when another kernel holds its name: the recipe's definition wins)."""
    k = _kernels.get(recipe.name)
    if isinstance(k, CustomKernel) and k._recipe == recipe:
        return k
    grid = None if recipe.grid is None else pickle.loads(recipe.grid)
    k = register_kernel(recipe.name, recipe.source, workgroup_size=recipe.workgroup_size,
                        dtypes=recipe.dtypes, entry_point=recipe.entry_point, grid=grid,
                        replace=True, checked=recipe.checked)
    k._recipe = recipe
    return k


custom.from_recipe = kernel_from_recipe  # how a custom kernel is rebuilt from its pickle


def _same_registration(old, given, grid) -> bool:
    """Whether ``old`` (a registered kernel) was registered with these arguments."""
    return isinstance(old, CustomKernel) and old.given == given and \
        _same_callable(old.grid, grid)


def _same_callable(a, b) -> bool:
    """Whether two grid callables are one: the same object, or functions of the same code,
    defaults and closure values (a notebook cell's lambda, defined again)."""
    if a is b:
        return True
    try:
        return (a.__code__ == b.__code__ and a.__defaults__ == b.__defaults__
                and [c.cell_contents for c in a.__closure__ or ()]
                == [c.cell_contents for c in b.__closure__ or ()])
    except (AttributeError, ValueError):
        return False


def register_kernel(name: str, source: str, *, bindings=None, params=None, workgroup_size=None,
                    dtypes=None, entry_point: str | None = None, grid=None,
                    replace: bool = False, checked: bool = True) -> Kernel:
    """Register your own WGSL kernel under ``name``, compile it now and return it.

    ``source`` is WGSL text or a path to a .wgsl file. Everything else is read from the
    shader: the inputs are its ``var<storage, read>`` buffers, the outputs its
    ``var<storage, read_write>`` ones (both in @binding order), the params the fields of its
    ``var<uniform>`` struct (scalars, vectors, matrices, arrays, structs: WGSL's layout), the
    entry point its @compute function (``entry_point=`` picks one of several) and the
    workgroup size its @workgroup_size; all in @group(0). A params field ``n: u32`` is set
    to the number of output elements, ``offset: u32`` to each dispatch's first element.
    The kernel is callable (``k(*inputs, out=None, **params)``); the same shader and options
    registered again return it, others are refused unless ``replace=True``.

    ``bindings`` ((name, access) pairs: reads, the read_write output, the uniform),
    ``params`` (field name to WGSL scalar type, or "T"), ``workgroup_size`` and ``dtypes``
    may still be given: each is checked against the shader, and a mismatch is an
    ArgumentError naming both. ``dtypes`` defaults to the output's element type (f32 for
    ``array<f32>``), or ("f32",) for a shader templated with ``${T}`` (the output's WGSL
    type; ``${WG}`` is ``workgroup_size``, default 256; ``${ENABLE}`` the ``enable f16;`` line).

    By default one invocation runs per output element, along x; past the adapter's 65,535
    workgroups per dimension the work is split into several dispatches when the params have
    ``offset``, folded into x and y when the entry point takes ``@builtin(num_workgroups)``
    (index with ``(wid.y * nwg.x + wid.x) * WG + lid``), and refused otherwise. Or pass
    ``grid(inputs, output, params) -> (x, y, z)`` workgroup counts.

    ``checked=False`` compiles the shader without naga's runtime checks (index clamping of
    workgroup and local arrays, a bounding counter in every loop), as the built-in kernels
    are: faster loops, but an index out of range then reads or writes whatever is there, and
    a loop that never ends hangs the GPU."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(f"name: expected an identifier-like string, got {name!r}")
    source = custom.read_source(source)
    if not isinstance(replace, bool):
        raise ArgumentError(f"replace: expected True or False, got {replace!r}")
    bindings, user_params, user_wg, user_dtypes = custom.check_args(
        bindings, params, workgroup_size, dtypes, entry_point, grid, checked)
    given = (source, bindings, user_params, user_wg, user_dtypes, entry_point, checked)
    if not replace and _same_registration(_kernels.get(name), given, grid):
        return _kernels[name]  # a notebook cell run twice
    device = current_device()
    templated = "${" in source
    uses_wg = templated and "WG" in Template(source).get_identifiers()
    if uses_wg and user_wg is not None and user_wg[1:] != (1, 1):
        raise ArgumentError(f"workgroup_size: the shader's ${{WG}} is one number; got "
                            f"{workgroup_size!r}")
    wg_fill = user_wg[0] if user_wg is not None else custom.DEFAULT_WG
    probe = custom.render_source(name, source, custom.T_PROBE, wg_fill, "") if templated \
        else source
    first = (user_dtypes or ("f32",))[0]

    def compile_source():
        t = DTYPES[first].wgsl
        real = custom.render_source(name, source, t, wg_fill, shaders.enable_directives([t])) \
            if templated else source
        return f"{name}[{first}]", real

    refl = custom.reflect_shader(name, probe, compile_source, checked)
    entry = refl.compute_entry(entry_point, what=f"{name}: the shader")
    parts = custom.storage_bindings(name, refl, bindings)
    reads, writes, uniforms = parts
    dts = custom.kernel_dtypes(name, writes[0], user_dtypes, templated)
    fields = custom.param_fields(name, uniforms, user_params, dts, refl.structs)
    size = entry.workgroup_size
    custom.check_workgroup(name, size, user_wg, workgroup_size, uses_wg, wg_fill, grid, device)
    follows = custom.input_follows(refl, reads, writes[0], grid)
    with _lock:
        _check_free(name, replace)  # before compiling: a taken name must not reach the cache
    k = custom.make_kernel(name, source, parts, fields, size, wg_fill, dts, grid, checked,
                           entry, follows)
    k.given_workgroup_size = user_wg
    k.given = given
    # Compiled outside the cache, so a shader that fails (or a name taken meanwhile) leaves
    # the cache as it was; compile errors surface now.
    compiled = k._compile(k.base_key(dts[0]), device)
    return add(k, replace=replace, compiled=compiled, device=device)
