"""ONNX's own backend test suite (onnx.backend.test, shipped in the onnx wheel) run through
wgcompute.ml.backend: each case's outcome, and the per-operator coverage table of
docs/guide/inference.md (``python -m wgcompute.ml.coverage --write docs/guide/inference.md``)."""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
import warnings
from collections import Counter, defaultdict

KINDS = ("node", "pytorch-converted", "pytorch-operator", "simple", "real")
# The "real" light models are their architectures with every weight a ConstantOfShape fill:
# a few KB that fold into up to 300 MB, over load_onnx's default cap (refused without this).
REAL_FOLDED_BYTES = 1 << 30
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"


def all_cases() -> dict:
    """Every case of the suite by name."""
    from onnx.backend.test.loader import load_model_tests

    cases = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the suite's own overflow warnings while building
        for kind in KINDS:
            for t in load_model_tests(kind=kind):
                cases[t.name] = t
    return cases


def _pb(path, type_proto):
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    if not type_proto.HasField("tensor_type"):
        return None  # sequences, optionals, maps: the library refuses these models at load
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def model_and_data(case):
    """(ModelProto, [(inputs, reference outputs)]) of a case."""
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    def arr(x):
        return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x

    if case.model is not None:  # node cases: built in memory
        return case.model, [([arr(x) for x in ins], [arr(x) for x in outs])
                            for ins, outs in case.data_sets]
    if case.model_dir is not None:
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        sets = []
        for d in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
            n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
            ins = [_pb(os.path.join(d, f"input_{i}.pb"), model.graph.input[i].type)
                   for i in range(n_in)]
            outs = [_pb(os.path.join(d, f"output_{i}.pb"), model.graph.output[i].type)
                    for i in range(n_out)]
            sets.append((ins, outs))
        return model, sets
    # a "real" light model: inputs made as the suite makes them, its stored output
    path = os.path.join(os.path.dirname(onnx.__file__), "..", case.url)
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    ins = [Runner.generate_dummy_data(x, seed=0, name=case.model_name, random=False)
           for x in model.graph.input if x.name not in inits]
    prefix = os.path.splitext(path)[0]
    outs = [numpy_helper.to_array(onnx.load_tensor(f"{prefix}_output_{i}.pb"))
            for i in range(len(model.graph.output))]
    return model, [(ins, outs)]


def outcome(case) -> tuple[str, str]:
    """("passed" | "refused", why) for a case. Refused: load_onnx raised a WgComputeError, or
    the interpreter a ModelError at the first call (what it can only know from the values).
    Raises on any other failure, and AssertionError on a wrong answer."""
    from onnx.backend.test.runner import Runner

    from ..errors import ModelError, UnsupportedDtypeError, WgComputeError
    from .backend import WgcBackend

    model, data_sets = model_and_data(case)
    kwargs = {"max_folded_bytes": REAL_FOLDED_BYTES} if case.kind == "real" else {}
    try:
        rep = WgcBackend.prepare(model, **kwargs)
    except WgComputeError as e:
        return "refused", str(e)
    try:
        # an interpreted model runs each data set twice: the second call replays the first's
        # trace (ml/replay.py) where the model allows it, and must be as right
        again = 2 if rep.model.path == "interpreted" else 1
        off = False
        for i, (ins, refs) in enumerate(d for d in data_sets for _ in range(again)):
            try:
                outs = list(rep.run(ins))
            except ModelError as e:
                if i == 0 and rep.model.path == "interpreted":
                    return "refused", str(e)
                raise
            except UnsupportedDtypeError as e:  # a dtype the adapter cannot compute, named
                if i == 0:
                    return "refused", str(e)
                raise
            try:
                Runner.assert_similar_outputs(refs, outs, rtol=case.rtol, atol=case.atol,
                                              model_dir=case.name)
            except AssertionError:
                if not exact_agrees(model, ins, refs, outs, case.rtol, case.atol):
                    raise
                off = True
    finally:
        rep.model.free()
    return ("exact", EXACT_NOTE) if off else ("passed", "")


EXACT_NOTE = "matches the float64 result; the suite's stored output is off"


def exact_agrees(model, ins: list, refs: list, outs: list, rtol: float, atol: float) -> bool:
    """Whether a case whose stored outputs ``refs`` ``outs`` does not match is the stored
    outputs' error, not wgcompute's: onnx's reference implementation run on the inputs widened
    from float32 to float64 gives float64 results that ``outs`` match within the case's
    tolerances and ``refs`` do not (test_dft_inverse: the stored output is numpy's complex64
    inverse FFT, 1.5e-6 from the exact transform where the tolerance is 1e-7)."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    names = [i.name for i in model.graph.input]
    if len(names) != len(ins) or not any(np.asarray(a).dtype == np.float32 for a in ins):
        return False
    feeds = {n: np.asarray(a, np.float64) if np.asarray(a).dtype == np.float32 else a
             for n, a in zip(names, ins, strict=True)}
    try:
        exact = ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # noqa: BLE001 - no float64 reference for this model: not decided here
        return False
    if len(exact) != len(outs) or len(refs) != len(outs):
        return False
    stored_off = False
    for e, o, r in zip(exact, outs, refs, strict=True):
        e, o, r = np.asarray(e), np.asarray(o), np.asarray(r)
        if e.dtype != np.float64 or o.shape != e.shape or r.shape != e.shape \
                or o.dtype != r.dtype:
            return False
        if not np.allclose(o.astype(np.float64), e, rtol=rtol, atol=atol, equal_nan=True):
            return False
        stored_off |= not np.allclose(r.astype(np.float64), e, rtol=rtol, atol=atol,
                                      equal_nan=True)
    return stored_off


def _ops_of(case) -> list[str]:
    import onnx

    model = case.model if case.model is not None else \
        onnx.load(os.path.join(case.model_dir, "model.onnx"), load_external_data=False)
    return [n.op_type for n in model.graph.node]


def operator_of(case, cases: dict) -> str:
    """The operator a node case tests: its one node's (an ``_expanded`` case: the unexpanded
    case's); the kind for the model cases."""
    if case.kind != "node":
        return f"({case.kind})"
    base = cases.get(re.sub(r"_expanded(_ver\d+)?$", "", case.name), case)
    ops = _ops_of(base)
    return ops[0] if len(set(ops)) == 1 else "(several)"


def reason(detail: str) -> str:
    """A refusal's reason, short: its first line naming why (node names and values dropped)."""
    lines = [ln.strip() for ln in detail.splitlines() if ln.strip()]
    why = lines[1] if len(lines) > 1 and lines[0].endswith(":") else lines[0] if lines else ""
    why = re.sub(r"^\S+ '[^']*' \(opset \d+\): ", "", why)
    why = re.sub(r"^.*?: node \S+ '[^']*' \(opset \d+\): ", "", why)
    why = re.sub(r"^load_onnx: ", "", why)
    why = re.sub(r"'[^']*'", "'…'", why)
    why = re.sub(r"\(\d+(, \d+)+,?\)|\[[-\d, ]+\]", "…", why)
    return why[:140]


def run_all(pattern: str | None = None, log=None) -> dict:
    """name -> (operator, outcome, detail) for every case (or those matching ``pattern``)."""
    cases = all_cases()
    results = {}
    for name in sorted(cases):
        if pattern and not re.search(pattern, name):
            continue
        case = cases[name]
        try:
            kind, detail = outcome(case)
        except AssertionError as e:
            kind, detail = "failed", f"wrong answer: {str(e).splitlines()[0][:200]}"
        except Exception as e:  # noqa: BLE001 - a failure is counted, named and listed
            kind, detail = "failed", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" \
                if str(e) else type(e).__name__
        results[name] = (operator_of(case, cases), kind, detail)
        if log is not None:
            print(f"{kind:8} {name}" + (f": {reason(detail)}" if kind != "passed" else ""),
                  file=log, flush=True)
    return results


def table(results: dict) -> str:
    """The markdown coverage table: totals, then per operator cases passed / refused (why) /
    failed."""
    per = defaultdict(Counter)
    whys = defaultdict(Counter)
    for op, kind, detail in results.values():
        per[op]["passed" if kind == "exact" else kind] += 1
        if kind == "exact":
            whys[op][f"passed: {EXACT_NOTE}"] += 1
        elif kind != "passed":
            whys[op][reason(detail) if kind == "refused" else f"FAILED: {detail[:100]}"] += 1
    total = Counter(kind for _, kind, _ in results.values())
    exact = (f" ({total['exact']:,} of them against the float64 result, the suite's stored "
             f"output being off)") if total["exact"] else ""
    lines = [f"{len(results):,} cases: {total['passed'] + total['exact']:,} pass{exact}, "
             f"{total['refused']:,} are refused with a reason, {total['failed']:,} fail.", "",
             "| operator | passed | refused | failed | why not |", "|---|---|---|---|---|"]
    for op in sorted(per):
        c = per[op]
        why = "; ".join(f"{w} ({n})" if n > 1 else w for w, n in whys[op].most_common(3))
        why = why.replace("|", "\\|")
        lines.append(f"| {op} | {c['passed']} | {c['refused']} | {c['failed']} | {why} |")
    return "\n".join(lines)


def write(path: str, text: str) -> None:
    """Replace the text between the coverage markers of ``path``."""
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers to write between")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m wgcompute.ml.coverage",
                                description="Run ONNX's backend test suite through wgcompute "
                                            "and print (or write) the coverage table.")
    p.add_argument("--write", metavar="DOC", help="replace the table between the coverage "
                                                  "markers of this markdown file")
    p.add_argument("-k", metavar="REGEX", help="only the cases whose name matches")
    p.add_argument("-v", action="store_true", help="print each case's outcome as it runs")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    results = run_all(args.k, sys.stderr if args.v else None)
    text = table(results)
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if args.write:
        write(args.write, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
