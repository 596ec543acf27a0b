"""Run the test suite as a few pytest runs in a row, each with fresh worker processes.

Why: lavapipe (Mesa's CPU Vulkan) keeps the memory of every compute pipeline a process ever
compiled, even after the pipeline and its device are released (measured: ~0.25 MB for a small
shader, over 1 MB for a tiled matmul). One process that runs the whole suite compiles
thousands of pipelines and grows past 3 GB; a round of a quarter of the files stays near one.

    python scripts/pytest_rounds.py --rounds 4 -- python -m pytest -q -n 2 [pytest args]

Files are dealt to the rounds largest first, so that each round gets a similar mix. Every
round runs even after one failed; the exit status is the first failing round's. Arguments
after ``--`` that name test files or folders restrict the run to them."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


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


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: pytest_rounds.py [--rounds N] -- PYTEST COMMAND [ARGS]", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="pytest runs in a row (default 4)")
    opts = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    paths = [a for a in command if a.endswith(".py") or Path(a).is_dir()]
    args = [a for a in command if a not in paths]
    hands = deal(test_files(paths), opts.rounds)
    status, start = 0, time.monotonic()
    for i, hand in enumerate(hands, 1):
        print(f"=== round {i} of {len(hands)}: {len(hand)} test files", flush=True)
        rc = subprocess.call(args + [str(f) for f in hand])
        if rc not in (0, 5) and status == 0:  # 5: every test deselected (e.g. -m "not slow")
            status = rc
    verdict = "all passed" if status == 0 else f"FAILED (exit status {status})"
    print(f"=== {len(hands)} rounds in {time.monotonic() - start:.0f} s: {verdict}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
