"""Pattern 3, triple buffering with three streams: upload batch i, compute batch i-1 and
download batch i-2 at the same time, over three slots of GPU buffers. Events carry the
dependencies: a batch is computed after its upload, downloaded after its compute, and a
slot is refilled only after the batch that used it three steps ago moved on."""

from _common import FMA, PARAMS, check, make_batch, now, parse_args, report, warm_up

import wgcompute as wgc
from wgcompute import Timeline

SLOTS = 3


def main():
    args = parse_args(__doc__)
    n, count = args.size, args.batches
    ins = [wgc.empty(n, "f32") for _ in range(SLOTS)]
    outs = [wgc.empty(n, "f32") for _ in range(SLOTS)]
    warm_up(ins, outs)
    tl = Timeline()
    up = wgc.create_stream("upload", timeline=tl)
    comp = wgc.create_stream("compute", timeline=tl)
    down = wgc.create_stream("download", timeline=tl)
    uploaded, computed, downloaded = {}, {}, {}
    data, reads = {}, {}
    t0 = now()
    for step in range(count + 2):
        i = step  # upload batch i
        if i < count:
            with tl.span(i, "load"):
                data[i] = make_batch(i, n)  # kept alive until its upload is done
            if i >= SLOTS:
                up.wait_event(computed[i - SLOTS])  # ins[i % 3] was last read by batch i-3
            up.write(ins[i % SLOTS], data[i], batch=i)
            uploaded[i] = up.record_event()
        j = step - 1  # compute batch j
        if 0 <= j < count:
            comp.wait_event(uploaded[j])
            if j >= SLOTS:
                comp.wait_event(downloaded[j - SLOTS])  # outs[j % 3] read back by batch j-3
            comp.run_kernel(FMA, [ins[j % SLOTS]], outs[j % SLOTS], PARAMS, batch=j)
            computed[j] = comp.record_event()
        k = step - 2  # download batch k
        if 0 <= k < count:
            down.wait_event(computed[k])
            reads[k] = down.download(outs[k % SLOTS], batch=k)
            downloaded[k] = down.record_event()
    results = [reads[k].wait() for k in range(count)]
    for s in (up, comp, down):
        s.sync()
    total = now() - t0
    check(results, n, "triple buffering")
    report("03_triple_buffer", tl, args, total)


if __name__ == "__main__":
    main()
