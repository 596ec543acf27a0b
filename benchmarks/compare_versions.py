"""The table of compare_versions.sh: for every wgcompute row of the benchmark JSONs of both
versions, the median over rounds of each version and the new/old ratio, on the wall clock of
a user's loop where the row has one and on its primary time otherwise. Lower is better
everywhere (times); a ratio above 1.03 is flagged: the refactored core must stay within 3%.

    python -m benchmarks.compare_versions RAW_DIR [--md PATH] [--json PATH]

RAW_DIR holds {old,new}-{round}-{benchmark}.json files written by the benchmarks' --json."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys

from benchmarks.harness import Results

LIMIT = 1.03


def collect(raw_dir: str) -> dict:
    """{(benchmark, case, impl): {"old": [seconds...], "new": [...], "kind": ...}}"""
    table: dict = {}
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.json"))):
        m = re.match(r"(old|new)-(\d+)-(\w+)\.json$", os.path.basename(path))
        if not m:
            continue
        version, _round, bench = m.groups()
        res = Results.load(path)
        for r in res.rows:
            if not r.impl.startswith("wgcompute"):
                continue
            impl = r.impl + (f" ({r.note})" if r.note and not r.note.startswith("tile ")
                             else "")
            wall = r.wall_seconds()
            key = (bench, r.case, impl)
            e = table.setdefault(key, {"old": [], "new": [], "gpu_old": [], "gpu_new": [],
                                       "kind": "wall, user loop" if wall else r.timing})
            e[version].append(wall or r.seconds)
            if wall and r.timing != "wall":
                e["gpu_" + version].append(r.seconds)
    return table


def summarize(table: dict) -> tuple[str, list[dict]]:
    lines = ["| benchmark | case | impl | compared on | old (median) | new (median) | new/old "
             "| GPU time new/old |", "|---|---|---|---|---:|---:|---:|---:|"]
    rows = []
    for (bench, case, impl), e in sorted(table.items()):
        if not e["old"] or not e["new"]:
            continue
        o, n = statistics.median(e["old"]), statistics.median(e["new"])
        g = (statistics.median(e["gpu_new"]) / statistics.median(e["gpu_old"])
             if e["gpu_old"] and e["gpu_new"] else None)
        ratio = n / o if o > 0 else float("nan")
        rows.append({"benchmark": bench, "case": case, "impl": impl, "kind": e["kind"],
                     "old": o, "new": n, "ratio": ratio, "gpu_ratio": g,
                     "runs": (len(e["old"]), len(e["new"]))})
        flag = " **(> 3%)**" if ratio > LIMIT else ""
        lines.append(f"| {bench} | {case} | {impl} | {e['kind']} | {_t(o)} | {_t(n)} | "
                     f"{ratio:.3f}{flag} | {'' if g is None else f'{g:.3f}'} |")
    worse = [r for r in rows if r["ratio"] > LIMIT]
    lines += ["", f"{len(rows)} rows compared; {len(worse)} more than 3% slower in the new "
              f"version" + (": " + "; ".join(f"{r['case']} / {r['impl']} {r['ratio']:.3f}"
                                              for r in worse) if worse else ".")]
    return "\n".join(lines), rows


def _t(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw_dir")
    ap.add_argument("--md", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    md, rows = summarize(collect(args.raw_dir))
    print(md)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(md + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
