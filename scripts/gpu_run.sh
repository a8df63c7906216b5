#!/usr/bin/env bash
# The case matrix and the benchmark on a real GPU (Vulkan), per WebGPU implementation.
# Used on an NVIDIA H200 through the device tool; works on any machine with python3 + numpy
# (+ torch for the comparison column). Where the machine has no registry access, carry:
#   .whl/  wheels: wgpu, wgpudawn, cffi, pycparser, rendercanvas (pip download)
#   .gl/   the Vulkan loader and glvnd .debs (libvulkan1 libegl1 libglvnd0 libopengl0 libgl1
#          libglx0 libgles2; apt-get download)
#   .node/ node.xz (xz of the node binary) and node_modules.tar.xz (node_modules/pyodide and
#          node_modules/webgpu with its linux-x64 dawn.node only), plus build/dist (the wheel)
#   bash scripts/gpu_run.sh OUTDIR [bench options...]
#   .chromium/ Chromium's headless shell and what it needs (scripts/chromium_bundle.sh), for
#          RUNTIMES with chromium; or set HARNESS_CHROMIUM (the headless shell) and
#          HARNESS_CHROMIUM_ARGS yourself (docs/runtimes.md, "Chromium on an NVIDIA GPU")
# RUNTIMES (default wgpu; e.g. wgpu,dawn,node) are judged in one check per variant, so its
# disagreement table compares them; VARIANTS="fast" limits the variants; CHECK_ARGS replaces
# check's options (default --long: the GPU-sized cases too); BENCH_RUNTIMES (default wgpu;
# wgpu and/or dawn) are benchmarked one after the other; NO_BENCH=1 skips the benchmark.
set -u
out=${1:-build/gpu}
shift || true
mkdir -p "$out"
# The Vulkan loader and glvnd (NVIDIA's ICD needs libGLX/libEGL dispatch) from Debian.
if ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# Carried wheels: .whl/'s, and Playwright's for Chromium (.chromium/wheels/), in one install.
wheels=$(ls .whl/*.whl .chromium/wheels/*.whl 2>/dev/null || true)
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $wheels && export PYTHONPATH=/tmp/site
fi
if [ -e .node/node.xz ]; then
  xz -dc .node/node.xz > /tmp/node && chmod +x /tmp/node && export HARNESS_NODE=/tmp/node
fi
[ -e .node/node_modules.tar.xz ] && [ ! -e node_modules/webgpu ] && tar -xJf .node/node_modules.tar.xz
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES=$icd __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
# Chromium's headless shell, unpacked once per machine (a later call may bring more parts).
# Its libraries stay on its own LD_LIBRARY_PATH (a wrapper): Python keeps the machine's.
# The flags are the ones that gave it an NVIDIA adapter (docs/runtimes.md).
if [ -d .chromium ]; then
  hs=/tmp/py-harness-chromium
  mkdir -p "$hs"
  if [ -e .chromium/headless-shell.xz ] && [ ! -x "$hs/chromium-headless-shell" ]; then
    xz -dc .chromium/headless-shell.xz > "$hs/chromium-headless-shell.part" &&
      chmod +x "$hs/chromium-headless-shell.part" &&
      mv "$hs/chromium-headless-shell.part" "$hs/chromium-headless-shell"
  fi
  [ -e .chromium/rest.tar.xz ] && [ ! -e "$hs/icudtl.dat" ] && tar -C "$hs" -xJf .chromium/rest.tar.xz
  [ -e .chromium/pyodide.tar.xz ] && [ ! -e node_modules/pyodide ] &&
    mkdir -p node_modules && tar -C node_modules -xJf .chromium/pyodide.tar.xz
  [ -e .chromium/dist/pyodide-lock.json ] && [ ! -e build/dist/pyodide-lock.json ] &&
    mkdir -p build/dist && cp -a .chromium/dist/. build/dist/
  printf '#!/bin/sh\nexport LD_LIBRARY_PATH=%s/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec %s/chromium-headless-shell "$@"\n' "$hs" "$hs" > "$hs/run"
  chmod +x "$hs/run"
  [ -e "$icd" ] && mkdir -p /usr/share/vulkan/icd.d && cp -n "$icd" /usr/share/vulkan/icd.d/ 2>/dev/null
  export HARNESS_CHROMIUM=${HARNESS_CHROMIUM:-$hs/run}
  # Only beside NVIDIA's ICD: without a GPU these flags left the page with no verdict in 90 s
  # (the GPU process busy on SwiftShader), where Chromium's own defaults take 3.4 s.
  [ -e "$icd" ] && export HARNESS_CHROMIUM_ARGS=${HARNESS_CHROMIUM_ARGS:-"--enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface --ignore-gpu-blocklist --use-webgpu-adapter=default --use-angle=vulkan --use-gl=angle"}
fi
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
# The whole matrix, the GPU-sized long cases included, on the variants named in $VARIANTS.
for v in ${VARIANTS:-seed fast}; do
  python3 -m py_harness check --runtime "${RUNTIMES:-wgpu}" --variant "$v" ${CHECK_ARGS:---long} \
    --out "$out/check-$v" 2>&1 | grep -v XDG_RUNTIME | tee "$out/check-$v.log"
done
[ -n "${NO_BENCH:-}" ] && exit 0
for rt in ${BENCH_RUNTIMES:-wgpu}; do
  python3 -m py_harness bench --runtime "$rt" --variant seed,fast --json "$out/bench-$rt.json" \
    --plot "$out/bench-$rt.svg" "$@" 2>&1 | grep -v XDG_RUNTIME | tee "$out/bench-$rt.log"
done
