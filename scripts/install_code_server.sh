#!/usr/bin/env bash
# Installs code-server (VS Code served to a browser) into ./.code-server for the VS Code
# end-to-end test (tests/test_vscode_e2e.py). Called by `scripts/setup.sh --dev`; safe to run
# again (a second run finds it installed and returns at once).
# Needs node 20 + npm, and Debian's ripgrep and libkrb5-dev (setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

version="4.100.3"        # the newest code-server whose engine is Node 20 (4.139 needs Node 24)
rg_version="v13.0.0-10"  # what @vscode/ripgrep 1.15.11 (code-server's) downloads
rg_pkg="1.15.11"
prefix=".code-server"
bin="$prefix/node_modules/.bin/code-server"

if [ -x "$bin" ] && [ "$(cat "$prefix/installed" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
for tool in node npm rg; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install_code_server: $tool not found (apt-get install nodejs npm ripgrep)" >&2
    exit 1
  fi
done

# @vscode/ripgrep's postinstall downloads a ripgrep build from GitHub unless its cache
# already holds the tarball: put Debian's rg there, under the name it looks for.
case "$(uname -m)" in
  x86_64|amd64) rg_target="x86_64-unknown-linux-musl" ;;
  aarch64|arm64) rg_target="aarch64-unknown-linux-musl" ;;
  *) echo "install_code_server: no ripgrep cache for $(uname -m)" >&2; exit 1 ;;
esac
cache="${TMPDIR:-/tmp}/vscode-ripgrep-cache-$rg_pkg"
tarball="$cache/ripgrep-$rg_version-$rg_target.tar.gz"
if [ ! -s "$tarball" ]; then
  mkdir -p "$cache"
  stage="$(mktemp -d)"
  cp "$(command -v rg)" "$stage/rg"
  tar -C "$stage" -czf "$tarball" rg
  rm -rf "$stage"
fi

echo "setup: installing code-server $version into $prefix (npm, a few minutes)" >&2
mkdir -p "$prefix"
[ -f "$prefix/package.json" ] || echo '{"name": "synconfroute-code-server", "private": true}' >"$prefix/package.json"
# Its postinstall refuses root without unsafe-perm, and runs `npx node-gyp` (yes: no prompt).
npm_config_unsafe_perm=true npm_config_yes=true \
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "code-server@$version"
"$bin" --version >/dev/null
printf '%s\n' "$version" >"$prefix/installed"
