"""Pattern 2, double buffering: an upload stream fills buffer (i+1) % 2 while the compute
stream works on buffer i % 2. Events order the two streams: compute waits for its batch's
upload, and an upload waits until the compute that last read its buffer was submitted."""

from _common import FMA, PARAMS, check, make_batch, now, parse_args, report, warm_up

import wgcompute as wgc
from wgcompute import Timeline


def main():
    args = parse_args(__doc__)
    n, count = args.size, args.batches
    ins = [wgc.empty(n, "f32") for _ in range(2)]
    outs = [wgc.empty(n, "f32") for _ in range(2)]
    warm_up(ins, outs)
    tl = Timeline()
    upload = wgc.create_stream("upload", timeline=tl)
    compute = wgc.create_stream("compute", timeline=tl)

    def load(i):
        with tl.span(i, "load"):
            return make_batch(i, n)

    t0 = now()
    pending = [load(0)]  # the stream reads the array later: keep it alive
    upload.write(ins[0], pending[0], batch=0)
    uploaded = upload.record_event()
    done = None
    downloads = []
    for i in range(count):
        compute.wait_event(uploaded)  # batch i is in ins[i % 2]
        compute.run_kernel(FMA, [ins[i % 2]], outs[i % 2], PARAMS, batch=i)
        downloads.append(compute.download(outs[i % 2], batch=i))
        computed = compute.record_event()
        if i + 1 < count:
            data = load(i + 1)  # host work overlaps the GPU's batch i
            pending.append(data)
            if done is not None:
                upload.wait_event(done)  # ins[(i+1) % 2] was read by batch i-1
            upload.write(ins[(i + 1) % 2], data, batch=i + 1)
            uploaded = upload.record_event()
        done = computed
    results = [d.wait() for d in downloads]
    upload.sync()
    compute.sync()
    total = now() - t0
    check(results, n, "double buffering")
    report("02_double_buffer", tl, args, total)


if __name__ == "__main__":
    main()
