"""Loads .wgsl sources shipped in the wheel and renders their ${NAME} templates with
string.Template.substitute, which fails loudly on a missing key."""

from __future__ import annotations

import functools
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
