#if part == "block"
    #if group > 1
// grouped rasterization: launch order walks GROUP block rows column by column
let pid = wid.y * nwg.x + wid.x;
let per_group = ${group}u * nwg.x;
let first = (pid / per_group) * ${group}u;
let rows = min(nwg.y - first, ${group}u);
let by = first + (pid % per_group) % rows;
let bx = (pid % per_group) / rows;
    #else
let bx = wid.x;
let by = wid.y;
    #endif
#elif part == "txty"
    #if warp
// 32 consecutive invocations (a warp) cover 8 columns × 4 rows of blocks
let tx = (lid / 32u) % ${GX // 8}u * 8u + lid % 8u;
let ty = (lid / 32u) / ${GX // 8}u * 4u + (lid % 32u) / 8u;
    #else
let tx = lid % ${GX}u;
let ty = lid / ${GX}u;
    #endif
#elif part == "declare"
    #for i in range(LA)
var ra${i}: ${VS};
    #endfor
    #for i in range(LB)
var rb${i}: ${VS};
    #endfor
    #for i in range(TM)
        #for j in range(TB)
var c${i}_${j} = ${V}(0);
            #if mixed
var h${i}_${j}: ${VS};
            #endif
        #endfor
    #endfor
#elif part == "load"
    #for i in range(LA)
        #if ta
{ let q = lid + ${i * THREADS}u; let kr = k0 + q / ${BM // 4}u; let r = row0 + (q % ${BM // 4}u) * 4u;
            #if vec_a
  if (kr < kend && r < p.M) { ra${i} = ${VS}(a[(${AO}kr * ${LDA} + r) / 4u]); } else { ra${i} = ${VS}(0); } }
            #else
  ra${i} = ${VS}(load_a(r, kr, kend), load_a(r + 1u, kr, kend), load_a(r + 2u, kr, kend), load_a(r + 3u, kr, kend)); }
            #endif
        #else
{ let q = lid + ${i * THREADS}u; let r = row0 + q / ${KA}u; let kk = k0 + (q % ${KA}u) * 4u;
            #if hooks
  ra${i} = load_a4(r, kk, kend); }
            #elif vec_a
  if (r < p.M && kk < kend) { ra${i} = ${VS}(a[(${AO}r * ${LDA} + kk) / 4u]); } else { ra${i} = ${VS}(0); } }
            #else
  ra${i} = ${VS}(load_a(r, kk, kend), load_a(r, kk + 1u, kend), load_a(r, kk + 2u, kend), load_a(r, kk + 3u, kend)); }
            #endif
        #endif
    #endfor
    #for i in range(LB)
        #if tb
{ let q = lid + ${i * THREADS}u; let c = col0 + q / ${KA}u; let kk = k0 + (q % ${KA}u) * 4u;
            #if vec_bt
  if (c < p.N && kk < kend) { rb${i} = ${VS}(b[(${BO}c * ${LDB} + kk) / 4u]); } else { rb${i} = ${VS}(0); } }
            #else
  rb${i} = ${VS}(load_b(kk, c, kend), load_b(kk + 1u, c, kend), load_b(kk + 2u, c, kend), load_b(kk + 3u, c, kend)); }
            #endif
        #else
{ let q = lid + ${i * THREADS}u; let kr = k0 + q / ${NB}u; let c = col0 + (q % ${NB}u) * 4u;
            #if hooks
  rb${i} = load_b4(kr, c, kend); }
            #elif vec_b
  if (kr < kend && c < p.N) { rb${i} = ${VS}(b[(${BO}kr * ${LDB} + c) / 4u]); } else { rb${i} = ${VS}(0); } }
            #else
  rb${i} = ${VS}(load_b(kr, c, kend), load_b(kr, c + 1u, kend), load_b(kr, c + 2u, kend), load_b(kr, c + 3u, kend)); }
            #endif
        #endif
    #endfor
#elif part == "store"
    #for i in range(LA)
        #if ta
As[${buf * ASZ + i * THREADS}u + lid] = ra${i};
        #else
{ let q = lid + ${i * THREADS}u; let r = q / ${KA}u; let kk = (q % ${KA}u) * 4u;
            #for c in range(4)
  As[${buf * ASZ + c * BM // 4}u + kk * ${BM // 4}u + r / 4u][r % 4u] = ra${i}[${c}];
            #endfor
}
        #endif
    #endfor
    #for i in range(LB)
        #if tb
{ let q = lid + ${i * THREADS}u; let n = q / ${KA}u; let kk = (q % ${KA}u) * 4u;
            #for c in range(4)
  Bs[${buf * BSZ + c * NB}u + kk * ${NB}u + n / 4u][n % 4u] = rb${i}[${c}];
            #endfor
}
        #else
Bs[${buf * BSZ + i * THREADS}u + lid] = rb${i};
        #endif
    #endfor
#elif part == "compute"
    #if mixed and not unroll
        #for i in range(TM)
            #for j in range(TB)
h${i}_${j} = ${VS}(0);
            #endfor
        #endfor
    #endif
    #for kk in (range(BK) if unroll else (-1,))
        #if unroll
{
            #for i in range(TA)
  let a${i} = As[${buf * ASZ + kk * BM // 4 + i * SA}u + ty];
            #endfor
            #for j in range(TB)
  let b${j} = Bs[${buf * BSZ + kk * NB + j * SB}u + tx];
            #endfor
        #else
for (var kk = 0u; kk < ${BK}u; kk = kk + 1u) {
            #for i in range(TA)
  let a${i} = As[kk * ${BM // 4}u + ${buf * ASZ + i * SA}u + ty];
            #endfor
            #for j in range(TB)
  let b${j} = Bs[kk * ${NB}u + ${buf * BSZ + j * SB}u + tx];
            #endfor
        #endif
        #for i in range(TM)
            #for j in range(TB)
                #if not mixed
  c${i}_${j} = fma(${VS}(a${i // 4}[${i % 4}]), b${j}, c${i}_${j});
                #elif kk == 0
  h${i}_${j} = ${VS}(a${i // 4}[${i % 4}]) * b${j};
                #else
  h${i}_${j} = fma(${VS}(a${i // 4}[${i % 4}]), b${j}, h${i}_${j});
                #endif
            #endfor
        #endfor
}
    #endfor
    #if mixed
        // the slice's f16 sums into the f32 accumulators
        #for i in range(TM)
            #for j in range(TB)
c${i}_${j} = c${i}_${j} + ${V}(h${i}_${j});
            #endfor
        #endfor
    #endif
#elif part == "main"
if (tiles > 0u) {
    ${LOAD}
    #if stages == 2
    // two copies of the step, one per buffer, so each reads and writes constant offsets
    ${STORE[0]}
    workgroupBarrier();
    for (var t = 0u; t < tiles; t = t + 2u) {
        #for buf, tile in ((0, "t"), (1, "t + 1u"))
            #if buf == 0
        {
            #else
        if (t + 1u < tiles) {
            #endif
            let more = ${tile} + 1u < tiles;
            if (more) {
                k0 = kbegin + (${tile} + 1u) * ${BK}u;
                ${LOAD}
            #if early
                // the other buffer was last read before the previous barrier
                ${STORE[1 - buf]}
            #endif
            }
            ${COMPUTE[buf]}
            #if not early
            if (more) {
                ${STORE[1 - buf]}
            }
            #endif
            workgroupBarrier();
        }
        #endfor
    }
    #else
    for (var t = 0u; t < tiles; t = t + 1u) {
        ${STORE[0]}
        workgroupBarrier();
        if (t + 1u < tiles) {
            k0 = kbegin + (t + 1u) * ${BK}u;
            ${LOAD}
        }
        ${COMPUTE[0]}
        workgroupBarrier();
    }
    #endif
}
#elif part == "write"
    #if epilogue and ebias
// the epilogue's bias of this invocation's column blocks (the same for each of its rows)
        #for j in range(TB)
let e${j} = bias4(col0 + (tx + ${j * SB}u) * 4u);
        #endfor
    #endif
// row of accumulator i: vec4 block i/4 (stride BM/TM vec4 = 4·SA rows), lane i%4
    #for i in range(TM)
{ let r = row0 + (ty + ${(i // 4) * SA}u) * 4u + ${i % 4}u;
  if (r < p.M) {
        #for j in range(TB)
    { let c = col0 + (tx + ${j * SB}u) * 4u;
            #if epilogue and ebias
      c${i}_${j} = act4(c${i}_${j} + e${j});
            #elif epilogue
      c${i}_${j} = act4(c${i}_${j});
            #endif
            #if hooks
      store4(r, c, c${i}_${j}); }
            #elif split > 1
      let cv = c${i}_${j};
      for (var lane = 0u; lane < 4u; lane = lane + 1u) {
        if (c + lane < p.N) { add_out(${OO}r * p.N + c + lane, cv[lane]); }
      }
    }
            #elif vec_out
      if (c < p.N) { out[(${OO}r * p.N + c) / 4u] = vec4<${T}>(c${i}_${j}); } }
            #else
                #for lane in range(4)
      if (c + ${lane}u < p.N) { out[${OO}r * p.N + c + ${lane}u] = ${T}(c${i}_${j}[${lane}]); }
                #endfor
    }
            #endif
        #endfor
  }
}
    #endfor
#endif
