"""The one HTTP status -> exception mapping of both HTTP backends (clients._status)."""

from __future__ import annotations

import pytest

from synconfroute.clients import errors as e
from synconfroute.clients._status import Failure, failure_of, status_error


@pytest.mark.parametrize(
    ("status", "message", "failure", "kind"),
    [
        (401, "Unauthorized", "auth", e.BadCredentials),
        (403, "forbidden", "auth", e.BadCredentials),
        (404, "model 'x' not found, try pulling it first", "model", e.ModelNotFound),
        (404, "The model `x` does not exist.", "model", e.ModelNotFound),
        (404, "404 page not found", "wrong_url", e.ProtocolError),
        (400, "x does not support insert", "fim", e.FimUnsupported),
        (400, "invalid options: num_ctx", "rejected", e.RequestRejected),
        (422, "temperature must be >= 0", "rejected", e.RequestRejected),
        (499, "context canceled", "cancelled", e.RequestCancelled),
        (429, "slow down", "rate", e.BackendUnavailable),
        (503, "queue full", "busy", e.BackendUnavailable),
        (500, "boom", "failed", e.BackendUnavailable),
        (502, "<html>bad gateway</html>", "failed", e.BackendUnavailable),
        (302, "", "unexpected", e.ProtocolError),
    ],
)
def test_status_and_message_decide_the_exception(
    status: int, message: str, failure: Failure, kind: type[e.BackendError]
) -> None:
    asked: list[Failure] = []

    def words(f: Failure) -> tuple[str, str]:
        asked.append(f)
        return f"{f}: {message}", f"fix {f}"

    assert failure_of(status, message) == failure
    err = status_error(status, message, words, backend="test")
    assert type(err) is kind and asked == [failure]
    assert err.message == f"{failure}: {message}" and err.hint == f"fix {failure}"
    assert err.backend == "test"


def test_a_backend_may_class_a_wrong_url_as_a_bad_setting() -> None:
    def words(f: Failure) -> tuple[str, str]:
        return "no /v1", "add /v1"

    err = status_error(404, "Not Found", words, backend="openai", wrong_url=e.RequestRejected)
    assert type(err) is e.RequestRejected
    model = status_error(404, "no model", words, backend="openai", wrong_url=e.RequestRejected)
    assert type(model) is e.ModelNotFound
