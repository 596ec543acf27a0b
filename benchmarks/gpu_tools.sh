#!/usr/bin/env bash
# Run once here (not on the GPU machine) after ../shared/gpu/prepare.sh: puts Debian's
# vulkan-tools (vulkaninfo) and the libraries it links into .gl/tools/, for
# benchmarks/probe_steady.py to read Vulkan's memory heaps, types and budget on the GPU
# machine. They stay out of .gl/*.deb on purpose: the preamble unpacks those over /, and
# these must not replace the machine's own X11/wayland libraries. probe_steady unpacks them
# into a folder of its own and runs vulkaninfo with LD_LIBRARY_PATH pointing there.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
mkdir -p .gl/tools /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
if ! ls .gl/tools/vulkan-tools_*.deb >/dev/null 2>&1; then
  apt-get $o update -qq >/dev/null
  (cd .gl/tools && apt-get $o download vulkan-tools libwayland-client0 libx11-6 libx11-data \
      libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libffi8 >/dev/null)
fi
ls .gl/tools
