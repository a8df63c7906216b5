#!/usr/bin/env bash
# Chromium's headless shell, packed for a GPU machine without a package registry, for
# scripts/gpu_run.sh to unpack there (docs/runtimes.md, "Chromium on an NVIDIA GPU").
# Run here, in the repository root, after `make setup` (it takes node_modules/pyodide and
# build/dist from the checkout); needs apt-get download, dpkg, ldd, xz and pip:
#   bash scripts/chromium_bundle.sh [DIR]      (default .chromium)
# DIR then holds, each under 64 MiB (a machine reached through a size limit per transfer
# can take them in turns; gpu_run.sh unpacks what is there and skips what it unpacked before):
#   headless-shell.xz  the binary (about 56 MB)
#   rest.tar.xz        what it reads beside itself (chromium-common's ICU data, V8 snapshots,
#                      Vulkan loader, ANGLE stubs, SwiftShader: an adapter where the GPU's
#                      is not found, named as such), its .pak files, and the shared
#                      libraries it links beyond glibc, in libs/, as this machine has
#                      them (about 20 MB)
#   pyodide.tar.xz     node_modules/pyodide (about 5 MB)
#   dist/              build/dist's Pyodide wheel and lock (the GPU machine has no pyodide-build;
#                      with the same sources their stamp matches there and nothing is rebuilt)
#   wheels/            the checkout's playwright (about 53 MB, its Node driver inside) and
#                      greenlet, for CPython 3.12 on manylinux x86_64
set -euo pipefail
out=${1:-.chromium}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out/wheels" "$out/dist"
(cd "$work" && apt-get download chromium-headless-shell chromium-common >/dev/null)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
lib="$work/root/usr/lib/chromium"
xz -T0 -9 -c "$lib/chromium-headless-shell" > "$out/headless-shell.xz"
mkdir -p "$work/rest/libs"
cp "$lib"/headless_*.pak "$lib"/icudtl.dat "$lib"/snapshot_blob.bin "$lib"/v8_context_snapshot.bin \
  "$lib"/libvulkan.so.1 "$lib"/libEGL.so "$lib"/libGLESv2.so "$lib"/libvk_swiftshader.so \
  "$lib"/vk_swiftshader_icd.json "$work/rest/"
if ldd "$lib/chromium-headless-shell" | grep "not found"; then
  echo "chromium_bundle.sh: the libraries above are missing here; install them first" \
    "(apt-get install chromium-headless-shell brings them)" >&2
  exit 1
fi
ldd "$lib/chromium-headless-shell" | awk '$3 ~ /^\// {print $1, $3}' |
  grep -v -E '^(libc|libm|libdl|libpthread|librt|ld-linux[^ ]*)\.so' |
  while read -r name path; do cp -L "$path" "$work/rest/libs/$name"; done
tar -C "$work/rest" -cf - . | xz -T0 -9 > "$out/rest.tar.xz"
tar -C node_modules -cf - pyodide | xz -T0 -6 > "$out/pyodide.tar.xz"
cp build/dist/.build-stamp.json build/dist/py_harness-*.whl build/dist/pyodide-lock.json "$out/dist/"
# The checkout's own Playwright and greenlet (all Playwright needs), for the GPU machine's Python
pins=$("${PYTHON:-.venv/bin/python}" -c "from importlib.metadata import version as v
print(' '.join(f'{n}=={v(n)}' for n in ('playwright', 'greenlet')))")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux1_x86_64 \
  -d "$out/wheels" $pins
ls -l "$out" "$out/wheels"
