#!/usr/bin/env bash
# Old against new wgcompute on one machine: the same benchmark code (bench_dispatch,
# bench_streams, bench_kernels) run against two wheels, alternating old/new/old/new in fresh
# processes, then a table of medians and new/old ratios (benchmarks/compare_versions.py).
# On a machine with the GPU, from the repository root:
#   python3 -m pip wheel --no-deps -w /tmp/new .          # this version's wheel
#   bash benchmarks/compare_versions.sh wgcompute-0.1.0-py3-none-any.whl /tmp/new/wgcompute-*.whl
# Knobs: ROUNDS (2: old,new,old,new), BENCHES (which of the three), KERNELS_ARGS, STREAMS_ARGS,
# DISPATCH_ARGS, BENCH_TIMEOUT, PIN (e.g. "taskset -c 0-7"). Writes $OUT/compare.md,
# $OUT/compare.json and $OUT/compare.log (OUT defaults to /tmp/out). ~8 minutes on an H200.
# Fresh processes of one version can differ by more than two versions do (host latencies are
# bimodal); benchmarks/ab_versions.py compares two versions inside one process.
set -u
if [ $# -ne 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
  echo "usage: bash benchmarks/compare_versions.sh OLD.whl NEW.whl (two wgcompute wheels)" >&2
  exit 2
fi
old_whl=$1
new_whl=$2
out=${OUT:-/tmp/out}
mkdir -p "$out/raw"
export PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp WGCOMPUTE_BENCH_PEERS=0
src=$(pwd)
for v in old new; do
  whl=$([ $v = old ] && echo "$old_whl" || echo "$new_whl")
  rm -rf "/tmp/wgc-$v" && python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "/tmp/wgc-$v" "$whl" || exit 1
  echo "$v: $(basename "$whl")"
done
# A copy without wgcompute/: the installed wheel must be the one imported.
work=/tmp/wgc-compare && rm -rf "$work" && mkdir -p "$work" && cp -r "$src/benchmarks" "$work"/
cd "$work"
rounds=${ROUNDS:-2}
for r in $(seq 1 "$rounds"); do
  for v in old new; do
    for b in ${BENCHES:-bench_dispatch bench_streams bench_kernels}; do
      case $b in
        bench_dispatch) args=${DISPATCH_ARGS:-"--repeat 300"} ;;
        bench_streams) args=${STREAMS_ARGS:-"--repeat 2"} ;;
        bench_kernels) args=${KERNELS_ARGS:-"--only elementwise,reduce,softmax,matmul,copy --repeat 5"} ;;
      esac
      echo "== round $r $v $b"
      PYTHONPATH="/tmp/wgc-$v:${PYTHONPATH:-}" timeout ${BENCH_TIMEOUT:-200} ${PIN:-} \
        python3 -m "benchmarks.$b" $args --json "$out/raw/$v-$r-$b.json" > "$out/raw/$v-$r-$b.log" 2>&1 \
        || { echo "   failed: tail of its log:"; tail -5 "$out/raw/$v-$r-$b.log"; }
      PYTHONPATH="/tmp/wgc-$v:${PYTHONPATH:-}" python3 -c "import wgcompute, os; print('   imported', os.path.dirname(wgcompute.__file__))"
    done
  done
done 2>&1 | tee "$out/compare.log"
python3 -m benchmarks.compare_versions "$out/raw" --md "$out/compare.md" --json "$out/compare.json"
(cd "$out" && tar czf raw.tar.gz raw && rm -rf raw)
