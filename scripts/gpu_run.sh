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
# chromium too, where HARNESS_CHROMIUM names Chromium's headless shell and HARNESS_CHROMIUM_ARGS
# the flags that give it the GPU (docs/runtimes.md, "Chromium on an NVIDIA GPU": what it
# needs beside itself, and build/dist/ carried where the machine has no pyodide-build).
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
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
if [ -e .node/node.xz ]; then
  xz -dc .node/node.xz > /tmp/node && chmod +x /tmp/node && export HARNESS_NODE=/tmp/node
fi
[ -e .node/node_modules.tar.xz ] && [ ! -e node_modules/webgpu ] && tar -xJf .node/node_modules.tar.xz
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES=$icd __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
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
