"""scripts/pytest_rounds.py, which `make test` runs: how it deals the suite's files into
rounds, and the one-worker round of the files that each hold over a gigabyte."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("pytest_rounds",
                                               ROOT / "scripts" / "pytest_rounds.py")
rounds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rounds)


def test_every_file_runs_once_and_the_big_ones_last_each_alone():
    files = rounds.test_files([])
    plan = rounds.plan(files, 8)
    seen = [f for hand, _ in plan for f in hand]
    split = [f for f in files if f.name in rounds.SPLIT]
    # every file once, each SPLIT file once per dealt round (a shard each)
    assert sorted(f for f in seen if f not in split) == sorted(f for f in files
                                                                if f not in split)
    n_big = sum(f.name in rounds.BIG for f in files)
    dealt, solo, big = plan[:-n_big - 1], plan[-n_big - 1], plan[-n_big:]
    # each big file alone in a round (a process of its own), after everything else
    assert [len(hand) for hand, _ in big] == [1] * n_big
    assert {hand[0].name for hand, _ in big} == set(rounds.BIG)
    assert {f.name for f in solo[0]} == {f.name for f in files if f.name in rounds.SOLO}
    for hand, shards in dealt:
        assert not {f.name for f in hand} & (set(rounds.BIG) | set(rounds.SOLO))
        assert shards.count("=") == len(split)


def test_the_big_round_runs_one_worker():
    command = ["python", "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile"]
    assert rounds.one_worker(command) == ["python", "-m", "pytest", "-q", "-n", "1", "--dist",
                                          "loadfile"]
    assert rounds.one_worker(["python", "-m", "pytest"]) == ["python", "-m", "pytest"]


def test_the_sampler_sums_the_memory_of_a_process_tree():
    import os

    import psutil

    me = psutil.Process(os.getpid())
    assert rounds._tree_pss(me) >= me.memory_full_info().pss > 0


def test_big_with_rest_deals_the_big_files_with_the_others():
    files = rounds.test_files([])
    plan = rounds.plan(files, 3, big_alone=False)
    assert len(plan) == 4  # three dealt rounds, then the files that start processes
    seen = [f.name for hand, _ in plan[:3] for f in hand]
    assert set(rounds.BIG) <= set(seen)
    assert {f.name for f in plan[-1][0]} == set(rounds.SOLO)
