"""Loads the .wgsl templates each kernel family keeps beside its code (shipped in the wheel)
and renders them with ``template.render`` (``${expr}`` placeholders, ``#if``/``#for`` lines,
``#include`` of another of these files, read by ``load``), which fails loudly on a missing
name; creates shader modules on a device, with or without naga's runtime checks."""

from __future__ import annotations

import os

from . import template
from .template import load  # noqa: F401 - the families load their .wgsl files from here


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
