"""What bounds the f32 matmul: the adapter's peak FMA rate as WGSL reaches it (f32 and
vec4<f16>), the SM clock while our kernel and torch's run (nvidia-smi), and one tile config
rendered in variants that each take one cost away (timing only; most give wrong results):

  base       the kernel as the library runs it
  cached     every k tile re-reads the first tile's addresses (global loads hit the cache)
  fma x2     every multiply-add done twice (twice the FMA work, same memory traffic)
  no barrier workgroupBarrier() removed (races; shows what the barriers cost)

    python -m benchmarks.probe_matmul [--config NAME[,NAME]] [--size N]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import time

import numpy as np

from benchmarks.harness import gpu_time, peers

FMA_WGSL = """
${ENABLE}
struct P { iters: u32, }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<${T}>>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let s = x[g.x];
    let m = vec4<${T}>(${T}(0.999));
${INIT}
    for (var i = 0u; i < p.iters; i = i + 1u) {
${BODY}
    }
    x[g.x] = ${SUM};
}
"""
CHAINS = 16  # independent vec4 accumulators per invocation


def fma_source(t: str) -> str:
    init = "\n".join(f"    var v{i} = s + vec4<{t}>({t}({i}));" for i in range(CHAINS))
    body = "\n".join(f"        v{i} = fma(v{i}, m, s);" for i in range(CHAINS))
    total = " + ".join(f"v{i}" for i in range(CHAINS))
    return (FMA_WGSL.replace("${ENABLE}", "enable f16;" if t == "f16" else "")
            .replace("${T}", t).replace("${INIT}", init).replace("${BODY}", body)
            .replace("${SUM}", total))


def direct_source(tm: int, tn: int, gx: int, gy: int) -> str:
    """A matmul without workgroup memory or barriers: every invocation reads its rows of a
    (vec4 along k) and columns of b straight from storage, and neighbours' reads of the same
    lines hit the L1 cache. Probe only: M % (4·gy·tm/4), N % (4·gx·tn/4) and K % 4 must be 0."""
    tb = tn // 4
    lines = ["struct Params { M: u32, N: u32, K: u32, phase: u32, kchunk: u32, }",
             "@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;",
             "@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;",
             "@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;",
             "@group(0) @binding(3) var<uniform> p: Params;",
             f"@compute @workgroup_size({gx * gy})",
             "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
             "@builtin(local_invocation_index) lid: u32) {",
             f"    let tx = lid % {gx}u; let ty = lid / {gx}u;",
             f"    let row0 = wid.y * {gy * tm}u; let col0 = wid.x * {gx * tn}u;",
             "    let kq = p.K / 4u; let nq = p.N / 4u;"]
    for i in range(tm):
        lines.append(f"    let ar{i} = (row0 + (ty + {(i // 4) * gy}u) * 4u + {i % 4}u) * kq;")
        for j in range(tb):
            lines.append(f"    var c{i}_{j} = vec4<f32>(0);")
    for j in range(tb):
        lines.append(f"    let bc{j} = (col0 + (tx + {j * gx}u) * 4u) / 4u;")
    lines.append("    for (var k = 0u; k < kq; k = k + 1u) {")
    for i in range(tm):
        lines.append(f"        let av{i} = a[ar{i} + k];")
    for kk in range(4):
        for j in range(tb):
            lines.append(f"        let b{kk}_{j} = b[(k * 4u + {kk}u) * nq + bc{j}];")
        for i in range(tm):
            for j in range(tb):
                lines.append(f"        c{i}_{j} = fma(vec4<f32>(av{i}[{kk}]), b{kk}_{j}, "
                             f"c{i}_{j});")
    lines.append("    }")
    for i in range(tm):
        r = f"(row0 + (ty + {(i // 4) * gy}u) * 4u + {i % 4}u)"
        for j in range(tb):
            lines.append(f"    out[{r} * nq + bc{j}] = c{i}_{j};")
    lines.append("}")
    return "\n".join(lines)


def smi_clock() -> str:
    if not shutil.which("nvidia-smi"):
        return "nvidia-smi not found"
    q = "clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
    r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=20)
    return (r.stdout.strip() or r.stderr.strip()).replace("\n", " | ")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="64x128x16_4x8_g4,128x128x8_8x8_u_g8",
                    help="tile configs to take apart, comma-separated")
    ap.add_argument("--size", type=int, default=4096, help="M = N = K (4096)")
    ap.add_argument("--small", action="store_true", help="tiny sizes (lavapipe)")
    args = ap.parse_args(argv)
    n = 128 if args.small else args.size

    found = peers()  # CUDA before the Vulkan device (see docs/architecture.md)
    torch = found.get("torch")
    import wgpu

    import wgcompute as wgc
    from wgcompute import shaders
    from wgcompute.device import get_device
    from wgcompute.kernels.matmul import TileConfig, render_tiled

    info = wgc.device_info()
    print(f"adapter: {info['name']} {info['backend']}")
    print(f"idle clocks: {smi_clock()}")
    dev = get_device().gpu_device
    storage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC

    def pipeline(code, label):
        module = shaders.create_module(dev, label, code, checked=False)
        return dev.create_compute_pipeline(layout="auto",
                                           compute={"module": module, "entry_point": "main"})

    def busy_clock(record_pass, reps):
        """Submit ``reps`` passes of the work, read the clocks while they run, then wait."""
        enc = dev.create_command_encoder()
        cpass = enc.begin_compute_pass()
        for _ in range(reps):
            record_pass(cpass)
        cpass.end()
        dev.queue.submit([enc.finish()])
        time.sleep(0.05)
        c = smi_clock()
        dev.queue.read_buffer(sync, 0, 4)
        return c

    sync = dev.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_SRC)

    # 1. peak FMA rate
    groups = 8 if args.small else 4096
    iters = 64 if args.small else 2048
    xbuf = dev.create_buffer(size=groups * 256 * 16, usage=storage)
    ubuf = dev.create_buffer(size=16, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    dev.queue.write_buffer(ubuf, 0, np.array([iters, 0, 0, 0], np.uint32).tobytes())
    for t in ("f32", "f16"):
        if t == "f16" and "shader-f16" not in info["features"]:
            continue
        pipe = pipeline(fma_source(t), f"fma-{t}")
        bg = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": xbuf}},
            {"binding": 1, "resource": {"buffer": ubuf}}])

        def rec(cpass, pipe=pipe, bg=bg):
            cpass.set_pipeline(pipe)
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(groups)

        sec, how = gpu_time(None, record_pass=rec, warmup=2, repeat=5)
        flops = groups * 256 * iters * CHAINS * 4 * 2
        print(f"peak FMA vec4<{t}>: {flops / sec / 1e12:7.2f} TFLOP/s  ({sec * 1e3:.3f} ms, {how})")
        if not args.small:
            print(f"  clocks while running: {busy_clock(rec, max(1, int(0.3 / sec)))}")

    # 2. the matmul and its variants
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    abuf = dev.create_buffer_with_data(data=A, usage=storage)
    bbuf = dev.create_buffer_with_data(data=B, usage=storage)
    obuf = dev.create_buffer(size=n * n * 4, usage=storage)
    pbuf = dev.create_buffer(size=32, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    dev.queue.write_buffer(pbuf, 0, np.array([n, n, n, 1, n, 0, 0, 0], np.uint32).tobytes())
    want = A.astype(np.float64) @ B.astype(np.float64)
    flops = 2.0 * n ** 3

    def run_matmul(code, label, grid, clocks=False):
        """Build ``code``, time it on A·B, print its rate and error against numpy."""
        try:
            pipe = pipeline(code, label)
        except Exception as e:
            print(f"  {label}: failed to build: {str(e).splitlines()[0]}")
            return
        bg = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf}}
            for i, buf in enumerate((abuf, bbuf, obuf, pbuf))])

        def rec(cpass):
            cpass.set_pipeline(pipe)
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(*grid)

        sec, how = gpu_time(None, record_pass=rec, warmup=2, repeat=5,
                            inner=1 if args.small else 3)
        got = np.frombuffer(dev.queue.read_buffer(obuf), np.float32).reshape(n, n)
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"matmul {label}: {sec * 1e3:7.3f} ms {flops / sec / 1e12:7.2f} TFLOP/s  "
              f"err {err:.1e}  ({how})")
        if clocks and not args.small:
            print(f"  clocks while running: {busy_clock(rec, max(1, int(0.3 / sec)))}")

    for cfg_name in args.config.split(","):
        cfg = TileConfig.parse(cfg_name)
        base, _ = render_tiled(cfg, "f32", True, True)
        variants = {
            "base": base,
            "cached": re.sub(r"k0 = kbegin \+ \([^;]*\) \* (\d+)u;", "k0 = kbegin;", base),
            "fma x2": re.sub(r"^(\s*)(c\d+_\d+ = fma\(.*\);)$", r"\1\2\n\1\2", base, flags=re.M),
            "no barrier": base.replace("workgroupBarrier();", ""),
        }
        grid = ((n + cfg.bn - 1) // cfg.bn, (n + cfg.bm - 1) // cfg.bm, 1)
        for name, code in variants.items():
            if name != "base" and code == base:
                print(f"  {name}: the rewrite found nothing to change")
                continue
            run_matmul(code, f"{cfg.name} {n}^3 {name:>10}", grid, clocks=name == "base")

    # 3. no workgroup memory at all: every invocation reads storage, the L1 cache shares it
    for tm, tn, gx, gy in [(8, 8, 16, 16), (4, 8, 16, 16), (8, 8, 32, 8), (8, 4, 16, 16)]:
        bm, bn = gy * tm, gx * tn
        if n % bm or n % bn:
            continue
        run_matmul(direct_source(tm, tn, gx, gy), f"direct {bm}x{bn} {tm}x{tn} {n}^3",
                   (n // bn, n // bm, 1))

    if torch is not None and not args.small:
        torch.backends.cuda.matmul.allow_tf32 = False
        ta = torch.from_numpy(A).cuda()
        tb = torch.from_numpy(B).cuda()
        for _ in range(3):
            ta @ tb
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            ta @ tb
        torch.cuda.synchronize()
        sec = (time.perf_counter() - t0) / 20
        print(f"torch matmul {n}^3: {sec * 1e3:.3f} ms {flops / sec / 1e12:.2f} TFLOP/s (wall)")
        for _ in range(80):
            ta @ tb
        time.sleep(0.05)
        print(f"  clocks while running: {smi_clock()}")
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
