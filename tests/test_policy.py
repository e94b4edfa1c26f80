"""The organisation's managed policy (issue 39): a file above the user's settings
(`SYNCONFROUTE_POLICY`, else /etc/synconfroute/policy.toml) that binds them. A user
setting that widens the URL or never_send is refused with a message naming the policy;
ceilings may be tightened, never raised; any other key it sets is fixed; a policy that
does not parse keeps everything local. Through the real server over stdio too.

Before this change there was no policy: SYNCONFROUTE_POLICY was ignored, the user's URL
won and the code went there.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as t

from synconfroute.server.settings import config
from synconfroute.server.settings.config import POLICY_ENV, url_allowed
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import ROOT, capabilities, inline_request, open_doc, start, stop

pytestmark = pytest.mark.timeout(120)

UNSURE = TokenScript.of(" a", " * 2", logprob=-4.0)  # escalates when asked


def policy_file(folder: Path, url: str, extra: str = "") -> Path:
    path = folder / "policy.toml"
    path.write_text(
        f'[remote]\nurl = "{url}"\nallowed_urls = ["{url}"]\n'
        'model = "Qwen/Qwen2.5-Coder-32B-Instruct"\n'
        '[privacy]\nnever_send = ["secrets/**"]\n'
        "[routing]\nescalation_budget = 0.5\n" + extra,
        encoding="utf-8",
    )
    return path


def user_file(folder: Path, text: str) -> Path:
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_policy_binds_the_user_settings(tmp_path: Path) -> None:
    pol = policy_file(tmp_path, "https://gpu.corp.example/v1")
    user = user_file(
        tmp_path,
        '[remote]\nurl = "https://elsewhere.example/v1"\nmodel = "other"\n'
        '[privacy]\nnever_send = ["*.secret"]\n'
        "[routing]\nescalation_budget = 0.9\n",
    )
    loaded = config.load(user, environ={POLICY_ENV: str(pol)})
    s = loaded.settings
    assert s.remote.all_urls == ["https://gpu.corp.example/v1"]
    assert s.remote.model == "Qwen/Qwen2.5-Coder-32B-Instruct"  # fixed
    assert s.privacy.never_send == ["secrets/**", "*.secret"]  # the user's add up
    assert s.routing.escalation_budget == 0.5  # a ceiling
    messages = {i.key: i.message for i in loaded.issues}
    for key in ("remote.url", "remote.model", "privacy.never_send", "routing.escalation_budget"):
        assert key in messages and str(pol) in messages[key], (key, messages)
    assert loaded.policy is not None and loaded.policy.sets("remote.url")
    assert not s.privacy.local_only  # refusals keep the policy's values; nothing closes
    # Tighter than the policy is the user's to choose.
    tight = user_file(tmp_path, "[routing]\nescalation_budget = 0.2\n[remote]\nmodel = 'x'\n")
    t2 = config.load(tight, environ={POLICY_ENV: str(pol)})
    assert t2.settings.routing.escalation_budget == 0.2
    # The editor's user-scope settings (initializationOptions) are bound the same way.
    merged, issues = config.merge(
        loaded.settings,
        {"remote": {"urls": ["https://elsewhere.example/v1"]}, "privacy": {"never_send": []}},
        policy=loaded.policy,
    )
    assert merged.remote.all_urls == ["https://gpu.corp.example/v1"]
    assert merged.privacy.never_send == ["secrets/**"]
    assert {i.key for i in issues} == {"remote.url", "privacy.never_send"}, issues
    assert all(str(pol) in i.message for i in issues), issues


def test_allowed_urls_alone_pins_where_code_goes(tmp_path: Path) -> None:
    pol = tmp_path / "policy.toml"
    pol.write_text('[remote]\nallowed_urls = ["https://gpu.corp.example/v1"]\n', "utf-8")
    ok = user_file(tmp_path, '[remote]\nurl = "https://GPU.corp.example/v1/"\nmodel = "m"\n')
    assert config.load(ok, environ={POLICY_ENV: str(pol)}).settings.remote.configured
    bad = user_file(tmp_path, '[remote]\nurl = "https://gpu.corp.example.evil/v1"\nmodel = "m"\n')
    loaded = config.load(bad, environ={POLICY_ENV: str(pol)})
    assert not loaded.settings.remote.configured
    (issue,) = [i for i in loaded.issues if i.key == "remote.url"]
    assert "outside remote.allowed_urls" in issue.message and str(pol) in issue.message
    assert url_allowed("https://h/v1/x", ["https://h/v1"])
    assert not url_allowed("https://h/v10", ["https://h/v1"])
    assert not url_allowed("http://h/v1", ["https://h/v1"])


def test_local_only_set_by_the_policy_cannot_be_lifted(tmp_path: Path) -> None:
    from synconfroute.server.settings.settings_state import SettingsState

    pol = tmp_path / "policy.toml"
    pol.write_text("[privacy]\nlocal_only = true\n", "utf-8")
    user = user_file(tmp_path, "[privacy]\nlocal_only = false\n")
    loaded = config.load(user, environ={POLICY_ENV: str(pol)})
    assert loaded.settings.privacy.local_only
    state = SettingsState(loaded)
    state.apply(init={"privacy": {"local_only": False}})
    assert state.current.privacy.local_only
    assert state.toggle_local_only() is True and state.current.privacy.local_only


@pytest.mark.parametrize(
    "text",
    ["[remote\nurl = 'x'", "[privacy]\nnever_sent = ['x']\n", "[routing]\nescalation_budget = 7\n"],
    ids=["bad-toml", "unknown-key", "bad-value"],
)
def test_a_policy_that_does_not_read_keeps_everything_local(tmp_path: Path, text: str) -> None:
    pol = tmp_path / "policy.toml"
    pol.write_text(text, "utf-8")
    user = user_file(tmp_path, '[remote]\nurl = "http://gpu:8000/v1"\nmodel = "m"\n')
    loaded = config.load(user, environ={POLICY_ENV: str(pol)})
    assert loaded.settings.privacy.local_only, loaded.issues
    assert any(i.fail_closed and str(pol) in i.source for i in loaded.issues), loaded.issues


def test_settings_and_doctor_say_what_the_policy_set(tmp_path: Path) -> None:
    pol = policy_file(tmp_path, "http://127.0.0.1:9/v1")
    user = user_file(tmp_path, '[local]\nbackend = "ollama"\nurl = "http://127.0.0.1:9"\n')
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        POLICY_ENV: str(pol),
    }
    for args, want in (
        (["settings"], ["policy file    " + str(pol), "policy"]),
        (["doctor"], [f"policy    {pol}: sets remote.url"]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "synconfroute", "--config", str(user), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        for w in want:
            assert w in done.stdout, (args, done.stdout[-3000:], done.stderr[-2000:])
    assert "url" in done.stdout


async def test_policy_through_the_real_server(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    """The policy pins the URL and adds never_send; the user's editor settings point
    elsewhere and drop never_send: refused (the messages name the policy), the code goes
    only to the pinned cluster, and never from secrets/."""
    local, pinned = fakes
    local.script(UNSURE, always=True)
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    app, secret = ws / "app.py", ws / "secrets" / "k.py"
    text = "def add(a, b):\n    return \n"
    app.write_text(text, "utf-8")
    secret.write_text(text, "utf-8")
    pol = policy_file(tmp_path, pinned.base_url)
    user = user_file(
        tmp_path,
        f'[local]\nbackend = "ollama"\nurl = "{local.url}"\nmodel = "qwen2.5-coder:3b"\n'
        '[remote]\napi_key_env = ""\ntimeout = 5\n'
        "[editor]\ndebounce_ms = 0\nadaptive_debounce = false\n",
    )
    with FakeOpenAI() as other:
        widening = {"remote": {"url": other.base_url}, "privacy": {"never_send": []}}
        client, _ = await start(
            user,
            capabilities("visual-studio-code", inline=True),
            init_options=widening,
            env={POLICY_ENV: str(pol)},
            root=ws,
        )
        try:
            open_doc(client, app.as_uri(), text)
            open_doc(client, secret.as_uri(), text)
            for uri in (app.as_uri(), secret.as_uri()):
                await client.text_document_inline_completion_async(
                    inline_request(uri, t.Position(1, 11))
                )
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            await asyncio.sleep(0.3)
        finally:
            await stop(client)
        assert other.received("/v1/completions") == []
    sent = pinned.received("/v1/completions")
    assert len(sent) == 1, [r.json() for r in sent]  # the public file only
    messages = "\n".join(m.message for m in client.messages)
    assert "remote.url" in messages and "privacy.never_send" in messages, messages
    assert str(pol) in messages, messages
    assert status["managed_policy"]["path"] == str(pol), status
    assert "remote.allowed_urls" in status["managed_policy"]["sets"], status
