"""Writes docs/reliability.md: what the reliability tests tried and what happened.

    python -m tests.reliability_report > docs/reliability.md

Each part runs in its own interpreter (``--part NAME`` prints JSON), so a crash is counted
as a crash instead of ending the report: the bad-input matrix (test_bad_inputs.py), the
API fuzzer (test_fuzz_api.py), threads (test_threads.py), fault scenarios (test_faults.py
and the core's, test_reliability_core.py), CLI cases (test_cli_faults.py) and leaks
(test_leaks.py). WGCOMPUTE_FUZZ_EXAMPLES sets how many programs the fuzzer runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"),
           RUST_BACKTRACE="0")


# -- parts (each runs in a subprocess and prints one JSON line) ----------------------------------
def part_matrix() -> dict:
    import test_bad_inputs as m

    rows: dict[str, dict] = {}
    for c in m.CASES:
        o = m.run_case(c)
        problem = m.judge(c, o)
        row = rows.setdefault(c.target, {"cases": 0, "right": 0, "accepted": 0, "bad": []})
        row["cases"] += 1
        if problem is None:
            row["accepted" if o.kind == "accepted" else "right"] += 1
        else:
            row["bad"].append(f"{c.id}: {problem}")
    return {"rows": rows, "accepted_table": len(m.ACCEPTED)}


def part_fuzz() -> dict:
    import test_fuzz_api as f

    t0 = time.perf_counter()
    error = None
    try:
        f.TestAPI().runTest()
    except BaseException as e:  # noqa: BLE001 - reported
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e) else ''}"
    return {**f.STATS, "examples": f.EXAMPLES, "max_steps": f.STEPS, "error": error,
            "seconds": time.perf_counter() - t0}


def part_threads() -> dict:
    import test_threads as t

    r = t.run_threads()
    r["errors"] = [f"thread {s}, op {i} ({k}): {type(e).__name__}: {e}"
                   for s, k, i, e in r["errors"]]
    return r


def _cases(cases: dict, with_tmp: bool) -> dict:
    out = {}
    for name, fn in cases.items():
        try:
            if with_tmp:
                with tempfile.TemporaryDirectory() as d:
                    out[name] = ["ok", fn(Path(d))]
            else:
                out[name] = ["ok", fn()]
        except BaseException as e:  # noqa: BLE001 - reported
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            out[name] = ["failed", f"{type(e).__name__}: {first}"]
    return out


def part_faults() -> dict:
    import test_faults as t

    return _cases(t.CASES, False)


def part_cli() -> dict:
    import test_cli_faults as t

    return _cases(t.CASES, True)


def part_leaks() -> dict:
    import test_leaks as t

    ops = t.Ops()
    out = {}
    for kind in t.KINDS + t.CORE_LEAKS:
        g = t.growth(getattr(ops, kind), warmup=t.WARMUPS.get(kind, t.WARMUP))
        out[kind] = {"ok": g.ok(), "text": str(g), "core": kind in t.CORE_LEAKS}
    ops.close()
    return out


def _pytest_cases(*files: str, prefix_file: bool = False) -> dict:
    """Run test files through pytest: {test name: [passed|failed|skipped, message]}."""
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d) / "cases.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        *(str(TESTS / f) for f in files), f"--junitxml={xml}"],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=1800)
        out = {}
        for tc in ET.parse(xml).getroot().iter("testcase"):
            name = tc.get("name")
            if prefix_file:
                name = f"{tc.get('classname', '').rsplit('.', 1)[-1]}: {name}"
            fail = tc.find("failure")
            if fail is None:
                fail = tc.find("error")
            skip = tc.find("skipped")
            if fail is not None:
                msg = " ".join(ln.strip() for ln in (fail.get("message") or "").splitlines()
                               if ln.strip())
                out[name] = ["failed", msg[:240]]
            elif skip is not None:
                out[name] = ["skipped", (skip.get("message") or "")[:200]]
            else:
                out[name] = ["passed", ""]
        return out


def part_core() -> dict:
    """test_reliability_core.py through pytest (it runs its own subprocesses)."""
    return _pytest_cases("test_reliability_core.py")


# The edges a user meets: NaN and infinities, hostile or invalid model files, ONNX fusions,
# a damaged tuning cache, Dask reductions, the CLI's and the runtime's corners.
EDGE_FILES = ("test_edges_numeric.py", "test_onnx_edges.py", "test_edges_runtime.py",
              "test_edges_cli_dask.py")


def part_edges() -> dict:
    return _pytest_cases(*EDGE_FILES, prefix_file=True)


def part_adapter() -> dict:
    import wgcompute as wgc

    info = wgc.device_info()
    return {"name": info["name"], "backend": info["backend"], "version": wgc.__version__}


PARTS = {"adapter": part_adapter, "matrix": part_matrix, "fuzz": part_fuzz,
         "threads": part_threads, "faults": part_faults, "core": part_core,
         "edges": part_edges, "cli": part_cli, "leaks": part_leaks}


def run_part(name: str) -> dict:
    """The part in a fresh interpreter: its JSON, or how the interpreter died."""
    r = subprocess.run([sys.executable, "-m", "tests.reliability_report", "--part", name],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 and not lines:
        return {"crashed": f"exit {r.returncode}: {r.stderr.strip()[-400:]}"}
    res = json.loads(lines[-1])
    if r.returncode != 0:
        res["exit"] = (f"the interpreter exited with {r.returncode} after the part "
                       f"finished")
    return res


# failure messages of test_reliability_core.py that mean the interpreter died
CRASH_WORDS = ("killed by signal", "aborted (rc", "exits failed")


# -- the page ------------------------------------------------------------------------------------
def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(p: dict) -> str:
    ad = p["adapter"]
    L = ["# Reliability", "",
         "What wgcompute's reliability tests try, and what happened on the last run. Every "
         "row is a test of the suite; this page is regenerated from them with",
         "", "```bash", "python -m tests.reliability_report > docs/reliability.md", "```", "",
         f"Last run: wgcompute {ad.get('version', '?')} on {ad.get('name', '?')} "
         f"({ad.get('backend', '?')}).", ""]
    totals = {"crashes": 0, "wrong": 0, "leaks": 0}

    def exit_note(res):
        if "crashed" in res:
            totals["crashes"] += 1
            return [f"**The interpreter crashed:** {md_escape(res['crashed'])}", ""]
        if "exit" in res:
            totals["crashes"] += 1
            return [f"**{res['exit']}.**", ""]
        return []

    # bad inputs
    m = p["matrix"]
    L += ["## Bad inputs", "",
          "Each public function and method is called with good arguments but one, which takes "
          "each bad value of its kind in turn (wrong types, shapes and dtypes, None, nan and "
          "inf, negative and huge ints, empty containers, freed buffers, dicts with non-str "
          "keys...). The right outcome is a `WgComputeError` whose message names the "
          "argument, or success where the value is in fact valid (a table of such cases, "
          "each with its reason, is kept in `tests/test_bad_inputs.py`).", ""]
    L += exit_note(m)
    if "rows" in m:
        rows = m["rows"]
        n = sum(r["cases"] for r in rows.values())
        right = sum(r["right"] for r in rows.values())
        acc = sum(r["accepted"] for r in rows.values())
        bad = [b for r in rows.values() for b in r["bad"]]
        totals["wrong"] += len(bad)
        L += [f"**{n} cases over {len(rows)} functions and methods: {right} raised the right "
              f"error, {acc} were valid and accepted, {len(bad)} went wrong.**", "",
              "| function | cases | right error | valid, accepted | wrong |",
              "|---|---:|---:|---:|---:|"]
        for name, r in sorted(rows.items()):
            L.append(f"| `{name}` | {r['cases']} | {r['right']} | {r['accepted']} | "
                     f"{len(r['bad'])} |")
        L.append("")
        for b in bad:
            L.append(f"- {md_escape(b)}")
        if bad:
            L.append("")
    # fuzz
    f = p["fuzz"]
    L += ["## Random programs", "",
          "A state machine (hypothesis) builds random programs over the public API and checks "
          "every step against a numpy model: buffers made seven ways over every dtype and odd "
          "shapes (empty ones too), kernels run synchronously, asynchronously, through "
          "`submit` and in streams, pipelines, reads and writes of every kind, frees and use "
          "after free. Results are compared exactly (sums and matmul within float "
          "tolerance).", ""]
    L += exit_note(f)
    if "programs" in f:
        if f["error"]:
            totals["wrong"] += 1
        L += ["| programs | steps | results checked | failures |", "|---:|---:|---:|---|",
              f"| {f['programs']} | {f['steps']} | {f['checks']} | "
              f"{md_escape(f['error']) if f['error'] else 'none'} |", "",
              f"({f['examples']} programs of up to {f['max_steps']} steps asked for; "
              f"hypothesis also replays and shrinks. Set WGCOMPUTE_FUZZ_EXAMPLES for more.)",
              ""]
    # threads
    t = p["threads"]
    L += ["## Threads", ""]
    L += exit_note(t)
    if "ops" in t:
        totals["wrong"] += len(t["errors"]) + t["hung"]
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(t["by_kind"].items()))
        L += ["| threads | operations | wrong results or errors | hung threads |",
              "|---:|---:|---:|---:|",
              f"| {t['threads']} | {t['ops']} | {len(t['errors'])} | {t['hung']} |", "",
              f"Mixed operations, each result compared exactly: {kinds}.", ""]
        for e in t["errors"][:10]:
            L.append(f"- {md_escape(e)}")
    # faults
    L += ["## Fault scenarios", ""]
    sections = (("Scenarios", "faults", ""),
                ("Defects of the core (test_reliability_core.py)", "core", ""),
                ("Edges: NaN and infinities, hostile model files, ONNX fusions, the tuning "
                 "cache, Dask reductions", "edges",
                 "Each case compares with numpy or onnxruntime, or checks a refusal that names "
                 "the argument: NaN through every reduction and activation (detected by its "
                 "bits, which NVIDIA's compiler cannot fold away), `%` and `//` over signed "
                 "zeros, infinities and NaN, model files that read outside their folder, fold "
                 "gigabytes of constants from a few bytes or write one value twice, bias "
                 "fusions whose shapes do not fit, malformed `autotune.json` files, f16 Dask "
                 "reductions, devices closed under busy threads, buffers freed while queued."))
    for title, key, intro in sections:
        if key not in p:
            continue
        res = p[key]
        L += [f"### {title}", ""] + ([intro, ""] if intro else [])
        L += exit_note(res)
        items = {k: v for k, v in res.items() if k not in ("crashed", "exit")}
        if not items:
            continue
        ok = sum(v[0] in ("ok", "passed") for v in items.values())
        failed = [k for k, v in items.items() if v[0] == "failed"]
        crashes = [k for k in failed if any(w in items[k][1] for w in CRASH_WORDS)]
        totals["crashes"] += len(crashes)
        totals["wrong"] += len(failed) - len(crashes)
        L += [f"{ok} of {len(items)} as they should be.", "",
              "| scenario | outcome |", "|---|---|"]
        for k, (state, text) in items.items():
            mark = {"ok": "", "passed": "passes", "skipped": "skipped: "}.get(state, "**FAILS**: ")
            L.append(f"| {md_escape(k)} | {mark}{md_escape(text)} |")
        L.append("")
    # cli
    c = p["cli"]
    L += ["## Command line (`wgcompute process`)", ""]
    L += exit_note(c)
    items = {k: v for k, v in c.items() if k not in ("crashed", "exit")}
    if items:
        totals["wrong"] += sum(v[0] != "ok" for v in items.values())
        L += ["| case | outcome |", "|---|---|"]
        for k, (state, text) in items.items():
            L.append(f"| {md_escape(k)} | {'' if state == 'ok' else '**FAILS**: '}"
                     f"{md_escape(text)} |")
        L.append("")
    # leaks
    lk = p["leaks"]
    L += ["## Leaks", "",
          "Each operation runs a warm-up, then rounds of 1,000; the table shows the growth "
          "over the last round of live wgcompute buffers, live wgpu objects "
          "(`wgpu.diagnostics`) and RSS (up to 4 MiB counts as allocator noise).", ""]
    L += exit_note(lk)
    items = {k: v for k, v in lk.items() if k not in ("crashed", "exit")}
    if items:
        totals["leaks"] += sum(not v["ok"] for v in items.values())
        L += ["| operation | growth per 1,000 | verdict |", "|---|---|---|"]
        for k, v in items.items():
            verdict = "no growth" if v["ok"] else "**LEAKS**" + (" (core)" if v["core"] else "")
            L.append(f"| `{k}` | {v['text']} | {verdict} |")
        L.append("")
    L[10:10] = ["## Summary", "",
                f"- crashes: {totals['crashes']}",
                f"- wrong outcomes (raw errors, unnamed arguments, silent acceptance, wrong "
                f"results, failed scenarios): {totals['wrong']}",
                f"- operations that leak: {totals['leaks']}", ""]
    return "\n".join(L).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=list(PARTS), help="run one part, print its JSON")
    args = ap.parse_args(argv)
    if args.part:
        sys.path.insert(0, str(TESTS))
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
        print(json.dumps(PARTS[args.part]()))
        sys.stdout.flush()
        return 0
    parts = {}
    for name in PARTS:
        t0 = time.perf_counter()
        parts[name] = run_part(name)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    sys.stdout.write(render(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
