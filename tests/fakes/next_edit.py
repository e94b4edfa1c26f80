"""A next-edit model for the fakes: it answers each prompt's own editable region,
rewritten by a function, in Zeta's answer format, token by token with log-probs.

Set it as a fake's `answer_for` (tests/fakes/http.py `ScriptedServer._script_for`): a
prompt without an editable region gets the fake's queued scripts as before.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from .http import TokenScript

START = "<|editable_region_start|>"
CURSOR = "<|user_cursor_is_here|>"
END = "<|editable_region_end|>"
_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|\s|[^\w\s]")


def region_of(prompt: str) -> str | None:
    """The editable region of the prompt's excerpt (the cursor marker dropped)."""
    i = prompt.rfind(START)
    j = prompt.find(END, i)
    if i < 0 or j < 0:
        return None
    return prompt[i + len(START) + 1 : j - 1].replace(CURSOR, "")


class RewritingModel:
    """`rewrite(region) -> new region`; changed tokens get `changed_lp`, copied ones
    `copied_lp`. `prompts` keeps every prompt it answered."""

    def __init__(
        self,
        rewrite: Callable[[str], str],
        *,
        changed_lp: float = -0.05,
        copied_lp: float = -0.001,
        delay: float = 0.0,
    ) -> None:
        self.rewrite = rewrite
        self.changed_lp = changed_lp
        self.copied_lp = copied_lp
        self.delay = delay
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> TokenScript | None:
        old = region_of(prompt)
        if old is None:
            return None
        self.prompts.append(prompt)
        new = self.rewrite(old)
        head = f"{START}\n"
        answer = f"{head}{new}\n{END}\n```"
        changed: set[int] = set()  # answer offsets of characters the rewrite changed
        sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, _a0, _a1, b0, b1 in sm.get_opcodes():
            if tag != "equal":
                changed.update(range(len(head) + b0, len(head) + max(b1, b0 + 1)))
        tokens = []
        for m in _TOKEN.finditer(answer):
            hit = any(k in changed for k in range(m.start(), m.end()))
            tokens.append((m.group(), self.changed_lp if hit else self.copied_lp))
        return TokenScript(tokens=tokens, delay=self.delay)


__all__ = ["CURSOR", "END", "START", "RewritingModel", "region_of"]
