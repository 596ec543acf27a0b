"""How kernels address operands that are not plain contiguous arrays: numpy broadcasting,
element strides (0 on broadcast dimensions), dimension coalescing and the WGSL that turns a
flat output index into each operand's element offset."""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import ShapeError

MAX_DIMS = 16  # coalesced dimensions a strided kernel takes (its uniform holds 3 words each)


def broadcast_shapes(where: str, named: list[tuple[str, tuple[int, ...]]]) -> tuple[int, ...]:
    """numpy's broadcast shape of ``named`` (name, shape) pairs; a ShapeError naming the
    operands when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(*[s for _, s in named]))
    except ValueError:
        listed = " and ".join(f"{n} is {s}" for n, s in named)
        raise ShapeError(f"{where}: {listed}; they do not broadcast (numpy's rule: aligned "
                         f"from the last dimension, sizes must be equal or 1)") from None


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...],
                      strides: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Element strides reading an operand of ``shape`` (row-major, or ``strides``) at every
    index of ``out_shape``: right-aligned, 0 on dimensions it is broadcast along."""
    if strides is None:
        strides = contiguous_strides(shape)
    lead = len(out_shape) - len(shape)
    return (0,) * lead + tuple(0 if n == 1 and o != 1 else s
                               for n, o, s in zip(shape, out_shape[lead:], strides))


@functools.lru_cache(maxsize=1024, typed=True)
def coalesce(out_shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]
             ) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Fewest dimensions that address the same elements: size-1 dimensions dropped, and a
    dimension merged into the next inner one wherever every operand steps through both as
    through one. Returns (sizes, strides per operand), outermost first; () for one element."""
    sizes: list[int] = []
    steps: list[list[int]] = [[] for _ in strides]
    for d in range(len(out_shape) - 1, -1, -1):
        n = out_shape[d]
        if n == 1:
            continue
        here = [s[d] for s in strides]
        if sizes and all(h == st[-1] * sizes[-1] for h, st in zip(here, steps)):
            sizes[-1] *= n
            continue
        sizes.append(n)
        for st, h in zip(steps, here):
            st.append(h)
    if not sizes:
        return (), tuple(() for _ in strides)
    return tuple(reversed(sizes)), tuple(tuple(reversed(st)) for st in steps)


def uniform_fields(ndim: int, operands: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The u32 uniform fields ``index_wgsl`` reads: sizes sh0.., then per operand its element
    offset o<name> and strides s<name>0.."""
    fields = [(f"sh{d}", "u32") for d in range(ndim)]
    for name in operands:
        fields.append((f"o{name}", "u32"))
        fields += [(f"s{name}{d}", "u32") for d in range(ndim)]
    return tuple(fields)


def uniform_values(sizes: tuple[int, ...], operands: dict[str, tuple[tuple[int, ...], int]]
                   ) -> dict:
    """Values for ``uniform_fields``: ``operands`` maps name -> (strides, element offset)."""
    u = {f"sh{d}": n for d, n in enumerate(sizes)}
    for name, (st, off) in operands.items():
        u[f"o{name}"] = off
        # a negative stride travels as its u32 two's complement: the shader's wrapping
        # u32 arithmetic then lands on the same element
        u.update({f"s{name}{d}": s & 0xFFFFFFFF for d, s in enumerate(st)})
    return u


def index_wgsl(ndim: int, operands: tuple[str, ...], flat: str = "g") -> str:
    """WGSL statements that set ``let i_<name>: u32`` (element index into operand <name>)
    for the flat row-major output index ``flat``, from ``uniform_fields``' values in p."""
    lines = []
    acc = {name: [f"p.o{name}"] for name in operands}
    if ndim:
        lines.append(f"var r = {flat};")
    for d in range(ndim - 1, -1, -1):
        if d == 0:
            coord = "r"
        else:
            lines.append(f"let c{d} = r % p.sh{d};")
            lines.append(f"r = r / p.sh{d};")
            coord = f"c{d}"
        for name in operands:
            acc[name].append(f"{coord} * p.s{name}{d}")
    for name in operands:
        lines.append(f"let i_{name} = {' + '.join(acc[name])};")
    return "\n".join(lines)


def check_u32_index(where: str, shape: tuple[int, ...]) -> None:
    """Strided kernels index elements in u32: refuse more than 2**32 - 1 of them."""
    if math.prod(shape) >= 2**32:
        raise ShapeError(f"{where}: {shape} holds {math.prod(shape)} elements; strided and "
                         f"broadcast kernels address at most 2**32 - 1")


STEPPED_DIMS = 4  # coalesced dimensions up to which a kernel decodes once per invocation


def step_fields(ndim: int) -> tuple[tuple[str, str], ...]:
    """The u32 uniform fields ``stepped_index_wgsl`` adds: the step between an invocation's
    items in digits of the coalesced sizes, k0.. (outermost first)."""
    return tuple((f"k{d}", "u32") for d in range(ndim))


def step_values(sizes: tuple[int, ...], step: int) -> dict:
    """Values for ``step_fields``: ``step`` elements written in the mixed radix of ``sizes``
    (the outermost digit unbounded)."""
    u = {}
    for d in range(len(sizes) - 1, 0, -1):
        step, u[f"k{d}"] = divmod(step, sizes[d])
    if sizes:
        u["k0"] = step & 0xFFFFFFFF
    return u


def stepped_index_wgsl(ndim: int, operands: tuple[str, ...], first: str
                       ) -> tuple[list[str], list[str], list[str]]:
    """``index_wgsl`` for an invocation whose items lie a fixed step apart (the uniform's
    k0.., ``step_values``): (head: decode the flat output index ``first`` of its first item
    into coordinates c0.. once, with ndim - 1 divisions; item: set ``let i_<name>`` from
    them; advance: add the step's digits, carrying with a compare, no division). Each digit
    is below its size, so one subtraction carries."""
    head, advance = [], []
    if ndim:
        head.append(f"var q = {first};")
    for d in range(ndim - 1, 0, -1):
        head += [f"var c{d} = q % p.sh{d};", f"q = q / p.sh{d};"]
        carry = f" + select(0u, 1u, y{d + 1})" if d < ndim - 1 else ""
        advance += [f"c{d} = c{d} + p.k{d}{carry};",
                    f"let y{d} = c{d} >= p.sh{d};",
                    f"c{d} = select(c{d}, c{d} - p.sh{d}, y{d});"]
    if ndim:
        head.append("var c0 = q;")
        carry = " + select(0u, 1u, y1)" if ndim > 1 else ""
        advance.append(f"c0 = c0 + p.k0{carry};")
    item = [f"let i_{n} = " + " + ".join([f"p.o{n}"] + [f"c{d} * p.s{n}{d}"
                                                       for d in range(ndim)]) + ";"
            for n in operands]
    return head, item, advance


def lane_index_wgsl(ndim: int, operands: tuple[str, ...]) -> tuple[list[str], list[str],
                                                                    list[str]]:
    """For the consecutive elements of one packed item, after ``stepped_index_wgsl``'s item
    coordinates c0..: (start: copy them to lane coordinates l0..; lane: set ``let i_<name>``
    from those; next: step them by one element, a wrap carrying outwards)."""
    start = [f"var l{d} = c{d};" for d in range(ndim)]
    lane = [f"let i_{n} = " + " + ".join([f"p.o{n}"] + [f"l{d} * p.s{n}{d}"
                                                       for d in range(ndim)]) + ";"
            for n in operands]
    nxt: list[str] = []
    for d in range(ndim - 1, -1, -1):
        pad = "    " * (ndim - 1 - d)
        nxt.append(f"{pad}l{d} = l{d} + 1u;")
        if d:
            nxt += [f"{pad}if (l{d} >= p.sh{d}) {{", f"{pad}    l{d} = 0u;"]
    nxt += ["    " * k + "}" for k in range(ndim - 2, -1, -1)]
    return start, lane, nxt
