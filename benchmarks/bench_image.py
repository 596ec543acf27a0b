"""Image kernels side by side, in megapixels per second: a 4096×4096 RGBA blur -> sharpen ->
grayscale pipeline, and one 5×5 gaussian (sigma 1.5, clamp) on a 4096×4096 f32 image.

Peers: OpenCV and scipy.ndimage on this CPU; on a CUDA GPU also torch (conv2d) and CuPy
(cupyx.scipy.ndimage) when importable. wgcompute is timed with GPU timestamps where the
adapter has them (wall time otherwise); torch/CuPy with CUDA events; CPU peers by wall time.
Beside each GPU time, the wall clock of a user's loop (ten launches queued, one wait).

    python -m benchmarks.bench_image [--size 4096] [--repeat 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.harness import (
    GPU_TS,
    WALL,
    Results,
    bound,
    cuda_time,
    env_info,
    gpu_time,
    max_rel_err,
    peer_wall,
    peers,
    queued_wall,
    wall_time,
)

SIGMA, RADIUS, AMOUNT = 1.5, 3, 0.5  # the pipeline: gaussian_blur(3, 1.5) | sharpen(0.5) | gray
G5_RADIUS = 2  # the single gaussian: 5×5 taps
BT601 = np.array([0.299, 0.587, 0.114])


STAGES = (("gaussian_blur", {"radius": RADIUS, "sigma": SIGMA}),
          ("sharpen", {"amount": AMOUNT, "radius": RADIUS, "sigma": SIGMA}),
          ("grayscale", {}))


def _wgc_stages(img_u8):
    """Bound dispatches of the pipeline on an RGBA8 image (what one submit records; None
    where this wgcompute version exposes none), its buffers, and the same work as a
    wgc.pipeline (the user's way to launch it)."""
    import wgcompute as wgc

    src = wgc.image.from_numpy(img_u8)
    bufs = [src] + [wgc.empty(src.shape, "u8") for _ in STAGES]
    p = wgc.pipeline("bench-image")
    ds = []
    for i, (name, params) in enumerate(STAGES):
        p.add(kernel=name, inputs=[bufs[i]], output=bufs[i + 1], params=params)
        ds.append(bound(name, [bufs[i]], bufs[i + 1], params))
    return (None if None in ds else ds), tuple(bufs), p


def _record(ds):
    def rec(cpass):
        for d in ds:
            d.encode(cpass)
    return rec


def bench_pipeline(res: Results, n: int, repeat: int, rows: list) -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (n, n, 4), dtype=np.uint8)
    img[..., 3] = 255
    mpix = n * n / 1e6
    case = f"{n}x{n} RGBA8 blur → sharpen → gray"

    ds, bufs, pipe = _wgc_stages(img)
    # (runs after a pause start at the NVIDIA idle clock: docs/guide/devices.md)
    wall = queued_wall(pipe.submit)
    if ds is not None:
        t, how = gpu_time(None, record_pass=_record(ds), warmup=10, repeat=repeat)
    else:
        t, how = wall, WALL
    ours = bufs[-1].to_numpy()[..., 0].astype(np.float64)
    rows.append((case, "wgcompute", t, how, None, wall))

    try:
        import cv2

        def cv():
            blur = cv2.GaussianBlur(img, (2 * RADIUS + 1, 2 * RADIUS + 1), SIGMA,
                                    borderType=cv2.BORDER_REPLICATE)
            blur2 = cv2.GaussianBlur(blur, (2 * RADIUS + 1, 2 * RADIUS + 1), SIGMA,
                                     borderType=cv2.BORDER_REPLICATE)
            sharp = cv2.addWeighted(blur, 1 + AMOUNT, blur2, -AMOUNT, 0)
            return cv2.cvtColor(sharp, cv2.COLOR_RGBA2GRAY)

        t = wall_time(cv, warmup=1, repeat=repeat)
        err = np.abs(cv().astype(np.float64) - ours).max()
        rows.append((case, f"opencv {cv2.__version__} (CPU)", t, WALL, err, None))
    except ImportError:
        print("  opencv: not installed, skipped", file=sys.stderr)

    from scipy import ndimage

    def sp():
        x = img[..., :3].astype(np.float32) / 255
        blur = ndimage.gaussian_filter(x, SIGMA, radius=RADIUS, mode="nearest", axes=(0, 1))
        blur2 = ndimage.gaussian_filter(blur, SIGMA, radius=RADIUS, mode="nearest",
                                        axes=(0, 1))
        sharp = np.clip(blur + AMOUNT * (blur - blur2), 0, 1)
        return np.rint(sharp @ BT601.astype(np.float32) * 255)

    t = wall_time(sp, warmup=0, repeat=max(1, repeat // 3))
    rows.append((case, "scipy.ndimage (CPU, f32)", t, WALL, np.abs(sp() - ours).max(), None))

    torch = peers().get("torch")
    if torch is not None:
        import torch.nn.functional as F

        x = torch.from_numpy(img).cuda().permute(2, 0, 1)[None].contiguous()
        d = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float32, device="cuda")
        g = torch.exp(-d * d / (2 * SIGMA * SIGMA))
        g = g / g.sum()
        kx = g.view(1, 1, 1, -1).repeat(4, 1, 1, 1)
        ky = g.view(1, 1, -1, 1).repeat(4, 1, 1, 1)
        w = torch.tensor(list(BT601) + [0.0], device="cuda").view(1, 4, 1, 1)

        def gauss(t_):
            t_ = F.conv2d(F.pad(t_, (RADIUS, RADIUS, 0, 0), mode="replicate"), kx, groups=4)
            return F.conv2d(F.pad(t_, (0, 0, RADIUS, RADIUS), mode="replicate"), ky, groups=4)

        def th():
            f = x.float() / 255
            blur = torch.round(gauss(f) * 255) / 255
            sharp = torch.clamp(blur + AMOUNT * (blur - gauss(blur)), 0, 1)
            return torch.round((sharp * w).sum(1) * 255).to(torch.uint8)

        t = cuda_time(torch, th, repeat=repeat)
        err = np.abs(th()[0].cpu().numpy().astype(np.float64) - ours).max()
        rows.append((case, f"torch {torch.__version__} conv2d", t, "cuda-event", err,
                     peer_wall(torch, th)))
    for case_, impl, t, how, err, wall in rows:
        if case_ == case:
            res.add(case, impl, t, timing=how, note=_mpix(mpix, t, wall),
                    max_rel_err=None if err is None else err / 255, wall=wall)


def _mpix(mpix: float, t: float, wall) -> str:
    return f"{mpix / t:,.0f} Mpix/s" + (f", user loop {mpix / wall:,.0f}" if wall else "")


def bench_gauss5(res: Results, n: int, repeat: int, rows: list) -> None:
    from scipy import ndimage

    import wgcompute as wgc

    rng = np.random.default_rng(1)
    x = rng.random((n, n), dtype=np.float32)
    case = f"{n}x{n} f32 gaussian 5x5 sigma {SIGMA} clamp"
    mpix = n * n / 1e6
    src, out = wgc.from_numpy(x), wgc.empty(x.shape, "f32")
    params = {"radius": G5_RADIUS, "sigma": SIGMA, "mode": "clamp"}
    wall = queued_wall(lambda: wgc.run_kernel_async("gaussian_blur", [src], out, params))
    d = bound("gaussian_blur", [src], out, params)
    if d is not None:
        t, how = gpu_time(None, record_pass=d.encode, warmup=2, repeat=repeat)
    else:
        t, how = wall, WALL
    ref = ndimage.gaussian_filter(x.astype(np.float64), SIGMA, radius=G5_RADIUS,
                                  mode="nearest")
    here = [(case, "wgcompute", t, how, max_rel_err(out.to_numpy(), ref), wall)]
    try:
        import cv2

        cv = lambda: cv2.GaussianBlur(x, (5, 5), SIGMA, borderType=cv2.BORDER_REPLICATE)
        here.append((case, f"opencv {cv2.__version__} (CPU)", wall_time(cv, 1, repeat), WALL,
                     max_rel_err(cv(), ref), None))
    except ImportError:
        pass
    sp = lambda: ndimage.gaussian_filter(x, SIGMA, radius=G5_RADIUS, mode="nearest")
    here.append((case, "scipy.ndimage (CPU)", wall_time(sp, 0, max(1, repeat // 2)), WALL,
                 max_rel_err(sp(), ref), None))
    p = peers()
    if "torch" in p:
        torch = p["torch"]
        import torch.nn.functional as F

        xt = torch.from_numpy(x).cuda()[None, None]
        dd = torch.arange(-G5_RADIUS, G5_RADIUS + 1, dtype=torch.float32, device="cuda")
        g = torch.exp(-dd * dd / (2 * SIGMA * SIGMA))
        g = g / g.sum()
        k2 = (g[:, None] * g[None, :])[None, None]
        th = lambda: F.conv2d(F.pad(xt, (G5_RADIUS,) * 4, mode="replicate"), k2)
        here.append((case, f"torch {torch.__version__} conv2d", cuda_time(torch, th,
                     repeat=repeat), "cuda-event", max_rel_err(th()[0, 0].cpu().numpy(), ref),
                     peer_wall(torch, th)))
    if "cupy" in p:
        cp = p["cupy"]
        from cupyx.scipy import ndimage as cnd

        xc = cp.asarray(x)
        cf = lambda: cnd.gaussian_filter(xc, SIGMA, truncate=G5_RADIUS / SIGMA, mode="nearest")
        here.append((case, f"cupy {cp.__version__} ndimage", cuda_time(cp, cf, repeat=repeat),
                     "cuda-event", max_rel_err(cp.asnumpy(cf()), ref), peer_wall(cp, cf)))
    for case_, impl, t, how, err, wall in here:
        res.add(case_, impl, t, timing=how, note=_mpix(mpix, t, wall), max_rel_err=err,
                wall=wall)
    rows.extend(here)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096, help="image side (4096)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="512x512 images (lavapipe)")
    ap.add_argument("--json", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.small:
        args.size = min(args.size, 512)
    env = env_info()
    print(f"device: {env['device']} ({env['backend']}), peers: {env['peers'] or 'none'}")
    res = Results("image kernels (Mpix/s; 'wgcompute at' = wgcompute's speed vs that row)")
    rows: list = []
    bench_pipeline(res, args.size, args.repeat, rows)
    bench_gauss5(res, args.size, args.repeat, rows)
    print(res.markdown())
    print()
    ours = {r.case: r for r in res.rows if r.impl == "wgcompute"}
    for r in res.rows:
        if r.impl != "wgcompute":
            ratio = r.seconds / ours[r.case].seconds
            print(f"  {r.case}: wgcompute is {ratio:.2f}x {r.impl}")
    timing = {r.timing for r in res.rows if r.impl == "wgcompute"}
    if GPU_TS not in timing:
        print("  (wgcompute timed by wall clock: this adapter has no timestamp queries)")
    if args.json:
        res.write_json(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
