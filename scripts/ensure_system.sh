#!/usr/bin/env bash
# Makes sure this machine can run wgcompute: a Vulkan driver (lavapipe when there is no GPU),
# for the tests and the viewer a virtual screen (xvfb) and libglfw3, and with WGCOMPUTE_WITH_GL=1
# (make test-gl) an OpenGL adapter (Mesa's EGL and GL drivers).
# Installs Debian packages when we are root; otherwise prints the exact command to run.
set -euo pipefail
want=()
python_bin=${1:-python3}
if ! "$python_bin" - <<'PY' 2>/dev/null
import sys, wgpu
names = [a.info["backend_type"] for a in wgpu.gpu.enumerate_adapters_sync()]
sys.exit(0 if any(n in ("Vulkan", "Metal", "D3D12") for n in names) else 1)
PY
then
  want+=(mesa-vulkan-drivers)
fi
# wgpu's GL backend (make test-gl): Mesa's EGL and GL drivers, llvmpipe where there is no GPU
if [ "${WGCOMPUTE_WITH_GL:-0}" = 1 ] && ! "$python_bin" - <<'PY' 2>/dev/null
import sys, wgpu
names = [a.info["backend_type"] for a in wgpu.gpu.enumerate_adapters_sync()]
sys.exit(0 if "OpenGL" in names else 1)
PY
then
  want+=(libegl1 libegl-mesa0 libgl1-mesa-dri)
fi
if [ "${WGCOMPUTE_WITH_DISPLAY_TOOLS:-1}" = 1 ] && command -v dpkg >/dev/null; then
  dpkg -s xvfb >/dev/null 2>&1 || want+=(xvfb)
  dpkg -s libglfw3 >/dev/null 2>&1 || want+=(libglfw3)
fi
# pyright (what VS Code/Pylance runs) for tests/test_typing.py: from the npm registry when npm
# is there; without it that test skips and says so.
if [ "${WGCOMPUTE_WITH_DEV_TOOLS:-1}" = 1 ] && ! command -v pyright >/dev/null \
   && command -v npm >/dev/null; then
  echo "wgcompute: installing pyright (npm) for the typing tests"
  npm install -g --silent pyright@1.1.414 >/dev/null 2>&1 || echo "wgcompute: npm could not install pyright; tests/test_typing.py will skip its pyright check" >&2
fi
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "wgcompute: installing ${want[*]} (GPU drivers / virtual screen)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${want[@]}" >/dev/null
else
  echo "wgcompute: missing system packages: ${want[*]}" >&2
  echo "  run: sudo apt-get install -y ${want[*]}" >&2
  case " ${want[*]} " in *" mesa-vulkan-drivers "*|*" libegl-mesa0 "*) exit 1;; esac
fi
