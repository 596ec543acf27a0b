"""gemm, products that are not convolutions: out = act(alpha · op(a) · op(b) + beta · c),
batched with numpy broadcasting, on matmul's tiling (conv_gemm.wgsl), tuned per output size."""

from __future__ import annotations

import math

from ...errors import ArgumentError, ShapeError
from ..core import tuning
from ..core.base import Launch, Param
from ..core.tuning import TuneProblem
from ..matmul.matmul import TileConfig
from ..nn.common import _merge_dims
from ..nn.nn import (
    ACTIVATION,
    SHAPES,
    NNKernel,
    act_fn,
    broadcast_shape,
    broadcast_strides,
    f32_bits,
)
from . import conv_configs
from .conv_configs import SkinnyConfig, gemm_class, tiled_choices, tiled_default
from .programs import guarded, render_tiled, storage_bindings

MAX_BATCH_DIMS = 3

# gemm (products that are not convolutions): tuned per output size class, on one shape each
_TUNE = {"large": ("64x128x16_4x8", "128x128x16_8x8", "128x64x16_8x4", "64x64x16_4x4"),
         "medium": ("64x64x16_4x4", "32x64x16_4x4", "64x128x16_4x8", "128x64x16_8x4"),
         "small": ("32x64x16_4x4", "32x32x16_4x4", "64x64x16_4x4"),
         "tiny": ("32x32x16_4x4", "32x64x16_4x4")}
# (M, N, K) each class is tuned on
_TUNE_SHAPES = {"large": (128, 25088, 576), "medium": (192, 3136, 192),
                "small": (320, 784, 960), "tiny": (160, 49, 960)}
_TUNE_REVISION = 2


def tune_problem(kind: str, m: int, n: int, dtype: str, device) -> TuneProblem:
    """The tuner's problem for a gemm with an m × n output on ``device`` (per size class)."""
    fits = tiled_choices(device)
    if not fits:
        raise ShapeError(f"{kind}: no tile configuration fits this adapter's limits "
                         f"({device.name})")
    cls = gemm_class(m, n)
    default = tiled_default(m, n, fits)
    names = [nm for nm in _TUNE[cls] if nm in fits] or list(fits)
    if default not in names:
        default = names[0]
    return TuneProblem(kind, f"{kind} {dtype} {cls} r{_TUNE_REVISION}", tuple(names), default,
                       lambda name: _measure(kind, fits[name], dtype, cls, device))


def choose_config(kind: str, m: int, n: int, dtype: str, device) -> TileConfig:
    """The tile configuration for a gemm with an m × n output on ``device``: tuned per size
    class (looked up only: ``bind`` tunes first), or the default."""
    return tiled_choices(device)[tuning.choice(device, tune_problem(kind, m, n, dtype, device))]


def check_config(cfg, kind, skinny_ok: bool = False):
    if skinny_ok and isinstance(cfg, SkinnyConfig):
        return cfg
    if not isinstance(cfg, TileConfig):
        what = "a TileConfig or a SkinnyConfig" if skinny_ok else "a TileConfig"
        raise ArgumentError(f"{kind}: param '_config' must be {what}, got "
                            f"{type(cfg).__name__}")
    if cfg.split != 1:
        raise ArgumentError(f"{kind}: tile config {cfg.name} splits K; the fused epilogue "
                            f"needs whole-K configs")
    return cfg


def check_fits(cfg, kind, device) -> None:
    if cfg is not None and not cfg.fits(device, 4):
        raise ArgumentError(f"{kind}: config {cfg.name} does not fit {device.name}'s limits")



class Gemm(NNKernel):
    """out = act(alpha · op(a) · op(b) + beta · c), op transposing the last two axes when asked;
    leading (batch) axes broadcast as numpy.matmul does, c broadcasts to out."""

    name = "gemm"
    inputs = ("a", "b", "c")
    params = (Param("trans_a", "bool", False, "use a's last two axes transposed"),
              Param("trans_b", "bool", False, "use b's last two axes transposed"),
              Param("alpha", "f32", 1.0, "factor on the product"),
              Param("beta", "f32", 1.0, "factor on c"), ACTIVATION, SHAPES)
    description = ("out = activation(alpha · op(a) · op(b) + beta · c), batched with numpy "
                   "broadcasting, on matmul's tiling")
    not_in_place = "gemm reads whole rows"

    def resolve_params(self, params, dt):
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        out = super().resolve_params(params, dt)
        if cfg is not None:
            out["_config"] = check_config(cfg, self.name)
        return out

    def _dims(self, shapes, params):
        a, b, c = shapes[:3]
        if len(a) < 2 or len(b) < 2:
            raise ShapeError(f"{self.name}: a is {a} and b is {b}; both need at least 2 axes")
        m, ka = (a[-1], a[-2]) if params["trans_a"] else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if params["trans_b"] else (b[-2], b[-1])
        if ka != kb:
            raise ShapeError(f"{self.name}: a is {a} and b is {b}; inner dimensions {ka} and "
                             f"{kb} differ")
        batch = broadcast_shape(a[:-2], b[:-2], self.name)
        return batch, m, n, ka

    def out_shape(self, in_shapes, params):
        batch, m, n, _ = self._dims(in_shapes, params)
        return tuple(batch) + (m, n)

    def check_shapes(self, shapes, params):
        want = self.out_shape(shapes, params)
        out = shapes[-1]
        if math.prod(out) != math.prod(want) or (
                params.get("shapes") is None and tuple(out) != want):
            raise ShapeError(f"{self.name}: out is {out}, expected {want}")
        c = tuple(shapes[2])
        # c broadcasts TO the output (numpy's broadcast_shapes(c, out) == out), not only with
        # it: a c of (2, 5) against (2, 1, 5) would otherwise be read as if it were (1, 5)
        if len(c) > len(want) or any(d not in (1, w) for d, w in zip(reversed(c),
                                                                     reversed(want))):
            raise ShapeError(f"{self.name}: c is {c}, which does not broadcast to the output "
                             f"{want}: c may have at most as many axes, each 1 or the "
                             f"output's (counted from the last)")
        self._batch_plan(shapes, params)

    def _batch_plan(self, shapes, params):
        a, b, c = shapes[:3]
        batch, m, n, k = self._dims(shapes, params)
        outs = tuple(batch) + (m, n)
        sa = broadcast_strides(a[:-2], batch)
        sb = broadcast_strides(b[:-2], batch)
        sa = [s * a[-1] * a[-2] for s in sa]
        sb = [s * b[-1] * b[-2] for s in sb]
        cs = broadcast_strides(c, outs)
        so = [math.prod(batch[i + 1:]) * m * n for i in range(len(batch))]
        merged = _merge_dims(batch, sa, sb, cs[:-2], so)
        if len(merged) > MAX_BATCH_DIMS:
            raise ShapeError(f"{self.name}: a {a} and b {b} broadcast over {len(merged)} "
                             f"separate batch axes; at most {MAX_BATCH_DIMS}")
        return merged, cs[-2], cs[-1], m, n, k, math.prod(batch)

    def _config(self, shapes, params, device) -> TileConfig:
        cfg = params.get("_config")
        if cfg is None:
            _, m, n, _ = self._dims(shapes, params)
            cfg = choose_config("gemm", m, n, "f32", device)
        return cfg

    def pin(self, inputs, output, params) -> dict:
        """The tuned tile fixed as ``_config`` for this binding (Kernel.pin)."""
        if params.get("_config") is not None or output is None:
            return params
        return dict(params, _config=self._config(self.logical(inputs, output, params), params,
                                                 output.device))

    def tune_problems(self, inputs, output, params):
        if params.get("_config") is not None:
            return []
        _, m, n, _ = self._dims(self.logical(inputs, output, params), params)
        return [tune_problem("gemm", m, n, "f32", output.device)]

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        check_fits(params.get("_config"), self.name, output.device)

    def constants(self, shapes, params, device=None):
        merged = self._batch_plan(shapes, params)[0]
        return (("config", self._config(shapes, params, device).name), ("ta", params["trans_a"]),
                ("tb", params["trans_b"]), ("nb", len(merged)),
                ("act", params["activation"][0]))

    def _fields(self, nb):
        f = [("M", "u32"), ("N", "u32"), ("K", "u32"), ("csr", "u32"), ("csc", "u32"),
             ("alpha", "f32"), ("beta", "f32"), ("act_a", "f32"), ("act_b", "f32"),
             ("n0", "u32"), ("nend", "u32")]
        for d in range(nb):
            f += [(f"bd{d}", "u32"), (f"ba{d}", "u32"), (f"bb{d}", "u32"), (f"bc{d}", "u32"),
                  (f"bo{d}", "u32")]
        return tuple(f)

    def render(self, key):
        c = dict(key.constants)
        types = [{"f32": "f32", "f16": "f16"}[d] for d in key.dtypes]
        t = types[-1]
        fields = self._fields(c["nb"])
        bindings = storage_bindings(["a", "b", "c", "out"], types, [False, False, False, True])
        s = "f32"
        if c["ta"]:  # op(a)[r, k] = a[k, r]
            ia, ia_step = "za + k * p.M + r", "p.M"
        else:
            ia, ia_step = "za + r * p.K + k", "1u"
        if c["tb"]:  # op(b)[k, col] = b[col, k]; a column band binds from its first column
            ib, ib_step = "zb + (col - p.n0) * p.K + k", "p.K"
        else:
            ib, ib_step = "zb + k * p.N + col", "1u"
        helpers = guarded("a", s) + guarded("b", s) + act_fn("act", c["act"], "p.act_a",
                                                                "p.act_b")
        helpers += f"""fn load_a4(r: u32, k: u32, kend: u32) -> vec4<{s}> {{
    let i = {ia};
    let ok = r < p.M;
    return vec4<{s}>(ld_a(i, ok && k < kend), ld_a(i + {ia_step}, ok && k + 1u < kend),
                     ld_a(i + 2u * {ia_step}, ok && k + 2u < kend),
                     ld_a(i + 3u * {ia_step}, ok && k + 3u < kend));
}}
fn load_b4(k: u32, col: u32, kend: u32) -> vec4<{s}> {{
    let i = {ib};
    let ok = k < kend;
    return vec4<{s}>(ld_b(i, ok && col < p.nend), ld_b(i + {ib_step}, ok && col + 1u < p.nend),
                     ld_b(i + 2u * {ib_step}, ok && col + 2u < p.nend),
                     ld_b(i + 3u * {ib_step}, ok && col + 3u < p.nend));
}}
fn store4(r: u32, col: u32, acc: vec4<f32>) {{
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {{
        let cc = col + lane;
        if (cc < p.nend) {{
            let bias = f32(c[zc + r * p.csr + cc * p.csc]);
            out[zo + r * p.N + cc] = {t}(act(p.alpha * acc[lane] + p.beta * bias));
        }}
    }}
}}
"""
        batch = ["za = 0u;", "zb = 0u;", "zc = 0u;", "zo = 0u;", "var rem = wid.z;"]
        for d in reversed(range(c["nb"])):
            batch += [f"let i{d} = rem % p.bd{d};", f"rem = rem / p.bd{d};",
                      f"za = za + i{d} * p.ba{d};", f"zb = zb + i{d} * p.bb{d};",
                      f"zc = zc + i{d} * p.bc{d};", f"zo = zo + i{d} * p.bo{d};"]
        src = render_tiled(TileConfig.parse(c["config"]), t, fields, bindings, helpers,
                            "\n    ".join(batch), "p.n0")
        return src, fields

    def launches(self, inputs, output, params, device):
        shapes = self.logical(inputs, output, params)
        merged, csr, csc, m, n, k, nb = self._batch_plan(shapes, params)
        if m == 0 or n == 0 or nb == 0:
            return []
        if nb > device.limit("max-compute-workgroups-per-dimension"):
            raise ShapeError(f"{self.name}: {nb} batches exceed one dispatch's z range")
        cfg = self._config(shapes, params, device)
        _, act_a, act_b = params["activation"]
        u = {"M": m, "N": n, "K": k, "csr": csr, "csc": csc, "alpha": params["alpha"],
             "beta": params["beta"], "act_a": f32_bits(act_a), "act_b": f32_bits(act_b)}
        for d, (size, (ba, bb, bc, bo)) in enumerate(merged):
            u.update({f"bd{d}": size, f"ba{d}": ba, f"bb{d}": bb, f"bc{d}": bc, f"bo{d}": bo})
        limit = device.limit("max-compute-workgroups-per-dimension")
        gy = -(-m // cfg.bm)
        bind_limit = device.limit("max-storage-buffer-binding-size")
        esize = 2 if inputs[1].dtype == "f16" else 4
        b_bytes = inputs[1].size * esize
        if b_bytes <= bind_limit:
            bands = [(0, n)]
        else:
            # b wider than one binding (a big classifier on a small adapter): column bands,
            # each binding its own rows of b (trans_b) at a 256-byte aligned offset
            if not params["trans_b"] or nb != 1:
                raise ShapeError(f"{self.name}: b {inputs[1].shape} is {b_bytes} bytes, more "
                                 f"than one binding holds ({bind_limit}); only an unbatched "
                                 f"b with trans_b splits into bands")
            per = max(64, (bind_limit // (k * esize)) // 64 * 64)
            bands = [(n0, min(n, n0 + per)) for n0 in range(0, n, per)]
        out = []
        for n0, n1 in bands:
            gx = -(-(n1 - n0) // cfg.bn)
            if gx > limit or gy > limit:
                raise ShapeError(f"{self.name}: output ({m}, {n}) needs a {gy}×{gx} grid; this "
                                 f"adapter allows {limit} per dimension")
            ranges = None
            if len(bands) > 1:
                full = [(0, (b.size * esize + 15) // 16 * 16) for b in [*inputs, output]]
                full[1] = (n0 * k * esize, (n1 - n0) * k * esize)
                ranges = tuple(full)
            out.append(Launch((gx, gy, nb), dict(u, n0=n0, nend=n1), ranges))
        return out


# -- autotuning ------------------------------------------------------------------------------------
def _measure(kind: str, cfg: TileConfig, dtype: str, cls: str, device) -> float:
    """Seconds of one gemm of the class's tuning shape with ``cfg`` on ``device``."""
    from ...buffer import empty
    from ..core.bind import bind

    m, n, k = _TUNE_SHAPES[cls]
    bufs = [empty(s, dtype, f"autotune-{kind}", device=device)
            for s in [(m, k), (k, n), (1,), (m, n)]]
    try:
        d = bind(GEMM, bufs[:3], bufs[3], {"_config": cfg})
        return conv_configs.time_calls(device, d.raw_calls())
    finally:
        for b in bufs:
            b.free()



GEMM = Gemm()
