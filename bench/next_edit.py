"""Next-edit suggestions: time from the `textDocument/copilotInlineEdit` request to the
edit, through `synconfroute serve` over stdio, local tier only (the Ollama fake).

    .venv/bin/python -m bench.next_edit [--rounds 40] [--token-ms 0] [--region-lines 5]
                                        [--embedded] [--paced]

The fake Ollama answers each prompt's own editable region rewritten (a rename carried
to the lines below, tests/fakes/next_edit.py), `--token-ms` apart per token (0: the
server's own cost: prompt, parse, diff, gate, record, LSP). Each round renames one more
variable, so the server sees a new version and a new prompt; we print p50 and p90.
With `--embedded` the local tier is the embedded default (SmolLM2-135M, llama.cpp in a
worker process) instead: not a next-edit model, so this times the request to its answer
(an edit or none) with the default `next_edit.max_tokens` and `completion.deadline_ms`.
Every request asks the model (`next_edit.only_in_time = false`): with `--paced` the
server's default holds, and a local model too slow for next edits stops being asked
after a few late rewrites (those requests then take no model time at all).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from lsprotocol import types as t

from tests.fakes import FakeOllama
from tests.fakes.next_edit import RewritingModel
from tests.lsp_harness import ROOT, capabilities, open_doc, start, stop, write_config


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def source(rounds: int) -> str:
    body = [f"    v{i} = item.cost * {i}\n    out.append(v{i})\n" for i in range(rounds)]
    return "def price(item, out):\n" + "".join(body) + "    return out\n"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--token-ms", type=float, default=0.0)
    ap.add_argument("--region-lines", type=int, default=5)
    ap.add_argument("--embedded", action="store_true", help="the embedded default as local tier")
    ap.add_argument("--paced", action="store_true", help="keep next_edit.only_in_time on")
    args = ap.parse_args()

    def carry(region: str) -> str:  # the rename just typed, carried to its use below
        return region.replace("out.append(v", "out.append(w")

    model = RewritingModel(carry, delay=args.token_ms / 1000)
    with FakeOllama() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.answer_for = model  # type: ignore[attr-defined]
        cfg = write_config(
            Path(tmp),
            local_url=None if args.embedded else fake.url,
            local_backend="embedded" if args.embedded else "ollama",
            extra=f"[next_edit]\nregion_lines = {args.region_lines}\n"
            f"only_in_time = {'true' if args.paced else 'false'}\n",
        )
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
        uri = (ROOT / "src" / "bench_next_edit.py").as_uri()
        text = source(args.rounds)
        open_doc(client, uri, text)
        times: list[float] = []
        shown = 0
        try:
            for i in range(args.rounds):
                line = 1 + 2 * i
                version = i + 2
                client.text_document_did_change(
                    t.DidChangeTextDocumentParams(
                        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[
                            t.TextDocumentContentChangePartial(
                                range=t.Range(t.Position(line, 4), t.Position(line, 5)), text="w"
                            )
                        ],
                    )
                )
                params = {
                    "textDocument": {"uri": uri, "version": version},
                    "position": {"line": line, "character": 5},
                }
                t0 = time.perf_counter()
                got = await client.protocol.send_request_async(
                    "textDocument/copilotInlineEdit", params
                )
                times.append((time.perf_counter() - t0) * 1000)
                shown += bool(got.edits)
        finally:
            await stop(client)
    tier = "embedded default" if args.embedded else f"Ollama fake ({args.token_ms:g} ms/token)"
    parts = [
        f"copilotInlineEdit, {tier}",
        f"region +-{args.region_lines} lines",
        f"{args.rounds} rounds",
        f"{shown} edits shown",
    ]
    if not args.embedded:
        parts.append(f"{len(model.prompts)} asked of the fake model")
    if args.paced:
        parts.append("paced (next_edit.only_in_time)")
    print(", ".join(parts))
    print(
        f"request -> edit: p50 {statistics.median(times):.1f} ms, p90 {pct(times, 0.9):.1f} ms, "
        f"min {min(times):.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
