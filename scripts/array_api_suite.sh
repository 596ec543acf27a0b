#!/usr/bin/env bash
# The array API standard's own conformance suite (data-apis/array-api-tests, run unchanged)
# against wgcompute.array_api: core, linalg and fft, 50 hypothesis examples per test (seed 0,
# so that a run is reproducible; no per-example deadline, as lavapipe computes on the CPU and
# a first shader compile takes longer than hypothesis's 800 ms), with the xfails listed (each
# with its reason) in tests/array_api/xfails.txt.
#   bash scripts/array_api_suite.sh PYTHON [pytest args]
# The suite is taken from ARRAY_API_TESTS, else ../shared/array-api-tests (beside the checkout,
# or /work/shared), else cloned at the pinned commit into .cache/array-api-tests. It runs from a temporary folder so that
# hypothesis keeps its example database out of the suite's folder.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); shift
commit=55fcc60 spec=5f847a38
suite=${ARRAY_API_TESTS:-}
for candidate in "$repo/../shared/array-api-tests" /work/shared/array-api-tests; do
  if [ -z "$suite" ] && [ -d "$candidate/array_api_tests" ]; then
    suite=$candidate
  fi
done
if [ -z "$suite" ]; then
  suite=$repo/.cache/array-api-tests
  if [ ! -d "$suite/array_api_tests" ]; then
    git clone -q https://github.com/data-apis/array-api-tests "$suite"
    git -C "$suite" checkout -q "$commit"
    git -C "$suite" submodule -q update --init
    git -C "$suite/array-api" checkout -q "$spec"
  fi
fi
if [ "${EXPECT_LAVAPIPE:-}" = 1 ]; then  # CI: fail unless it runs where it says
  "$python" -c 'import sys, wgcompute as wgc
d = wgc.current_device(); info = d.info()
ok = d.backend.lower() == "vulkan" and "llvmpipe" in info["name"].lower()
print("array API suite on", d.label); sys.exit(0 if ok else "EXPECT_LAVAPIPE=1: not lavapipe")'
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ARRAY_API_TESTS_MODULE=wgcompute.array_api "$python" -m pytest "$suite/array_api_tests" \
  -p no:cacheprovider --max-examples 50 --hypothesis-seed=0 --disable-deadline \
  --xfails-file "$repo/tests/array_api/xfails.txt" \
  --json-report --json-report-file="$work/report.json" "$@"
