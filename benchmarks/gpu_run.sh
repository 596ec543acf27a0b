#!/usr/bin/env bash
# One run of the tests and/or the benchmarks against an INSTALLED wgcompute (see
# docs/performance.md). On a machine with the GPU, from the repository root:
#   python3 -m pip install wgcompute-*.whl      # the wheel to measure (python3 -m pip wheel --no-deps .)
#   bash benchmarks/gpu_run.sh [tests|bench|all]
# Writes $OUT/tests.log, $OUT/bench.md and $OUT/results.tar.gz (JSON + PNG); OUT defaults to /tmp/out.
# Knobs: BENCHES (which benchmarks), TESTS and PYTEST_ARGS, BENCH_TIMEOUT and TEST_TIMEOUT (s).
# PIN="taskset -c 0-7" runs each benchmark pinned to those CPUs: on a 16-CPU H200 host the
# host-side latencies (tiny round trip, pipeline per stage) were bimodal unpinned and steady
# pinned (benchmarks/results/h200/2026-11-22/dispatch_pinning.txt).
set -u
what=${1:-all}
out=${OUT:-/tmp/out}
mkdir -p "$out/res"
export PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp
# Run from a copy without wgcompute/: the installed wheel (with its shaders) must be the one
# imported, and `python -m` puts the current directory first on sys.path.
work=/tmp/wgc-run
rm -rf "$work" && mkdir -p "$work"
cp -r tests benchmarks examples README.md mkdocs.yml "$work"/ && [ -d docs ] && cp -r docs "$work"/
cd "$work"
nvidia-smi -L 2>/dev/null || true
python3 -c "import wgcompute as w; i = w.device_info(); print(i['name'], i['backend'], i['adapter_type'], sorted(i['features']))"
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout ${TEST_TIMEOUT:-280} python3 -m pytest -q -p no:cacheprovider ${TESTS:-tests/} ${PYTEST_ARGS:-} 2>&1 | tail -40 > "$out/tests.log"
  tail -5 "$out/tests.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for b in ${BENCHES:-bench_core bench_dispatch bench_transfers bench_streams bench_kernels bench_image bench_arrays}; do
    [ -f "benchmarks/$b.py" ] || continue
    echo "## $b" | tee -a "$out/bench.md"
    timeout ${BENCH_TIMEOUT:-240} ${PIN:-} python3 -m "benchmarks.$b" --json "$out/res/$b.json" 2>&1 | tee -a "$out/bench.md"
  done
  cp -f benchmarks/*.png "$out/res/" 2>/dev/null || true
  (cd "$out" && tar czf results.tar.gz res && rm -rf res)
fi
