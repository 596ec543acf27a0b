"""The interpreter's losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (its log
probabilities, then the same gather of each sample's target class, weights and reduction)."""

from __future__ import annotations

import math

from .. import array_api as xp
from ..buffer import Buffer
from .eager import eager
from .eager_args import back, const, floats, work
from .eager_index import check_coords


def _log_softmax(x: Buffer) -> Buffer:
    """log(softmax(x)) over axis 1: x - max - log(sum(exp(x - max)))."""
    shifted = x - xp.max(x, axis=1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))


def _check_loss(node, opset):
    red = node.attrs.get("reduction", "mean")
    if red not in ("none", "sum", "mean"):
        return f"reduction is {red!r}; expected none, sum or mean"
    return None


def _nll(ctx, node, logp: Buffer, target, weight) -> Buffer:
    """The loss of log-probabilities ``logp`` (N, C, ...) at ``target`` (N, ...)."""
    t = ctx.buffer(target, "target")
    if t.dtype.kind not in "iu" or logp.ndim < 2 or \
            t.shape != (logp.shape[0],) + logp.shape[2:]:
        raise ctx.fail(node, f"target is {t.dtype} {t.shape}; expected integer classes of "
                             f"shape {(logp.shape[0],) + logp.shape[2:]} for input "
                             f"{logp.shape}")
    ignore = ctx.attr(node, "ignore_index")
    zero = const(ctx, 0, t.dtype)
    keep = None if ignore is None else xp.not_equal(t, const(ctx, int(ignore), t.dtype))
    safe = t if keep is None else xp.where(keep, t, zero)
    check_coords(ctx, node, xp.where(safe < zero, const(ctx, logp.shape[1], t.dtype), safe),
                 logp.shape[1])  # (a negative class is out of range too)
    loss = -xp.squeeze(xp.take_along_axis(logp, xp.expand_dims(safe, axis=1), axis=1),
                       axis=1)
    w = None
    if weight is not None:
        wt = ctx.buffer(weight, "weight")
        if wt.shape != (logp.shape[1],):
            raise ctx.fail(node, f"weight is {wt.shape}; expected one per class "
                                 f"({logp.shape[1]},)")
        w = xp.reshape(xp.take(work(wt), xp.reshape(safe, (safe.size,)), axis=0), safe.shape)
    if keep is not None:
        mask = xp.astype(keep, loss.dtype)
        w = mask if w is None else w * mask
    if w is not None:
        loss = loss * w
    red = ctx.attr(node, "reduction", "mean")
    if red == "none":
        return loss
    total = xp.sum(loss)
    if red == "sum":
        return total
    count = xp.sum(w) if w is not None else float(math.prod(loss.shape))
    return total / count


@eager("NegativeLogLikelihoodLoss", check=_check_loss)
def _nll_loss(ctx, node, ins):
    x = floats(ctx, node, ins[0], "input")
    weight = ins[2] if len(ins) > 2 else None
    return [back(_nll(ctx, node, work(x), ins[1], weight), x)]


@eager("SoftmaxCrossEntropyLoss", check=_check_loss)
def _softmax_cross_entropy(ctx, node, ins):
    x = floats(ctx, node, ins[0], "scores")
    if x.ndim < 2:
        raise ctx.fail(node, f"scores is {x.shape}; expected (N, C, ...)")
    logp = _log_softmax(work(x))
    weight = ins[2] if len(ins) > 2 else None
    loss = back(_nll(ctx, node, logp, ins[1], weight), x)
    return [loss, back(logp, x)] if len(node.outputs) > 1 and node.outputs[1] else [loss]
