"""The interpreter's sequence layers: RNN, GRU and LSTM (forward, reverse and bidirectional,
either layout, initial states, biases, peepholes, clip, GRU's linear_before_reset; the inputs'
projection one matrix product per direction, each time step a small one for the state), and
CausalConvWithState (a depthwise causal convolution carrying its last inputs)."""

from __future__ import annotations

from .. import array_api as xp
from ..buffer import Buffer
from .eager import eager
from .eager_args import back, floats, host_value, work
from .eager_nn import row

# the gates' count and the default activations (per direction) of each layer
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_ACTS = {"Sigmoid": lambda v: row("sigmoid", v), "Tanh": xp.tanh,
         "Relu": lambda v: xp.maximum(v, 0.0)}


def _check_rnn(node, opset):
    a = node.attrs
    for name in a.get("activations", []):
        if name not in _ACTS:
            return f"activation {name!r}; wgcompute runs {', '.join(_ACTS)}"
    if int(a.get("input_forget", 0)):
        return "LSTM's input_forget (coupled input and forget gates)"
    if a.get("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        return f"direction is {a.get('direction')!r}"
    return None


def _cols(m: Buffer, k: int, h: int) -> Buffer:
    """Block k (of h columns) of the last axis of m."""
    return xp.asarray(m[..., k * h:(k + 1) * h], copy=True)


def _opt(ins, i):
    return ins[i] if len(ins) > i and ins[i] is not None else None


def _clip(v: Buffer, clip) -> Buffer:
    return v if clip is None else xp.clip(v, -clip, clip)


def _step(op: str, xw: Buffer, h, c, r: Buffer, rb: Buffer, p, acts, clip, hs: int, lbr: bool):
    """One time step: the new (h, c) from the projected input xw (batch, G·H)."""
    f = acts[0]
    if op == "RNN":
        return f(_clip(xw + xp.matmul(h, r) + rb, clip)), None
    if op == "GRU":
        g = acts[1]
        hr = xp.matmul(h, r) + rb  # (batch, 3H): z, r, h blocks
        z = f(_clip(_cols(xw, 0, hs) + _cols(hr, 0, hs), clip))
        reset = f(_clip(_cols(xw, 1, hs) + _cols(hr, 1, hs), clip))
        if lbr:
            cand = g(_clip(_cols(xw, 2, hs) + reset * _cols(hr, 2, hs), clip))
        else:
            rh = xp.matmul(reset * h, _cols(r, 2, hs)) + _cols(rb, 2, hs)
            cand = g(_clip(_cols(xw, 2, hs) + rh, clip))
        return (1.0 - z) * cand + z * h, None
    g, out = acts[1], acts[2]
    gates = xw + xp.matmul(h, r) + rb  # (batch, 4H): i, o, f, c blocks
    i = _cols(gates, 0, hs) + (p[0] * c if p is not None else 0.0)
    fg = _cols(gates, 2, hs) + (p[2] * c if p is not None else 0.0)
    c = f(_clip(fg, clip)) * c + f(_clip(i, clip)) * g(_clip(_cols(gates, 3, hs), clip))
    o = f(_clip(_cols(gates, 1, hs) + (p[1] * c if p is not None else 0.0), clip))
    return o * out(c), c


def _state(ctx, v, d: int, layout: int) -> Buffer:
    """Direction d's initial state (batch, H) from (dirs, batch, H), or layout 1's
    (batch, dirs, H)."""
    s = work(ctx.buffer(v))
    return xp.asarray(s[:, d] if layout else s[d], copy=True)


def _direction(ctx, node, x, d: int, reverse: bool, hs: int, ins, acts):
    """(every step's h (seq, batch, H) in time order, last h, last c) of direction d."""
    op, gates = node.op, _GATES[node.op]
    w, r = (work(floats(ctx, node, ins[i], n))[d] for i, n in ((1, "W"), (2, "R")))
    b = _opt(ins, 3)
    b = work(ctx.buffer(b))[d] if b is not None else xp.zeros((2 * gates * hs,),
                                                               dtype=x.dtype, device=x.device)
    seq, batch = x.shape[:2]
    xw = xp.reshape(xp.matmul(xp.reshape(x, (seq * batch, x.shape[2])), xp.matrix_transpose(w))
                    + _cols(b, 0, gates * hs), (seq, batch, gates * hs))
    rt, rb = xp.matrix_transpose(r), _cols(b, 1, gates * hs)
    h0, c0, p = _opt(ins, 5), _opt(ins, 6), _opt(ins, 7)
    layout = int(ctx.attr(node, "layout", 0))
    zero = xp.zeros((batch, hs), dtype=x.dtype, device=x.device)
    h, c = (_state(ctx, v, d, layout) if v is not None else zero for v in (h0, c0))
    if p is not None:
        pd = work(ctx.buffer(p))[d]
        p = [_cols(pd, k, hs) for k in range(3)]
    clip = ctx.attr(node, "clip")
    lbr = bool(ctx.attr(node, "linear_before_reset", 0))
    steps = [None] * seq
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        h, c = _step(op, xp.asarray(xw[t], copy=True), h, c, rt, rb, p, acts, clip, hs, lbr)
        steps[t] = h
    return xp.stack(steps), h, c


@eager("RNN", "GRU", "LSTM", check=_check_rnn)
def _rnn(ctx, node, ins):
    x0 = floats(ctx, node, ins[0], "X")
    layout = int(ctx.attr(node, "layout", 0))
    x = work(x0)
    if layout:  # (batch, seq, input) -> (seq, batch, input)
        x = xp.permute_dims(x, (1, 0, 2))
    hs = int(ctx.attr(node, "hidden_size"))
    lens = _opt(ins, 4)
    if lens is not None and set(host_value(ctx, node, lens, "sequence_lens").tolist()) \
            != {x.shape[0]}:
        raise ctx.fail(node, "sequence_lens shorter than the sequence (wgcompute runs whole "
                             "sequences)")
    direction = ctx.attr(node, "direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    names = list(ctx.attr(node, "activations", _DEFAULT_ACTS[node.op] * dirs))
    per = len(_DEFAULT_ACTS[node.op])
    ys, hs_, cs = [], [], []
    for d in range(dirs):
        acts = [_ACTS[n] for n in names[d * per:(d + 1) * per]]
        y, h, c = _direction(ctx, node, x, d, direction == "reverse" or d == 1, hs, ins, acts)
        ys.append(y)
        hs_.append(h)
        cs.append(c)
    y = xp.stack(ys, axis=1)  # (seq, dirs, batch, H)
    y_h = xp.stack(hs_)
    outs = [y, y_h] + ([xp.stack(cs)] if node.op == "LSTM" else [])
    if layout:
        outs = [xp.permute_dims(outs[0], (2, 0, 1, 3))] + \
            [xp.permute_dims(v, (1, 0, 2)) for v in outs[1:]]
    return [back(v, x0) for v in outs]


@eager("CausalConvWithState")
def _causal_conv(ctx, node, ins):
    x0 = floats(ctx, node, ins[0], "input")
    w = work(floats(ctx, node, ins[1], "weight"))
    act = ctx.attr(node, "activation", "none")
    if x0.ndim != 3 or w.ndim != 3 or w.shape[:2] != (x0.shape[1], 1) or \
            act not in ("none", "silu", "swish"):
        raise ctx.fail(node, f"input {x0.shape}, weight {w.shape}, activation {act!r}: "
                             f"expected (B, C, L), (C, 1, k) and none, silu or swish")
    x = work(x0)
    b, c, n = x.shape
    k = w.shape[2]
    past = _opt(ins, 3)
    past = work(ctx.buffer(past)) if past is not None else \
        xp.zeros((b, c, k - 1), dtype=x.dtype, device=x.device)
    padded = xp.concat([past, x], axis=2)  # (B, C, k - 1 + L)
    y = None
    for t in range(k):
        tap = xp.asarray(padded[:, :, t:t + n], copy=True) * \
            xp.reshape(xp.asarray(w[:, 0, t], copy=True), (c, 1))
        y = tap if y is None else y + tap
    bias = _opt(ins, 2)
    if bias is not None:
        y = y + xp.reshape(work(ctx.buffer(bias)), (c, 1))
    if act != "none":
        y = y * row("sigmoid", y)
    state = xp.asarray(padded[:, :, n:], copy=True)  # the last k - 1 positions
    return [back(y, x0), back(state, x0)]

