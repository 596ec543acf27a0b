"""Fused scaled-dot-product attention (attention.wgsl), flash-attention style: a workgroup per
block of query rows of one head streams the keys and values through workgroup memory in
tiles, keeping an online softmax (running row max and sum) and the output rows in registers,
so the (Sq × Skv) score matrix never reaches memory. Grouped-query attention, an additive
bias (any broadcast through 0 strides, -inf masking) and strided views of every operand
(packed QKV buffers, (B, S, H, D) layouts) read and written in place, without copies."""

from __future__ import annotations

import math
import operator

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..matmul.configs import BUSY

MAX_HEAD = 128  # D and Dv: at most two vec4 columns of out per invocation
# (BQ query rows, BKV keys, TX invocations per row) per workgroup, best first: the first whose
# workgroup memory fits the device is used (NVIDIA's Vulkan, 48 KiB: 64×32 for D <= 64, 32×16
# for D = 128; lavapipe's 32 KiB: 32×32 for D = 64, 16×16 for D = 128). On an H200, ViT-B/16's
# heads (32·12 of S 197, D 64) took 290 us at 64×32 with TX 16, 358 with TX 8, 329 at 32×32,
# 373 at 64×16 (before _plan's smaller blocks: 267 us).
TILES = ((64, 32, 16), (32, 32, 16), (32, 16, 16), (16, 16, 16))
# The S and P·V loops written out (constant workgroup-memory offsets): 3% faster on an H200
# (290 us against 300 for ViT-B/16), twice the compile time on lavapipe. None: on GPUs only.
UNROLL = None
# Workgroups a launch should have (the matmul's BUSY: two per SM of a large GPU), and the
# fewest query rows a block is made of to reach them: at batch 1 ViT-B/16's 12 heads launched
# 48 workgroups of 52 rows and BERT-base's 24 of 64
FILL = BUSY
MIN_BQ = 16
EMPTY = ("nan", "zero", "masked")
VIEWS = ("q", "k", "v", "out", "bias")


def _strides_param(name: str, doc: str) -> Param:
    return Param(f"{name}_strides", "strides", None, doc)


def _offset_param(name: str) -> Param:
    return Param(f"{name}_offset", "offset", 0, f"element offset of {name}'s view")


def _index(value) -> int | None:
    """An integer param's value (numpy's integers too), None for anything else."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _empty_check(value):
    return None if value in EMPTY else f"must be one of {', '.join(EMPTY)}, got {value!r}"


def _workgroup_bytes(bq: int, bkv: int, tx: int, D: int, Dv: int) -> int:
    d4 = -(-D // 4)
    nc = -(-Dv // (4 * tx))
    return 16 * (bq * d4 + bkv * (d4 | 1) + bkv * tx * nc + bkv * bq // 4 + tx * bq // 4)


def _tiles(device, D: int, Dv: int) -> tuple[int, int, int] | None:
    """(BQ, BKV, TX) for these head sizes on ``device``: the first of TILES that fits its
    workgroup memory and invocation limit; None if none does."""
    room = device.limit("max-compute-workgroup-storage-size")
    threads = device.limit("max-compute-invocations-per-workgroup")
    for bq, bkv, tx in TILES:
        if _workgroup_bytes(bq, bkv, tx, D, Dv) <= room and bq // 4 * tx <= threads:
            return bq, bkv, tx
    return None


def _plan(device, Sq: int, D: int, Dv: int, heads: int = 0) -> tuple[int, int, int] | None:
    """The tile for Sq query rows of ``heads`` (B·H) heads: _tiles' BQ made as small as the
    same number of query blocks allows (Sq 197: 4 blocks of 52 rows, not 64; 267 us instead
    of 292 on an H200), then, where heads × blocks launch fewer than FILL workgroups (one
    image or sentence), smaller still, down to MIN_BQ rows, until they launch FILL."""
    tiles = _tiles(device, D, Dv)
    if tiles is None:
        return None
    bq, bkv, tx = tiles
    blocks = max(-(-Sq // bq), 1)
    if heads * blocks < FILL:  # more blocks of fewer rows (each reads all of its head's K, V)
        blocks = min(-(-FILL // max(heads, 1)), max(-(-Sq // MIN_BQ), 1))
    return max(min(bq, 4 * -(-Sq // (4 * blocks))), 4), bkv, tx


def attention_fits(device, D: int, Dv: int) -> bool:
    """Whether the attention kernel runs heads of D (query/key) and Dv (value) elements on
    ``device`` (a wgc.Device)."""
    return 1 <= D <= MAX_HEAD and 1 <= Dv <= MAX_HEAD and _tiles(device, D, Dv) is not None


def _view_param(name: str, view, n: int) -> tuple:
    """A (strides, offset) pair of attention_params, checked for its form."""
    if view is None:
        return None, 0
    if not (isinstance(view, (tuple, list)) and len(view) == 2):
        raise ArgumentError(f"attention_params: {name} must be None or a (strides, offset) "
                            f"pair, got {view!r}")
    strides, offset = view
    ints = tuple(_index(s) for s in strides) if isinstance(strides, (tuple, list)) else ()
    if len(ints) != n or None in ints or _index(offset) is None:
        raise ArgumentError(f"attention_params: {name} must be ({n} integer strides, an "
                            f"integer offset), got {view!r}")
    return ints, _index(offset)


def attention_params(B, H, Sq, Skv, D, Dv, scale, *, group=1, has_bias=False, empty="nan",
                     q=None, k=None, v=None, bias=None, out=None) -> dict:
    """The params of ``enqueue(ATTENTION, [q, k, v, bias or q], out, params)``: q, k, v, out
    are None (contiguous (B, H, S, D) / (B, H/group, S, D)) or ((sb, sh, ss), offset) in
    elements, the last axis contiguous; bias None (contiguous (B, H, Sq, Skv)) or
    ((sb, sh, si, sj), offset), 0 strides broadcasting."""
    params = {"B": B, "H": H, "Sq": Sq, "Skv": Skv, "D": D, "Dv": Dv, "scale": float(scale),
              "group": group, "has_bias": has_bias, "empty": empty}
    for name, view, n in (("q", q, 3), ("k", k, 3), ("v", v, 3), ("out", out, 3),
                          ("bias", bias, 4)):
        params[f"{name}_strides"], params[f"{name}_offset"] = _view_param(name, view, n)
    return params


def viewable_heads(inputs, params) -> tuple[int, ...]:
    """The operands (0 q, 1 k, 2 v) a view may replace: those read as given (contiguous, from
    offset 0)."""
    if len(inputs) != 4 or not params:
        return ()
    return tuple(i for i, nm in enumerate(("q", "k", "v"))
                 if params.get(f"{nm}_strides") is None and not params.get(f"{nm}_offset")) \
        + (() if params.get("has_bias") else (3,))  # (the unread placeholder: never copied)


def attention_views(inputs, params, swap) -> tuple | None:
    """(inputs, params) reading q, k or v through views of other buffers instead (``swap``:
    operand number -> (source, (shape, strides, offset)), the view a held copy's result is of
    its source: attention's heads split from a packed projection), each view of the operand's
    own (B·H, S, D) or (B, H, S, D) shape with a contiguous last axis; None if one is not."""
    new, p = list(inputs), dict(params)
    for i, (src, (shape, strides, offset)) in swap.items():
        if i == 3:  # bias's placeholder, not read: any buffer will do
            new[3] = src
            continue
        nm = ("q", "k", "v")[i]
        if (len(shape) not in (3, 4) or tuple(shape) != tuple(inputs[i].shape)
                or (strides[-1] != 1 and shape[-1] > 1)):
            return None
        new[i] = src
        p[f"{nm}_strides"] = (0, *strides[:2]) if len(shape) == 3 else tuple(strides[:3])
        p[f"{nm}_offset"] = offset
    return new, p


class Attention(BuiltinKernel):
    """out (B, H, Sq, Dv) = softmax(scale · q kᵀ + bias) v per head, q (B, H, Sq, D), k
    (B, H/group, Skv, D), v (B, H/group, Skv, Dv), bias (B, H, Sq, Skv) as strided views
    (the ``*_strides``/``*_offset`` params; the buffers are storage). A row whose scores hold
    a nan or +inf, or are all -inf (so all rows when Skv is 0), is bad: nan (``empty="nan"``,
    numpy's softmax) or 0 (``"zero"``, ONNX exports' Where(IsNaN(softmax), 0, softmax));
    ``"masked"``: 0 for a row of -inf scores (no key to attend), nan for a nan or +inf (ONNX's
    Attention operator as wgcompute runs it).
    The tile, and so the pipeline, depends on Sq: bind anew (not set_params) for another Sq."""

    name = "attention"
    inputs = ("q", "k", "v", "bias")
    dtypes = ("f32", "f16")
    workgroup_size = TILES[0][0] // 4 * TILES[0][2]  # the largest: BQ/4·TX invocations
    not_in_place = "other workgroups still read q, k and v while out is written"
    description = "out = softmax(scale * q @ k^T + bias) @ v per head, fused (flash attention)"
    params = (Param("B", "u32", doc="batch"), Param("H", "u32", doc="query heads"),
              Param("Sq", "u32", doc="query rows"), Param("Skv", "u32", doc="keys"),
              Param("D", "u32", doc="q's and k's head size"),
              Param("Dv", "u32", doc="v's and out's head size"),
              Param("scale", "f32", 1.0, "multiplies q·k"),
              Param("group", "u32", 1, "query heads per key/value head"),
              Param("has_bias", "bool", False, "whether bias is added (else it is not read)"),
              Param("empty", "str", "nan", "a bad row's output: 'nan', 'zero' or 'masked' (0 "
                    "where every score is -inf, else nan)", _empty_check),
              _strides_param("q", "(sb, sh, ss) of q's view (None: contiguous)"),
              _offset_param("q"),
              _strides_param("k", "(sb, sh, ss) of k's view (None: contiguous)"),
              _offset_param("k"),
              _strides_param("v", "(sb, sh, ss) of v's view (None: contiguous)"),
              _offset_param("v"),
              _strides_param("out", "(sb, sh, ss) of out's view (None: contiguous)"),
              _offset_param("out"),
              _strides_param("bias", "(sb, sh, si, sj) of bias's view, 0 to broadcast "
                                     "(None: contiguous (B, H, Sq, Skv))"),
              _offset_param("bias"))

    def output_spec(self, inputs, params):
        return (params["B"], params["H"], params["Sq"], params["Dv"]), inputs[0].dtype

    def views(self, params) -> dict:
        """Each operand's (sizes, strides, offset) in elements, strides checked."""
        B, H, Sq, Skv, D, Dv = (params[n] for n in ("B", "H", "Sq", "Skv", "D", "Dv"))
        hk = H // max(params["group"], 1)
        sizes = {"q": (B, H, Sq, D), "k": (B, hk, Skv, D), "v": (B, hk, Skv, Dv),
                 "out": (B, H, Sq, Dv), "bias": (B, H, Sq, Skv)}
        out = {}
        for name in VIEWS:
            shape = sizes[name]
            strides, offset = params[f"{name}_strides"], params[f"{name}_offset"]
            if strides is None:
                strides = tuple(math.prod(shape[i + 1:]) for i in range(4))
            strides = self._strides(name, strides)
            offset = _index(offset)
            if offset is None or offset < 0:
                raise ShapeError(f"{self.name}: {name}_offset must be an integer >= 0, got "
                                 f"{params[f'{name}_offset']!r}")
            out[name] = (shape, strides, offset)
        return out

    def _strides(self, name: str, strides) -> tuple[int, ...]:
        n = 4 if name == "bias" else 3
        given = strides
        if isinstance(strides, (tuple, list)):
            strides = tuple(_index(s) for s in strides)
        if not isinstance(strides, tuple) or len(strides) not in (n, 4) or None in strides:
            raise ShapeError(f"{self.name}: {name}_strides must be {n} integers, got "
                             f"{given!r}")
        if any(s < 0 for s in strides):
            raise ShapeError(f"{self.name}: {name}_strides {tuple(strides)} has a negative "
                             f"stride; views must be non-negative")
        if len(strides) == 4 and name != "bias" and strides[3] != 1:
            raise ShapeError(f"{self.name}: {name}_strides {tuple(strides)}: the last (head) "
                             f"axis must be contiguous (stride 1)")
        return tuple(strides[:3]) + (1,) if name != "bias" else tuple(strides)

    def check(self, inputs, output, params) -> None:
        named = dict(zip(("q", "k", "v", "bias"), inputs, strict=True))
        named["out"] = output
        for name in ("k", "v", "bias", "out"):
            if name == "bias" and not params["has_bias"]:
                continue
            if named[name].dtype != named["q"].dtype:
                raise DtypeError(f"{self.name}: {name} is {named[name].dtype}, q is "
                                 f"{named['q'].dtype}; they must match")
        for n in ("D", "Dv"):
            if not 1 <= params[n] <= MAX_HEAD:
                raise ShapeError(f"{self.name}: {n}={params[n]} is outside this kernel's head "
                                 f"sizes 1..{MAX_HEAD}")
        group = params["group"]
        if group < 1 or params["H"] % group:
            raise ShapeError(f"{self.name}: H={params['H']} is not a multiple of group={group} "
                             f"(query heads per key/value head)")
        for name, (shape, strides, offset) in self.views(params).items():
            if name == "bias" and not params["has_bias"] or 0 in shape:
                continue
            last = offset + sum((n - 1) * s for n, s in zip(shape, strides))
            if last >= named[name].size or last >= 2 ** 32:
                raise ShapeError(f"{self.name}: {name}'s view {shape} (strides {strides}, offset "
                                 f"{offset}) reaches element {last}, past its buffer of "
                                 f"{named[name].size}")

    def _vec(self, params) -> bool:
        """Whether q, k, v and out are read and written as vec4: every offset and stride a
        multiple of 4, and so D and Dv."""
        if params["D"] % 4 or params["Dv"] % 4:
            return False
        views = self.views(params)
        return all(views[n][2] % 4 == 0 and all(s % 4 == 0 for s in views[n][1][:3])
                   for n in ("q", "k", "v", "out"))

    def key(self, inputs, output, params) -> PipelineKey:
        D, Dv = params["D"], params["Dv"]
        tiles = _plan(output.device, params["Sq"], D, Dv, params["B"] * params["H"])
        if tiles is None:
            raise ShapeError(f"{self.name}: D={D}, Dv={Dv}: no tile fits "
                             f"{output.device.name}'s workgroup memory")
        return PipelineKey(self.name, (output.dtype,), (
            ("D", D), ("Dv", Dv), ("tiles", tiles), ("vec", self._vec(params)),
            ("unroll", bool(output.device.is_gpu if UNROLL is None else UNROLL)),
            ("bias", bool(params["has_bias"])), ("empty", params["empty"])))

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        dt = DTYPES[key.dtypes[0]]
        bq, bkv, tx = c["tiles"]
        d4, dv4 = -(-c["D"] // 4), -(-c["Dv"] // 4)
        nc, threads = -(-dv4 // tx), bq // 4 * tx
        src = shaders.render(shaders.load("nn/attention.wgsl"), {
            "ENABLE": shaders.enable_directives([dt.wgsl]), "T": dt.wgsl,
            "VT": f"vec4<{dt.wgsl}>" if c["vec"] else dt.wgsl, "VEC": c["vec"],
            "BIAS": c["bias"], "NAN": c["empty"] == "nan", "MASKED": c["empty"] == "masked",
            "D": c["D"], "Dv": c["Dv"], "D4": d4,
            "DV4": dv4, "KS": d4 | 1, "BQ": bq, "BKV": bkv, "TX": tx, "UNROLL": c["unroll"],
            "THREADS": threads, "KPT": bkv // tx, "NC": nc, "NK": -(-bkv * d4 // threads),
            "NV": -(-bkv * tx * nc // threads)}, name="nn/attention.wgsl")
        fields = (("total", "u32"), ("nqb", "u32"), ("H", "u32"), ("group", "u32"),
                  ("Sq", "u32"), ("Skv", "u32"), ("scale", "f32"))
        for prefix, axes in (("q", "b h s"), ("k", "b h s"), ("v", "b h s"), ("o", "b h s"),
                             ("b", "b h i j")):
            fields += ((f"{prefix}_off", "u32"),) + tuple(
                (f"{prefix}_s{a}", "u32") for a in axes.split())
        return src, fields

    def launches(self, inputs, output, params, device):
        B, H, Sq = params["B"], params["H"], params["Sq"]
        if B * H * Sq * params["Dv"] == 0:
            return []
        bq = _plan(device, Sq, params["D"], params["Dv"], B * H)[0]
        nqb = -(-Sq // bq)
        total = B * H * nqb
        u = {"total": total, "nqb": nqb, "H": H, "group": params["group"], "Sq": Sq,
             "Skv": params["Skv"], "scale": params["scale"]}
        for (shape, strides, offset), prefix in zip(self.views(params).values(),
                                                    ("q", "k", "v", "o", "b")):
            u[f"{prefix}_off"] = offset
            axes = ("b", "h", "i", "j") if prefix == "b" else ("b", "h", "s")
            for a, n, s in zip(axes, shape, strides):
                u[f"{prefix}_s{a}"] = s if n > 1 else 0  # (any stride of a size-1 axis)
        if not params["has_bias"]:
            u.update({"b_off": 0, "b_sb": 0, "b_sh": 0, "b_si": 0, "b_sj": 0})
        return [Launch(fold_grid(total, device, self.name), u)]


ATTENTION = Attention()
