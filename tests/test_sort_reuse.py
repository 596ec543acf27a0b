"""A repeated sort of one shape reuses what its first call made: after warm-up, xp.sort and
xp.argsort create no GPU buffer, uniform or bind group
(their temporaries come from the device's memory pool and stay bound), and their results
still equal numpy's (np.sort, stable np.argsort) with nan and -0.0, int32, rows."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute import _lazy

CREATED = ("buffers_created", "uniform_buffers_created", "bind_groups_created")


def _created(dev) -> dict:
    return {k: dev.stats[k] for k in CREATED}


def _floats(shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[::7] = np.nan
    flat[1::11] = -0.0
    flat[2::13] = 0.0
    flat[3::17] = 1.5  # duplicates: the order of equal elements is checked
    return a


def _loop(fn, x, calls):
    """Call ``fn(x)`` ``calls`` times the way a user's loop does (the previous result alive
    while the next is made) and return the results as numpy arrays."""
    got, prev = [], None
    for _ in range(calls):
        r = fn(x)
        got.append(r.to_numpy())
        prev = r  # noqa: F841 - held, as `r = xp.sort(x)` in a loop holds it
    return got


@pytest.mark.parametrize("case", ["f32", "s32", "f32-rows", "f32-desc"])
@pytest.mark.parametrize("which", ["sort", "argsort"])
def test_repeated_sort_creates_nothing(case, which):
    rng = np.random.default_rng(7)
    shape = (4, 1500) if case.endswith("rows") else (5000,)
    a = _floats(shape, rng) if case.startswith("f32") else \
        rng.integers(-50, 50, shape).astype(np.int32)
    desc = case.endswith("desc")
    x = xp.asarray(a)
    dev = x.device
    fn = (lambda v: xp.sort(v, descending=desc)) if which == "sort" else \
        (lambda v: xp.argsort(v, descending=desc))
    _loop(fn, x, 3)  # warm-up: the result memory of two calls, the pipelines, the binding
    before = _created(dev)
    got = _loop(fn, x, 4)
    assert _created(dev) == before, f"a warm {which} made GPU objects on {dev.name}"
    key = -a if desc and a.dtype.kind != "f" else a
    if desc and a.dtype.kind == "f":  # nan first, then largest first, equal ones in order
        key = np.where(np.isnan(a), -np.inf, -a)
    want_idx = np.argsort(key, axis=-1, kind="stable")
    want = want_idx if which == "argsort" else np.take_along_axis(a, want_idx, -1)
    for g in got:
        if which == "argsort":
            np.testing.assert_array_equal(g, want)
        else:  # the elements' bits: -0.0 and +0.0 keep their order, nan goes last
            np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("which", ["sort", "argsort"])
def test_sort_into_new_memory_binds_only_the_step_writing_it(which):
    """Results held (so each sort gets memory of its own) bind one step each: the passes
    between the shared temporaries stay bound from the first sort."""
    rng = np.random.default_rng(11)
    a = _floats((30_000,), rng)
    x = xp.asarray(a)
    dev = x.device
    fn = getattr(xp, which)
    fn(x).to_numpy()  # warm-up
    before = _created(dev)
    held = [fn(x) for _ in range(3)]
    made = {k: dev.stats[k] - before[k] for k in CREATED}
    # one step bound per result at most (its memory may be new, or pooled memory not yet
    # bound to this sort); binding all of its passes again made 20 for each
    assert made["uniform_buffers_created"] <= len(held), made
    assert made["bind_groups_created"] <= len(held), made
    want = np.argsort(a, kind="stable")
    for r in held:
        got = r.to_numpy()
        if which == "argsort":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_array_equal(got.view(np.uint32), a[want].view(np.uint32))


def test_shared_temporaries_do_not_mix_queued_sorts():
    """Two sorts of one shape queued in one batch (sharing temporaries, in queue order) and a
    third of another array: each result is its own input sorted."""
    rng = np.random.default_rng(5)
    arrays = [_floats((20_000,), rng) for _ in range(3)]
    xs = [xp.asarray(a) for a in arrays]
    wgc.synchronize()
    was = _lazy.is_eager()
    _lazy.set_eager(False)
    try:
        outs = [xp.sort(x) for x in xs] + [xp.sort(xs[0])]
        got = [o.to_numpy() for o in outs]
    finally:
        _lazy.set_eager(was)
    for g, a in zip(got, arrays + arrays[:1]):
        want = np.sort(a, kind="stable")
        np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


def test_buffers_created_counts_allocations():
    dev = wgc.current_device()
    before = dev.stats["buffers_created"]
    b = wgc.empty((1000,), "f32")
    assert dev.stats["buffers_created"] == before + 1
    b.free()


@pytest.mark.parametrize("side", ["left", "right"])
def test_repeated_searchsorted_creates_nothing(side):
    rng = np.random.default_rng(13)
    a = np.sort(_floats((4000,), rng), kind="stable")
    v = _floats((700,), rng)
    x1, x2 = xp.asarray(a), xp.asarray(v)
    dev = x1.device
    fn = lambda q: xp.searchsorted(x1, q, side=side)  # noqa: E731
    _loop(fn, x2, 3)
    before = _created(dev)
    got = _loop(fn, x2, 3)
    assert _created(dev) == before, f"a warm searchsorted made GPU objects on {dev.name}"
    for g in got:
        np.testing.assert_array_equal(g, np.searchsorted(a, v, side=side))


def test_release_memory_pool_gives_back_the_shared_temporaries():
    """The temporaries a sort keeps bound (device scratch) go back with the pool's memory."""
    dev = wgc.current_device()
    x = xp.asarray(np.random.default_rng(17).standard_normal(200_000).astype(np.float32))
    dev.synchronize()
    dev.release_memory_pool()
    used = dev.memory_stats()["used"]
    r = xp.sort(x)
    r.to_numpy()
    del r
    dev.synchronize()
    assert dev.memory_stats()["used"] > used  # the temporaries, held for the next sort
    dev.release_memory_pool()
    stats = dev.memory_stats()
    assert stats["used"] == used and stats["pooled"] == 0, stats
