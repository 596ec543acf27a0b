"""Loads .wgsl sources shipped in the wheel and renders their ${NAME} templates with
string.Template.substitute, which fails loudly on a missing key; creates shader modules on a
device, with or without naga's runtime checks."""

from __future__ import annotations

import functools
import os
from importlib import resources
from string import Template

from .errors import KernelNotFoundError


@functools.cache
def load(filename: str) -> str:
    """The text of a shader file from the package's shaders/ folder."""
    try:
        return (resources.files("wgcompute._wgsl") / filename).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KernelNotFoundError(f"shader file {filename!r} is not in wgcompute._wgsl") \
            from None


def render(source: str, substitutions: dict) -> str:
    """Fill ${NAME} placeholders; a placeholder without a value raises KeyError."""
    return Template(source).substitute(substitutions)


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
