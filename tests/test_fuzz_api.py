"""A hypothesis state machine over the public API, checked step by step against a numpy
model: buffers made every way (the dtype matrix, odd shapes, empty ones), kernels run
synchronously and asynchronously, pipelines, streams, reads, writes, frees, and use after
free. Every read is compared exactly with the model (within a tolerance only where the GPU
rounds differently: sums and matmul).

CI runs a fixed, derandomized set of programs; ``WGCOMPUTE_FUZZ_EXAMPLES=5000`` (and
``WGCOMPUTE_FUZZ_STEPS``) runs more on demand."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
)

import wgcompute as wgc

EXAMPLES = int(os.environ.get("WGCOMPUTE_FUZZ_EXAMPLES", "40"))
STEPS = int(os.environ.get("WGCOMPUTE_FUZZ_STEPS", "40"))

DTYPES = ["f32", "f64", "f16", "s32", "s64", "u32", "u8"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "s32": np.int32,
      "s64": np.int64, "u32": np.uint32, "u8": np.uint8}
# dtypes the model's kernels run in (exact in numpy and on the GPU for these ops)
KERNEL_DTYPES = ["f32", "s32"]
STATS = {"programs": 0, "steps": 0, "checks": 0}

dims = st.one_of(st.integers(0, 7), st.sampled_from([0, 1, 31, 257, 1000, 4097]))
shapes = st.lists(dims, min_size=1, max_size=3).map(tuple).filter(
    lambda s: int(np.prod(s)) <= 20_000)


def values(dt: str, shape, draw_seed: int) -> np.ndarray:
    """Values every dtype holds exactly and whose sums/products stay exact (no denormals,
    no overflow): small integers, halves for floats."""
    rng = np.random.default_rng(draw_seed)
    lo, hi = (0, 100) if dt in ("u32", "u8") else (-100, 100)
    a = rng.integers(lo, hi, size=shape)
    if dt in ("f32", "f64", "f16"):
        a = a / 2
    return a.astype(NP[dt])


class Item:
    """A live buffer and what the model says it holds."""

    def __init__(self, buf: wgc.Buffer, model: np.ndarray):
        self.buf = buf
        self.model = model

    def __repr__(self) -> str:
        return f"Item({self.buf.dtype} {self.buf.shape})"


class APIMachine(RuleBasedStateMachine):
    items = Bundle("items")
    freed = Bundle("freed")

    def __init__(self):
        super().__init__()
        self.pending: list[tuple[wgc.Command, Item]] = []
        self.stream: wgc.Stream | None = None
        self.live = []
        self.log: list[str] = []
        self.stream_dirty = False
        STATS["programs"] += 1

    def _step(self, *what):
        STATS["steps"] += 1
        self.log.append(" ".join(map(str, what)))
        # Work given to a stream is ordered against this thread's work only by a sync (as
        # the docs tell users): settle it before the next step touches the same buffers.
        if self.stream_dirty:
            self.stream.sync()
            self.stream_dirty = False

    def _check(self, item: Item, got: np.ndarray, tol: float = 0.0):
        STATS["checks"] += 1
        assert got.dtype == item.model.dtype and got.shape == item.model.shape, \
            (got.dtype, got.shape, item.model.dtype, item.model.shape)
        try:
            if tol:
                np.testing.assert_allclose(got, item.model, rtol=tol, atol=tol)
            else:
                np.testing.assert_array_equal(got, item.model)
        except AssertionError as e:
            e.add_note(f"{item!r} id={item.buf._id}; steps so far:\n  " + "\n  ".join(self.log))
            raise

    def _new(self, buf, model) -> Item:
        it = Item(buf, model)
        self.live.append(it)
        return it

    # -- making buffers ----------------------------------------------------------------------
    @rule(target=items, dt=st.sampled_from(DTYPES), shape=shapes, seed=st.integers(0, 2**16),
          how=st.sampled_from(["buffer", "buffer_list", "from_numpy", "upload",
                               "buffer_from_binary", "stream_upload"]))
    def create(self, dt, shape, seed, how):
        self._step("create", dt, shape, how)
        a = values(dt, shape, seed)
        if how == "buffer":
            b = wgc.buffer(a)
        elif how == "buffer_list":
            b = wgc.buffer(a.tolist(), shape=shape, dtype=dt)
        elif how == "from_numpy":
            b = wgc.from_numpy(a)
        elif how == "upload":
            b = wgc.upload(a)
        elif how == "buffer_from_binary":
            b = wgc.buffer_from_binary(a.tobytes(), shape, dt)
        else:
            b = self._stream().upload(a)
            self.stream.sync()
        assert b.shape == shape and b.dtype == dt
        return self._new(b, a.copy())

    @rule(target=items, dt=st.sampled_from(DTYPES), shape=shapes)
    def zeros(self, dt, shape):
        self._step("zeros", dt, shape)
        return self._new(wgc.empty(shape, dt), np.zeros(shape, NP[dt]))

    # -- reading -----------------------------------------------------------------------------
    @rule(item=items, how=st.sampled_from(["to_numpy", "read", "tolist", "read_async",
                                           "stream", "wgc.to_numpy"]))
    def read(self, item, how):
        self._step("read", item, item.buf._id, how)
        b = item.buf
        if how == "to_numpy":
            got = b.to_numpy()
        elif how == "wgc.to_numpy":
            got = wgc.to_numpy(b)
        elif how == "read":
            got = np.frombuffer(b.read(), NP[b.dtype]).reshape(b.shape)
        elif how == "tolist":
            got = np.array(b.tolist(), NP[b.dtype]).reshape(b.shape)
        elif how == "read_async":
            got = b.read_async().wait()
        else:
            got = self._stream().download(b).wait()
        self._check(item, got)

    # -- writing -----------------------------------------------------------------------------
    @rule(item=items, seed=st.integers(0, 2**16),
          how=st.sampled_from(["write", "write_async", "stream", "bytes"]))
    def write(self, item, seed, how):
        self._step("write", item, item.buf._id, how)
        a = values(item.buf.dtype, item.buf.shape, seed)
        if how == "write":
            item.buf.write(a)
        elif how == "write_async":
            item.buf.write_async(a).wait()
        elif how == "bytes":
            item.buf.write(a.tobytes())
        else:
            self._stream().write(item.buf, a)
            self.stream.sync()
        item.model = a.copy()

    # -- kernels -----------------------------------------------------------------------------
    @rule(target=items, item=items, kernel=st.sampled_from(["relu", "scale", "add", "square"]),
          mode=st.sampled_from(["sync", "async", "submit", "stream"]))
    def kernel(self, item, kernel, mode):
        self._step("kernel", item, item.buf._id, kernel, mode)
        x = item.buf
        if x.dtype not in KERNEL_DTYPES:
            return multiple()
        if kernel == "relu":
            name, inputs, params, want = "relu", [x], None, np.maximum(item.model, 0)
        elif kernel == "scale":
            s = 3 if x.dtype == "s32" else 0.5
            name, inputs, params = "scale", [x], {"scalar": s}
            want = (item.model * NP[x.dtype](s)).astype(NP[x.dtype])
        elif kernel == "add":
            name, inputs, params, want = "elementwise_add", [x, x], None, item.model + item.model
        else:
            name, inputs, params, want = ("elementwise_multiply", [x, x], None,
                                          item.model * item.model)
        if mode == "sync":
            return self._new(wgc.run_kernel(name, inputs, None, params), want)
        out = wgc.empty(x.shape, x.dtype)  # given, so the result is known before it is ready
        if mode == "async":
            cmd = wgc.run_kernel_async(name, inputs, out, params)
        elif mode == "submit":
            cmd = wgc.submit({"op": "run_kernel", "kernel": name, "inputs": inputs,
                              "output": out, "params": params})
        else:
            cmd = self._stream().run_kernel(name, inputs, out, params)
            self.stream_dirty = True
        new = self._new(out, want)
        self.pending.append((cmd, new))
        return new

    @rule(item=items)
    def reduce(self, item):
        self._step()
        x = item.buf
        if x.dtype != "f32" or x.ndim == 0 or x.shape[-1] == 0:
            return
        got = wgc.reduce_sum(x).to_numpy()  # along the last axis
        want = item.model.astype(np.float64).sum(axis=-1)
        STATS["checks"] += 1
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
        got = wgc.reduce_max(x).to_numpy()
        STATS["checks"] += 1
        np.testing.assert_array_equal(got, item.model.max(axis=-1))

    @rule(target=items, n=st.integers(1, 9), k=st.integers(1, 9), m=st.integers(1, 9),
          seed=st.integers(0, 2**16))
    def matmul(self, n, k, m, seed):
        self._step()
        a, b = values("f32", (n, k), seed), values("f32", (k, m), seed + 1)
        out = wgc.matmul(wgc.from_numpy(a), wgc.from_numpy(b))
        it = Item(out, (a.astype(np.float64) @ b).astype(np.float32))
        STATS["checks"] += 1
        np.testing.assert_allclose(out.to_numpy(), it.model, rtol=1e-5, atol=1e-3)
        self.live.append(it)
        return it

    # -- pipelines ---------------------------------------------------------------------------
    @rule(target=items, item=items, stages=st.lists(st.sampled_from(["relu", "scale", "neg"]),
                                                    min_size=1, max_size=4),
          mode=st.sampled_from(["run", "submit", "stream", "twice"]))
    def pipeline(self, item, stages, mode):
        self._step("pipeline", item, item.buf._id, stages, mode)
        if item.buf.dtype != "f32":
            return multiple()
        p = wgc.pipeline()
        cur, want = item.buf, item.model
        for s in stages:
            if s == "relu":
                p.add(kernel="relu", inputs=[cur])
                want = np.maximum(want, 0)
            else:
                scalar = 0.5 if s == "scale" else -1.0
                p.add(kernel="scale", inputs=[cur], params={"scalar": scalar})
                want = want * np.float32(scalar)
            cur = p.stages[-1]["output"]
        if mode == "run":
            p.run()
        elif mode == "submit":
            p.submit().wait()
        elif mode == "twice":
            p.run()
            p.run()
        else:
            self._stream().run(p)
            self.stream.sync()
        return self._new(cur, want.astype(np.float32))

    # -- commands ----------------------------------------------------------------------------
    @precondition(lambda self: self.pending)
    @rule()
    def wait_all(self):
        self._step("wait_all")
        for cmd, it in self.pending:
            assert cmd.wait() is it.buf
            assert wgc.poll(cmd) == "completed" and cmd.done()
            self._check(it, it.buf.to_numpy())
        self.pending.clear()

    # -- freeing -----------------------------------------------------------------------------
    @rule(target=freed, item=consumes(items))
    def free(self, item):
        self._step("free", item, item.buf._id)
        for cmd, it in list(self.pending):
            if it is item:  # freed while its command may run: the result must still land
                cmd.wait()
                self.pending.remove((cmd, it))
        item.buf.free()
        assert item.buf.freed
        self.live.remove(item)
        return item.buf

    @rule(buf=freed, how=st.sampled_from(["to_numpy", "write", "relu", "read_async", "stream",
                                          "pipeline", "free", "submit"]))
    def use_after_free(self, buf, how):
        self._step()
        if how == "free":
            buf.free()  # harmless
            return
        with pytest.raises(wgc.WgComputeError) as e:
            if how == "to_numpy":
                buf.to_numpy()
            elif how == "write":
                buf.write(np.zeros(buf.shape, NP[buf.dtype]))
            elif how == "relu":
                wgc.run_kernel("relu", [buf])
            elif how == "read_async":
                buf.read_async()
            elif how == "stream":
                self._stream().download(buf)
            elif how == "submit":
                wgc.submit({"op": "run_kernel", "kernel": "relu", "inputs": [buf]})
            else:
                wgc.pipeline().add(kernel="relu", inputs=[buf])
        err = e.value
        cause = getattr(err, "cause", None)
        assert isinstance(err, wgc.BufferFreedError) or isinstance(cause, wgc.BufferFreedError), \
            f"{how} on a freed buffer raised {type(err).__name__}: {err}"

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def counts(self):
        assert not any(it.buf.freed for it in self.live)
        assert wgc.live_buffers() >= len(self.live)

    def _stream(self) -> wgc.Stream:
        if self.stream is None:
            self.stream = wgc.create_stream("fuzz")
        return self.stream

    def teardown(self):
        for cmd, _ in self.pending:
            cmd.wait()
        if self.stream is not None:
            self.stream.close()
        for it in self.live:
            it.buf.free()


APIMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, derandomize=True, deadline=None,
    database=None, suppress_health_check=list(HealthCheck), print_blob=True)
TestAPI = APIMachine.TestCase
