"""The interpreter's Einsum (an equation's diagonals taken and lone indices summed per operand,
then operands contracted pairwise as batched matrix products) and Det: linear algebra on the
array namespace's functions."""

from __future__ import annotations

import math
import re

from .. import array_api as xp
from ..buffer import Buffer
from .eager import eager

_TERM = re.compile(r"^(?:[A-Za-z]|\.\.\.)*$")


def _letters(term: str, rank: int, ell: list[str], where: str) -> list[str]:
    """A term's index letters, its ellipsis expanded to the last dims of ``ell``."""
    if "..." not in term:
        if len(term) != rank:
            raise ValueError(f"{where} has {len(term)} indices for a rank-{rank} operand")
        return list(term)
    head, tail = term.split("...")
    n = rank - len(head) - len(tail)
    if n < 0:
        raise ValueError(f"{where} has more indices than its operand's rank {rank}")
    return list(head) + (ell[len(ell) - n:] if n else []) + list(tail)


def parse(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """(each operand's index letters, the output's) of an einsum equation; an ellipsis
    becomes letters of its own (numbered, right-aligned as numpy broadcasts)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks) or not all(_TERM.match(t) for t in [*terms, rhs]):
        raise ValueError(f"equation {equation!r} does not fit {len(ranks)} operand(s)")
    width = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True)
                 if "..." in t), default=0)
    ell = [f"#{i}" for i in range(width)]
    ops = [_letters(t, r, ell, f"term {t!r}") for t, r in zip(terms, ranks, strict=True)]
    if arrow:
        out = _letters(rhs, len(rhs.replace("...", "")) + (width if "..." in rhs else 0),
                       ell, f"output {rhs!r}")
    else:  # numpy's implicit output: the ellipsis, then the letters seen once, sorted
        seen = [c for o in ops for c in o if not c.startswith("#")]
        out = ell + sorted(c for c in set(seen) if seen.count(c) == 1)
    if len(set(out)) != len(out) or any(c not in {x for o in ops for x in o} for c in out):
        raise ValueError(f"output of {equation!r} repeats an index or names one no operand has")
    return ops, out


def _diagonal(x: Buffer, letters: list[str]) -> tuple[Buffer, list[str]]:
    """x with each repeated index reduced to its diagonal."""
    while len(set(letters)) != len(letters):
        c = next(c for c in letters if letters.count(c) > 1)
        i, j = [k for k, d in enumerate(letters) if d == c][:2]
        n = x.shape[i]
        if x.shape[j] != n:
            raise ValueError(f"index {c!r} has sizes {n} and {x.shape[j]}")
        rest = [k for k in range(x.ndim) if k not in (i, j)]
        y = xp.reshape(xp.permute_dims(x, (*rest, i, j)), tuple(x.shape[k] for k in rest)
                       + (n * n,))
        x = xp.asarray(y[..., ::n + 1], copy=True)
        letters = [letters[k] for k in rest] + [c]
    return x, letters


def _sum_out(x: Buffer, letters: list[str], keep: set) -> tuple[Buffer, list[str]]:
    axes = tuple(k for k, c in enumerate(letters) if c not in keep)
    if not axes:
        return x, letters
    return xp.sum(x, axis=axes, dtype=x.dtype), [c for c in letters if c in keep]


def _contract(a, la, b, lb, keep: set):
    """a·b over the indices they share and ``keep`` does not name: a batched matmul."""
    for c in sorted(set(la) & set(lb)):
        na, nb = a.shape[la.index(c)], b.shape[lb.index(c)]
        if na != nb and c.startswith("#") and 1 in (na, nb):  # an ellipsis' size 1 broadcasts
            if na == 1:
                a = xp.broadcast_to(a, tuple(nb if d == c else n for d, n in zip(la, a.shape,
                                                                                  strict=True)))
            else:
                b = xp.broadcast_to(b, tuple(na if d == c else n for d, n in zip(lb, b.shape,
                                                                                  strict=True)))
        elif na != nb:
            raise ValueError(f"index {c!r} has sizes {na} and {nb} in two operands")
    sizes = dict(zip(la, a.shape, strict=True)) | dict(zip(lb, b.shape, strict=True))
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    fa = [c for c in la if c not in lb]
    fb = [c for c in lb if c not in la]

    def mat(x, lx, order, shape):
        return xp.reshape(xp.permute_dims(x, tuple(lx.index(c) for c in order)), shape)

    size = lambda cs: math.prod(sizes[c] for c in cs)  # noqa: E731
    am = mat(a, la, batch + fa + inner, (size(batch), size(fa), size(inner)))
    bm = mat(b, lb, batch + inner + fb, (size(batch), size(inner), size(fb)))
    r = xp.matmul(am, bm)
    letters = batch + fa + fb
    return xp.reshape(r, tuple(sizes[c] for c in letters)), letters


@eager("Einsum")
def _einsum(ctx, node, ins):
    xs = [ctx.buffer(v, f"input {i}") for i, v in enumerate(ins)]
    try:
        ops, out = parse(str(ctx.attr(node, "equation", "")), [x.ndim for x in xs])
        terms = []
        for i, (x, lx) in enumerate(zip(xs, ops, strict=True)):
            x, lx = _diagonal(x, lx)
            others = {c for j, o in enumerate(ops) if j != i for c in o}
            terms.append(_sum_out(x, lx, others | set(out)))
        x, lx = terms[0]
        for i, (y, ly) in enumerate(terms[1:], start=1):
            later = {c for o in ops[i + 1:] for c in o} | set(out)
            x, lx = _contract(x, lx, y, ly, later)
        x, lx = _sum_out(x, lx, set(out))
    except ValueError as e:
        raise ctx.fail(node, str(e)) from None
    if not out:
        return [xp.reshape(x, ())]
    return [xp.permute_dims(x, tuple(lx.index(c) for c in out)) if lx != out else x]


@eager("Det")
def _det(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x.dtype.name not in ("f32", "f64"):
        raise ctx.fail(node, f"X is {x.dtype} {x.shape}; Det takes float32 or float64 square "
                             f"matrices (..., M, M)")
    return [xp.linalg.det(x)]

