"""matmul's WGSL: matmul_tiled.wgsl, with the 2-D block tiling's pieces (which block, the
registers, the k loop, the write-back) from the parts of tiling.wgsl. Python computes only
their parameters (sizes, offsets, type names, flags); the shader text is in the templates.

The parts are rendered one by one because the k loop uses the load, store and compute parts
several times (two workgroup buffers), and because the convolutions (conv/programs.py) put
them into their own template through ``tiled_substitutions(..., hooks=True)``.

tiling.wgsl's parts: block (which BM×BN block this workgroup owns: bx, by; grouped
rasterization walks GROUP block rows column by column), txty (this invocation's column tx and
row ty of blocks), declare (registers and accumulators), load (global -> registers for the
tile at k0: a tile is BM rows × BK/4 vec4, invocation lid loads vec4 number lid + i·THREADS),
store (registers -> workgroup tile ``buf``; a transposed, As[k][m], so the k loop reads rows
of m as vec4), compute (the BK k steps of tile ``buf``: unrolled with constant offsets, or a
loop; "mixed" sums them in f16, then into the f32 accumulators), main (the k loop, given
LOAD, STORE[buf] and COMPUTE[buf] rendered), write (accumulators -> out, edge-guarded; with
``epilogue`` each accumulator first becomes act4(acc + bias) in f32: matmul_tiled.wgsl defines
act4 and bias4, epilogue.py's MatmulEpilogue the activation)."""

from __future__ import annotations

from ...errors import ArgumentError
from ..core import shaders
from ..core.layout import index_wgsl, uniform_fields
from .configs import TileConfig

_FIELDS = (("M", "u32"), ("N", "u32"), ("K", "u32"), ("phase", "u32"), ("kchunk", "u32"))


def tile_params(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool, mixed: bool, hooks: bool,
                batch: int, ta: bool = False, tb: bool = False, vec_bt: bool = False,
                vec_out: bool | None = None, epilogue: tuple[bool, str] | None = None) -> dict:
    """tiling.wgsl's parameters for one tile configuration: T (storage type), S (tile element),
    V / VS (vec4 of the accumulator / of S), the config's sizes and options, LA / LB (vec4
    loads of a / b per invocation per k step), ASZ / BSZ (one tile, in vec4), KA = BK/4,
    NB = BN/4, TA / TB = TM/4, TN/4, SA / SB (vec4 stride between an invocation's blocks),
    GX (blocks per row), AO / BO / OO ("aoff + " etc.: a batched product's offsets, else ""),
    ta / tb (a / b held transposed: (K, M) / (N, K) in memory; a's tile is then loaded along
    m, vec4 when ``vec_a`` (M % 4 == 0), b's along k, vec4 when ``vec_bt`` (K % 4 == 0)),
    LDA / LDB (the element stride between a's / b's rows in memory: the uniform's lda / ldb in
    batched products, which may read views, else K, M or N), vec_out (out written as vec4:
    ``vec_b`` unless given; batched products' vec_a / vec_b / vec_bt say the loads are
    aligned), epilogue / ebias (``epilogue`` given: the write applies the epilogue, with the
    bias when its first item is True)."""
    acc = "f32" if t == "f16" else t
    s = "f16" if mixed else acc  # the workgroup tiles' element type
    threads = cfg.threads
    # element offsets of this workgroup's product (batched only: 2-D shaders stay as they were)
    ao, bo, oo = ("aoff + ", "boff + ", "ooff + ") if batch else ("", "", "")
    lda, ldb = ("p.lda", "p.ldb") if batch else ("p.M" if ta else "p.K", "p.K" if tb else "p.N")
    return {
        "T": t, "S": s, "V": f"vec4<{acc}>", "VS": f"vec4<{s}>",
        "BM": cfg.bm, "BN": cfg.bn, "BK": cfg.bk, "TM": cfg.tm, "THREADS": threads,
        "LA": cfg.bm * cfg.bk // (4 * threads),  # vec4 loads of a per invocation per k step
        "LB": cfg.bk * cfg.bn // (4 * threads),
        "ASZ": cfg.bk * cfg.bm // 4, "BSZ": cfg.bk * cfg.bn // 4,  # one tile, in vec4
        "KA": cfg.bk // 4, "NB": cfg.bn // 4, "TA": cfg.tm // 4, "TB": cfg.tn // 4,
        "SA": cfg.bm // cfg.tm, "SB": cfg.bn // cfg.tn, "GX": cfg.bn // cfg.tn,
        "AO": ao, "BO": bo, "OO": oo, "LDA": lda, "LDB": ldb,
        "hooks": hooks, "vec_a": vec_a, "vec_b": vec_b, "mixed": mixed, "batch": batch,
        "ta": ta, "tb": tb, "vec_bt": vec_bt, "vec_out": vec_b if vec_out is None else vec_out,
        "unroll": cfg.unroll, "warp": cfg.warp, "early": cfg.early, "stages": cfg.stages,
        "group": cfg.group, "split": cfg.split,
        "epilogue": epilogue is not None, "ebias": epilogue is not None and epilogue[0]}


def _part(part: str, params: dict, **more) -> str:
    return shaders.render(shaders.load("matmul/tiling.wgsl"), dict(params, part=part, **more),
                          name=f"matmul/tiling.wgsl ({part})")


def tiled_substitutions(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool, mixed: bool = False,
                        hooks: bool = False, batch: int = 0, ta: bool = False,
                        tb: bool = False, vec_bt: bool = False,
                        vec_out: bool | None = None,
                        epilogue: tuple[bool, str] | None = None) -> dict:
    """tiling.wgsl's parameters and its rendered parts (BLOCK, TXTY, DECLARE, MAIN, WRITE) for
    one tile configuration, with ENABLE, STAGES, HELPERS (none of its own: "") and ``FIELDS``
    (the parameter struct's fields, in order).

    ``hooks`` (for kernels built on this tiling with their own template, e.g. convolutions):
    the tiles are filled by WGSL functions the caller defines, ``load_a4(r, k, kend)`` (a's
    row r, columns k..k+3) and ``load_b4(k, c, kend)`` (b's row k, columns c..c+3), each a
    vec4 of the tile element type that is 0 outside the operands; results leave through
    ``store4(r, c, acc)`` (row r < M, columns c..c+3 that may pass N). No split-K then.

    ``epilogue`` (has_bias, act): the write part applies act4(acc [+ bias4(c)]) to each
    accumulator before storing it (render_tiled's matmul_tiled.wgsl defines both): whole-K,
    unbatched f32 or f16 products without hooks only."""
    if hooks and (cfg.split > 1 or batch):
        raise ArgumentError(f"matmul: tile config {cfg.name} splits K or is batched; the hooks "
                            f"take whole-K, unbatched configs only")
    if mixed and t != "f16":
        raise ArgumentError(f"matmul: precision 'mixed' needs f16, got {t}")
    if hooks and (ta or tb):
        raise ArgumentError("matmul: the hooks load the tiles themselves; no transposed operand")
    if epilogue is not None and (hooks or batch or cfg.split > 1 or t not in ("f32", "f16")):
        raise ArgumentError(f"matmul: the epilogue takes whole-K (tile config {cfg.name}), "
                            f"unbatched f32 or f16 products without hooks")
    p = tile_params(cfg, t, vec_a, vec_b, mixed, hooks, batch, ta, tb, vec_bt, vec_out,
                    epilogue)
    fields = _FIELDS + ((("kslices", "u32"), ("zbase", "u32"), ("nbatch", "u32"),
                         ("lda", "u32"), ("ldb", "u32"),
                         *uniform_fields(batch, ("a", "b"))) if batch else ())
    steps = {"LOAD": _part("load", p),
             "STORE": tuple(_part("store", p, buf=buf) for buf in range(cfg.stages)),
             "COMPUTE": tuple(_part("compute", p, buf=buf) for buf in range(cfg.stages))}
    return dict(p, FIELDS=fields, ENABLE=shaders.enable_directives([t]), STAGES=cfg.stages,
                HELPERS="", BLOCK=_part("block", p), TXTY=_part("txty", p),
                DECLARE=_part("declare", p), MAIN=_part("main", p, **steps),
                WRITE=_part("write", p))


def render_tiled(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool, mixed: bool = False,
                 batch: int = 0, ta: bool = False, tb: bool = False, vec_bt: bool = False,
                 vec_out: bool | None = None, epilogue: tuple[bool, str] | None = None):
    """WGSL for one tile configuration and the parameter struct's fields.

    ``t`` is the storage type; ``mixed`` (f16 only) keeps f16 tiles and sums each k step's
    BK products in vec4<f16> partial accumulators that are added into the f32 ones after it.
    ``batch`` > 0: workgroup z also picks the product of a batch of that many (coalesced)
    dimensions, whose element offsets into a, b and out the shader computes from z, each
    operand's rows ``lda`` / ``ldb`` elements apart (a view read in place).
    ``ta`` / ``tb``: a / b is held transposed (its last two axes swapped in memory); ``vec_a``
    then says M % 4 == 0, ``vec_bt`` K % 4 == 0 (vec4 loads of b), and ``vec_b`` only how
    out is written (``vec_out``, where given, says that instead).
    ``epilogue`` (has_bias, act): out = act(a · b + bias) (bias (N,), bound after b, when
    has_bias) computed in f32 before the store, ``act`` the WGSL of ``fn act(x: f32) -> f32``
    (tiled_substitutions says which products take it)."""
    subs = tiled_substitutions(cfg, t, vec_a, vec_b, mixed, batch=batch, ta=ta, tb=tb,
                               vec_bt=vec_bt, vec_out=vec_out, epilogue=epilogue)
    subs.update(AT=f"vec4<{t}>" if vec_a else t,
                BT=f"vec4<{t}>" if (vec_bt if tb else vec_b) else t,
                OT=f"vec4<{t}>" if subs["vec_out"] else t,
                BIAST=f"vec4<{t}>" if subs["vec_out"] else t,
                ACT=epilogue[1] if epilogue is not None else "",
                EXTRA=subs["FIELDS"][len(_FIELDS):],
                INDEX=index_wgsl(batch, ("a", "b"), "bz") if batch else "")
    src = shaders.render(shaders.load("matmul/matmul_tiled.wgsl"), subs,
                         name="matmul/matmul_tiled.wgsl")
    return src, subs["FIELDS"]
