"""Loads the .wgsl templates each kernel family keeps beside its code (shipped in the wheel)
and renders them with ``template.render`` (``${expr}`` placeholders, ``#if``/``#for`` lines),
which fails loudly on a missing name; creates shader modules on a device, with or without
naga's runtime checks."""

from __future__ import annotations

import functools
import os
from importlib import resources

from ...errors import KernelNotFoundError
from . import template

_KERNELS = "wgcompute.kernels"


@functools.cache
def load(path: str) -> str:
    """The text of a .wgsl template, named by its family folder under wgcompute/kernels and
    its file name: ``load("reduce/reduce.wgsl")``."""
    family, _, filename = path.rpartition("/")
    try:
        if not family or not filename:
            raise FileNotFoundError(path)
        return (resources.files(_KERNELS).joinpath(*family.split("/"), filename)
                .read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        raise KernelNotFoundError(f"shader file {path!r} is not in {_KERNELS} (give a family "
                                  f"folder and a file name, e.g. 'reduce/reduce.wgsl')") \
            from None


def render(source: str, substitutions: dict, name: str = "<template>") -> str:
    """Fill a template's ``${expr}`` placeholders and expand its ``#if``/``#for`` lines
    (``template.render``); a placeholder without a value raises ``template.TemplateError``."""
    return template.render(source, substitutions, name=name)


def enable_directives(wgsl_types) -> str:
    """The `enable` lines a shader using these WGSL scalar types needs."""
    return "enable f16;" if "f16" in set(wgsl_types) else ""


def checks_forced() -> bool:
    """``WGCOMPUTE_SHADER_CHECKS=1`` keeps naga's runtime checks in every kernel (to debug a
    kernel suspected of indexing out of range, or to measure what the checks cost)."""
    return os.environ.get("WGCOMPUTE_SHADER_CHECKS", "").strip() not in ("", "0")


def create_module(device, label: str, code: str, checked: bool):
    """A compute shader module from WGSL on ``device`` (a wgc.Device). ``checked=False``
    compiles it without naga's runtime checks: no index clamping of workgroup and local
    arrays, no bounding counter in every loop. Only for shaders that never index out of range
    and whose loops all end; the built-in kernels are written and tested that way. Raises
    wgpu's error on invalid WGSL."""
    return device.link.shader_module(label, code, checked or checks_forced())
