"""WGSL expressions that read and write packed elements (1- and 2-byte integers and bool,
lanes of u32 words) through packed.wgsl's functions, for every kernel that handles them."""

from __future__ import annotations

from ...dtypes import DType


def _sign(dt: DType) -> str:
    return "s" if dt.kind == "i" else "u"


def lane(dt: DType, word: str, e: str) -> str:
    """Element ``e``'s lane of ``word`` as dt's work type (i32 sign-extended, or u32)."""
    return f"lane_{_sign(dt)}({word}, {e}, {dt.bits}u)"


def load(dt: DType, array: str, e: str) -> str:
    """Element ``e`` of the packed ``array`` (u32 words) as dt's work type."""
    return lane(dt, f"{array}[{e} / {dt.lanes}u]", e)


def put(dt: DType, value: str, e: str) -> str:
    """``value`` (dt's work type) placed in element ``e``'s lane of a u32 word (others 0)."""
    return f"put_{_sign(dt)}({value}, {e}, {dt.bits}u)"


def lane_x4(dt: DType, words: str, lane_index: str) -> str:
    """Lane ``lane_index`` of four words (vec4<u32>) as a vec4 of dt's work type."""
    return f"lane_{_sign(dt)}x4({words}, {lane_index}, {dt.bits}u)"


def put_x4(dt: DType, value: str, lane_index: str) -> str:
    return f"put_{_sign(dt)}x4({value}, {lane_index}, {dt.bits}u)"
