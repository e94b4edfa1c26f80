#!/usr/bin/env bash
# Sets up synconfroute in ./.venv on Debian/Ubuntu (Python >= 3.11).
#   bash scripts/setup.sh         the tool with the embedded model (llama.cpp + SmolLM2)
#   bash scripts/setup.sh --dev   everything the test suite needs as well
# Safe to run again: it installs only what is missing. Set PYTHON to pick the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[ "${1:-}" = "--dev" ] && dev=1

# System packages: a C++ compiler to build llama.cpp (and for the C++ syntax gate);
# for tests, the real compilers and editors they drive.
apt_pkgs=(g++ cmake python3-venv)
if [ "$dev" = 1 ]; then
  apt_pkgs+=(default-jdk-headless)
  # The editors tests/test_editors.py drives headless (the VS Code extension needs node and
  # npm, which this machine image ships; its tests skip, saying so, where they are missing).
  apt_pkgs+=(neovim emacs-nox elpa-eglot)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing system packages: ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: $py is older than 3.11; set PYTHON=/path/to/python3.11 or newer" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
extras="embedded"
[ "$dev" = 1 ] && extras="embedded,server,dev"
# llama-cpp-python compiles llama.cpp (~5 min on 2 cores); pip caches the wheel afterwards.
echo "setup: installing synconfroute[$extras] into .venv (first run compiles llama.cpp: ~5 min)" >&2
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" .venv/bin/python -m pip install -q -e ".[$extras]"
echo "setup: done. Run .venv/bin/synconfroute --help" >&2
