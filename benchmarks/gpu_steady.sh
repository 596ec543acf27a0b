#!/usr/bin/env bash
# The long-lived-process runs on the GPU machine, one device call each (carry [".gl", ".whl"];
# the project wheel in .whl; vulkaninfo's debs in .gl/tools from benchmarks/gpu_tools.sh):
#   source .gl/preamble.sh && bash benchmarks/gpu_steady.sh probe          # ~2-4 min
#   source .gl/preamble.sh && MINUTES=8 TORCH_AT=240 bash benchmarks/gpu_steady.sh soak
# A device call lasts at most 10 minutes, preamble and the fresh-process figures (~1 min)
# included: a soak of 8 minutes fits; a 10-minute soak does not fit in one call.
# Writes probe_steady.{json,md,log} or bench_soak.{json,png,log} under $OUT.
set -u
what=${1:-probe}
out=${OUT:-/tmp/out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=/tmp VULKAN_TOOLS_DEBS=$PWD/.gl/tools
work=/tmp/wgc-steady && rm -rf "$work" && mkdir -p "$work" && cp -r benchmarks "$work"/
cd "$work"
nvidia-smi -L 2>/dev/null || true
case $what in
  probe) timeout ${TIMEOUT:-500} python3 -m benchmarks.probe_steady 2>&1 | tee "$out/probe_steady.log" ;;
  soak) timeout ${TIMEOUT:-570} python3 -m benchmarks.bench_soak --minutes "${MINUTES:-8}" \
          ${TORCH_AT:+--torch-at "$TORCH_AT"} 2>&1 | tee "$out/bench_soak.log" ;;
  *) echo "usage: gpu_steady.sh probe|soak" >&2; exit 2 ;;
esac
