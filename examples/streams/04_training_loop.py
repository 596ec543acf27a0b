"""Pattern 4, a training loop: linear regression by SGD on the GPU. The upload stream
prefetches batch t+1 (X, X transposed, y) into the other slot while the compute stream runs
step t, one wgc.Pipeline per slot: pred = X w; r = pred - y; g = Xt r; w' = w - (2 lr / B) g.
The weights never leave the GPU until the end, where they are checked against numpy."""

import numpy as np
from _common import now, parse_args, report

import wgcompute as wgc
from wgcompute import Timeline

FEATURES = 32
LR = 0.2
EPOCHS = 2


def load(step: int, rows: int, w_true: np.ndarray):
    """Batch ``step``: inputs, their transpose (host work, like any data loader) and
    targets with a little noise."""
    rng = np.random.default_rng(step % 1000)
    x = rng.standard_normal((rows, FEATURES)).astype(np.float32)
    y = (x @ w_true + 0.01 * rng.standard_normal((rows, 1))).astype(np.float32)
    return x, np.ascontiguousarray(x.T), y


def build_step(x, xt, y, w, w_next, rows) -> wgc.Pipeline:
    p = wgc.pipeline(f"sgd-step->{w_next.label}")
    p.add(kernel="matmul", inputs=[x, w])
    p.add(kernel="elementwise_sub", inputs=[p.stages[0]["output"], y])
    p.add(kernel="matmul", inputs=[xt, p.stages[1]["output"]])
    p.add(kernel="scale", inputs=[p.stages[2]["output"]], params={"scalar": 2 * LR / rows})
    p.add(kernel="elementwise_sub", inputs=[w, p.stages[3]["output"]], output=w_next)
    return p


def main():
    args = parse_args(__doc__)
    rows = max(64, args.size // FEATURES)
    steps = EPOCHS * args.batches
    w_true = np.linspace(-1, 1, FEATURES, dtype=np.float32).reshape(FEATURES, 1)
    slots = [(wgc.empty((rows, FEATURES)), wgc.empty((FEATURES, rows)), wgc.empty((rows, 1)))
             for _ in range(2)]
    ws = [wgc.empty((FEATURES, 1), label="w0"), wgc.empty((FEATURES, 1), label="w1")]
    # Step t reads slot t % 2 and weights ws[t % 2], writes ws[(t + 1) % 2].
    steps_p = [build_step(*slots[s], ws[s], ws[1 - s], rows) for s in range(2)]
    tl = Timeline()
    up = wgc.create_stream("upload", timeline=tl)
    comp = wgc.create_stream("compute", timeline=tl)

    def prefetch(t):
        with tl.span(t, "load"):
            batch = load(t, rows, w_true)
        for buf, arr in zip(slots[t % 2], batch, strict=True):
            up.write(buf, arr, batch=t)
        return batch, up.record_event()

    t0 = now()
    held, ready = {}, {}
    held[0], ready[0] = prefetch(0)
    stepped = None
    for t in range(steps):
        comp.wait_event(ready.pop(t))
        comp.run(steps_p[t % 2], batch=t)
        done = comp.record_event()
        if t + 1 < steps:
            if stepped is not None:
                up.wait_event(stepped)  # slot (t+1) % 2 was read by step t-1
            held[t + 1], ready[t + 1] = prefetch(t + 1)
        stepped = done
        held.pop(t - 1, None)  # batch t-1's arrays were copied long ago
    w_gpu = comp.download(ws[steps % 2]).wait()
    up.sync()
    comp.sync()
    total = now() - t0

    w = np.zeros((FEATURES, 1), np.float32)
    for t in range(steps):
        x, xt, y = load(t, rows, w_true)
        w = w - np.float32(2 * LR / rows) * (xt @ (x @ w - y))
    err = np.abs(w_gpu - w).max()
    print(f"{steps} SGD steps on {rows}x{FEATURES} batches: |w_gpu - w_numpy| = {err:.2e}, "
          f"|w_gpu - w_true| = {np.abs(w_gpu - w_true).max():.3f}")
    if not np.allclose(w_gpu, w, rtol=1e-3, atol=1e-4):
        raise SystemExit("training loop: GPU weights differ from the numpy run")
    report("04_training_loop", tl, args, total)


if __name__ == "__main__":
    main()
