#!/usr/bin/env bash
# The case matrix and the benchmark on a real GPU through the native wgpu backend (Vulkan).
# Used on an NVIDIA H200 through the device tool; works on any machine with python3 + numpy
# (+ torch for the comparison column). Wheels for wgpu-py and its needs may be carried in
# .whl/ and the Vulkan loader's .deb in .gl/ where the machine has no registry access.
#   bash scripts/gpu_run.sh OUTDIR [bench options...]
# VARIANTS="fast" limits the matrix to one variant; CHECK_ARGS replaces check's options
# (default --long: the GPU-sized cases too); NO_BENCH=1 skips the benchmark.
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
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES=$icd __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import wgpu; a = wgpu.gpu.request_adapter_sync(power_preference='high-performance'); print(dict(a.info))"
# The whole matrix, the GPU-sized long cases included, on the variants named in $VARIANTS.
for v in ${VARIANTS:-seed fast}; do
  python3 -m py_harness check --runtime wgpu --variant "$v" ${CHECK_ARGS:---long} --out "$out/check-$v" 2>&1 |
    grep -v XDG_RUNTIME | tee "$out/check-$v.log"
done
[ -n "${NO_BENCH:-}" ] && exit 0
python3 -m py_harness bench --variant seed,fast --json "$out/bench.json" --plot "$out/bench.svg" "$@" 2>&1 | grep -v XDG_RUNTIME
