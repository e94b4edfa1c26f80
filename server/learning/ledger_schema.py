"""The ledger's line types, and a strict reader that checks each line against them.

The ledger is a file anyone can edit, damage or fill (several servers append to it):
a line is trusted only once it has the shape the server writes. cattrs structures it
into the attrs class of its kind with exact types (no "1" for 1, no NaN, no infinities,
no control characters in names); anything else is one unreadable line.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs
import cattrs

Route = Literal["local", "remote", "none"]


@attrs.frozen
class DecisionLine:
    """One completion decision (`ledger.entry`). Older ledgers lack the later fields."""

    id: str
    route: Route
    t: float | None = None
    reasons: list[str] = attrs.field(factory=list)
    policy: str | None = None
    confidence: float | None = None
    threshold: float | None = None
    syntax: str | None = None
    local_model: str | None = None
    remote_model: str | None = None
    language: str | None = None
    latency_ms: dict[str, float] = attrs.field(factory=dict)
    bytes_sent: int = 0
    context_bytes: int = 0
    cache_hit: bool = False
    early: bool = False
    local_text: bool | None = None
    chars: int = 0
    draft_tokens: int = 0
    draft_kept: int = 0
    task: str = "completion"  # or "next-edit"


@attrs.frozen
class AdaptiveLine:
    """The adaptive threshold moved (`Ledger.adaptive`)."""

    adaptive: float
    t: float | None = None
    from_: float | None = attrs.field(default=None, alias="from_")
    start: float | None = None
    why: str = ""


@attrs.frozen
class EventLine:
    """shown / accepted / dismissed: the decision's id."""

    id: str
    t: float | None = None


@attrs.frozen
class RetainedLine:
    id: str
    after_s: float
    ratio: float
    t: float | None = None
    chars: int = 0
    closed: bool = False


class BadLine(ValueError):
    """A ledger line that does not have its kind's shape."""


def _text(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise BadLine(f"expected a string, got {type(value).__name__}")
    if any(ord(c) < 32 for c in value):
        raise BadLine("control character in a string")
    return value


def _float(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadLine(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise BadLine(f"expected a finite number, got {value}")
    return float(value)


def _int(value: Any, _: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadLine(f"expected a whole number, got {type(value).__name__}")
    return value


def _bool(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        raise BadLine(f"expected true or false, got {type(value).__name__}")
    return value


def _converter() -> cattrs.Converter:
    c = cattrs.Converter(forbid_extra_keys=False)
    c.register_structure_hook(str, _text)
    c.register_structure_hook(float, _float)
    c.register_structure_hook(int, _int)
    c.register_structure_hook(bool, _bool)

    def strict_list(value: Any, _: Any) -> list[str]:
        if not isinstance(value, list):
            raise BadLine(f"expected a list, got {type(value).__name__}")
        return [_text(v, str) for v in value]

    def strict_numbers(value: Any, _: Any) -> dict[str, float]:
        if not isinstance(value, dict):
            raise BadLine(f"expected an object, got {type(value).__name__}")
        return {_text(k, str): _float(v, float) for k, v in value.items()}

    c.register_structure_hook_func(lambda t: t == list[str], strict_list)
    c.register_structure_hook_func(lambda t: t == dict[str, float], strict_numbers)
    return c


_CONVERTER = _converter()
_ERRORS = (BadLine, cattrs.BaseValidationError, KeyError, TypeError, ValueError)
EVENTS = ("shown", "accepted", "dismissed", "retained")


def decision(obj: dict[str, Any]) -> dict[str, Any]:
    """The decision line as a checked dict of its schema's fields; BadLine if it is not one."""
    return _checked(obj, DecisionLine)


def adaptive(obj: dict[str, Any]) -> dict[str, Any]:
    """The adaptive move as a checked dict (`from` keeps its name); BadLine otherwise."""
    fields = {("from_" if k == "from" else k): v for k, v in obj.items()}
    out = _checked(fields, AdaptiveLine)
    out["from"] = out.pop("from_")
    return out


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """An event line (`kind` in EVENTS) with its decision's id under "id"."""
    fields = {**obj, "id": obj[kind]}
    fields.pop(kind)
    return _checked(fields, RetainedLine if kind == "retained" else EventLine)


def _checked(obj: dict[str, Any], kind: type[Any]) -> dict[str, Any]:
    try:
        line = _CONVERTER.structure(obj, kind)
    except _ERRORS as exc:
        raise BadLine(str(exc)) from None
    return attrs.asdict(line)
