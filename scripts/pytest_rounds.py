"""Run the test suite as a few pytest runs in a row, each with fresh worker processes.

Why: lavapipe (Mesa's CPU Vulkan) keeps the memory of every compute pipeline a process ever
compiled, even after the pipeline and its device are released (measured: ~0.25 MB for a small
shader, over 1 MB for a tiled matmul). One process that runs the whole suite compiles
thousands of pipelines and grows past 3 GB; a round of a quarter of the files stays near one.

    python scripts/pytest_rounds.py --rounds 4 -- python -m pytest -q -n 2 [pytest args]

Files are dealt to the rounds largest first, so that each round gets a similar mix. The files
whose tests start processes that open devices of their own (worker processes, Dask clusters,
interpreters per case) run in a round of their own: beside compile-heavy files their
children pushed a round past 4.5 GB. The files whose tests each hold over a gigabyte (BIG)
run last, each in a process of its own. A file of thousands of cases (SPLIT) is run in shards,
one per round (tests/conftest.py keeps every n-th of its tests). Every round runs even after
one failed; the exit status is the first failing round's. Arguments after ``--`` that name
test files or folders restrict the run to them.

Each round's line ends with its time and its peak memory: the proportional set size (PSS:
shared pages split among the processes that map them) of the round's processes summed,
sampled every second with psutil. Summed RSS would count the Vulkan driver and LLVM once per
worker."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

TESTS = Path(__file__).resolve().parent.parent / "tests"
# files whose tests start processes with devices of their own: a round of their own, last
SOLO = ("test_multi_process.py", "test_dask.py", "test_edges_cli_dask.py", "test_sklearn.py",
        "test_infer_cli.py")
# files whose tests hold over 1 GB at once (buffers past the binding limit, whole models; on
# lavapipe a GPU buffer is host memory): a round each, with one worker, so that no two of
# them, and nothing else, run beside each other or in one process (alone: 2.43, 2.17, 1.16,
# 1.15 and 1.22 GB of PSS; the fft tests, with complex128 transforms of 2^20 points; the
# models that PyPI packages ship, 1.09 GB of RSS with onnxruntime's sessions beside them)
BIG = ("test_kernels_core.py", "test_ml_models.py", "test_broadcast.py",
       "test_reliability_core.py", "test_fft.py", "test_pypi_models.py")
# files of thousands of generated cases: one shard in each of the rounds
SPLIT = ("test_onnx_backend.py",)
SHARDS_ENV = "WGCOMPUTE_TEST_SHARDS"  # read by tests/conftest.py


def test_files(paths: list[str]) -> list[Path]:
    roots = [Path(p) for p in paths] or [TESTS]
    files: list[Path] = []
    for root in roots:
        files += [root] if root.is_file() else sorted(root.rglob("test_*.py"))
    return files


def deal(files: list[Path], rounds: int) -> list[list[Path]]:
    hands: list[list[Path]] = [[] for _ in range(max(1, min(rounds, len(files))))]
    weights = [0] * len(hands)
    for f in sorted(files, key=lambda p: p.stat().st_size, reverse=True):
        i = weights.index(min(weights))
        hands[i].append(f)
        weights[i] += f.stat().st_size
    return [sorted(h) for h in hands]


def plan(files: list[Path], rounds: int, big_alone: bool = True) -> list[tuple[list[Path], str]]:
    """(files, shards) per round: the usual files dealt, each SPLIT file in every one of
    those rounds as a shard, then the SOLO files in a round of their own, then each BIG file
    in a round of its own (run with one worker: see one_worker), unless not ``big_alone``
    (they are dealt with the usual files: a run without the tests marked slow, whose BIG
    files hold a few hundred MB)."""
    solo = [f for f in files if f.name in SOLO]
    big = [f for f in files if f.name in BIG] if big_alone else []
    split = [f for f in files if f.name in SPLIT]
    rest = [f for f in files if f not in solo and f not in split and f not in big]
    hands = deal(rest, rounds) if rest else ([[]] if split else [])
    n = len(hands)
    out = [(sorted(h + split), ",".join(f"{f.name}={i}/{n}" for f in split))
           for i, h in enumerate(hands, 1)]
    if solo:
        out.append((sorted(solo), ""))
    # one round (one process) each: a worker keeps the pipelines of every file it ran, so
    # four of them in one worker added up to 3.3 GB
    out += [([f], "") for f in sorted(big)]
    return out


def one_worker(args: list[str]) -> list[str]:
    """The pytest command with pytest-xdist's worker count (``-n N``) set to 1."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a == "-n":
            out[i + 1] = "1"
    return out


def _tree_pss(root: psutil.Process) -> int:
    """Summed PSS (bytes) of ``root`` and its descendants; processes that end meanwhile count
    nothing."""
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass  # ended between the listing and the read, or not ours to read
    return total


def run_round(command: list[str], env) -> tuple[int, int]:
    """Run one pytest round; (exit status, peak summed PSS in bytes)."""
    child = subprocess.Popen(command, env=env)
    peak, done = 0, threading.Event()

    def sample():
        nonlocal peak
        proc = psutil.Process(child.pid)
        while not done.wait(1.0):
            peak = max(peak, _tree_pss(proc))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rc = child.wait()
    done.set()
    sampler.join()
    return rc, peak


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: pytest_rounds.py [--rounds N] [--big-with-rest] -- PYTEST COMMAND [ARGS]",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="pytest runs in a row (default 4, "
                        "and one more for the files that start processes)")
    parser.add_argument("--big-with-rest", action="store_true",
                        help="deal the files whose tests hold over a gigabyte with the others "
                        "(for runs without the slow tests) instead of a round each")
    opts = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    paths = [a for a in command if a.endswith(".py") or Path(a).is_dir()]
    args = [a for a in command if a not in paths]
    rounds = plan(test_files(paths), opts.rounds, not opts.big_with_rest)
    status, start, peaks = 0, time.monotonic(), []
    for i, (hand, shards) in enumerate(rounds, 1):
        note = f" (shards {shards})" if shards else ""
        print(f"=== round {i} of {len(rounds)}: {len(hand)} test files{note}", flush=True)
        env = dict(os.environ, **{SHARDS_ENV: shards}) if shards else None
        began = time.monotonic()
        command = one_worker(args) if hand and all(f.name in BIG for f in hand) else args
        rc, peak = run_round(command + [str(f) for f in hand], env)
        print(f"=== round {i} of {len(rounds)}: {time.monotonic() - began:.0f} s, peak memory "
              f"{peak / 2**30:.2f} GB (PSS, every process of the round)", flush=True)
        peaks.append(peak)
        if rc not in (0, 5) and status == 0:  # 5: every test deselected (e.g. -m "not slow")
            status = rc
    verdict = "all passed" if status == 0 else f"FAILED (exit status {status})"
    print(f"=== {len(rounds)} rounds in {time.monotonic() - start:.0f} s, peak memory "
          f"{max(peaks, default=0) / 2**30:.2f} GB: {verdict}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
