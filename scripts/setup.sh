#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine (root, package registries only):
# Debian's chromium, firefox-esr and lavapipe, a Python >= 3.12 virtual environment with the
# pinned dev packages, the pinned npm packages (Pyodide, Dawn for Node), and the py-harness
# wheel + pyodide-lock.json.
# Each step is skipped when it is already done, so `make test` costs nothing extra twice.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

apt_missing=()
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || apt_missing+=(mesa-vulkan-drivers)
# The firefox runtime (driven over WebDriver BiDi: no driver binary to fetch). About 80 MB on
# top of chromium, which pulls in the same GTK stack; HARNESS_FIREFOX names another build.
[ -x "${HARNESS_FIREFOX:-/usr/bin/firefox-esr}" ] || apt_missing+=(firefox-esr)
if [ ${#apt_missing[@]} -gt 0 ]; then
  say "apt-get install ${apt_missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >/dev/null
fi

# pyodide-build needs Python >= 3.12 (docs/runtimes.md); this machine kind keeps 3.13 under pyenv.
find_python() {
  local c
  for c in "${HARNESS_PYTHON:-}" python3.13 python3.12 \
           "$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python3" \
           "$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python3"; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1 &&
       "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}

stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -e "$stamp" ]; then
  py=$(find_python) || { echo "need Python >= 3.12 (set HARNESS_PYTHON)" >&2; exit 1; }
  say "virtual environment with $($py --version) and the pinned dev packages"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip==25.3
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi

if [ ! -e node_modules/pyodide/pyodide.mjs ] || [ ! -e node_modules/webgpu/package.json ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # webgpu's install script only unquarantines its macOS binary: not needed here.
  say "npm ci (pyodide, and Dawn for Node: pinned by package-lock.json)"
  npm ci --silent --no-audit --no-fund --ignore-scripts
fi

.venv/bin/python -m py_harness.host.dist.build_wheel
