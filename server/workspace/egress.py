"""The one privacy question, and the egress gate that asks it before every remote send.

A source of a prompt (the current file's window, or another file's code as context) is
private when, judged on its resolved real path (symlinks followed, `.`/`..` removed,
case-folded where the file system folds case) and on the path it was named by:

- it matches a `privacy.never_send` pattern, or a built-in secret-file pattern
  (`privacy.secret_files`);
- a `.gitignore` in its workspace folder excludes it (generated or machine-local files);
- it lies outside every workspace folder (context: always, even with no folder open;
  the window: when the editor has workspace folders);
- it cannot be resolved (not an absolute file path: `untitled:` buffers, notebook
  cells). A window with no path at all (text given directly, as the CLI does) has no
  file to match and is judged by `local_only` alone.

`make_plan` resolves each source once per request and tier (a `PromptPlan`);
`EgressGate` is installed on the remote client and checks the plan at the moment the
request is sent, under the settings of that moment.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence

import attrs

from synconfroute.clients.errors import EgressRefused
from synconfroute.clients.plan import PlanSource, PromptPlan, Role

from ..settings.config import PrivacySettings, Settings
from . import files, privacy

log = logging.getLogger(__name__)

NEVER_SEND = "never-send"
SECRET_FILE = "secret-file"
GITIGNORED = "gitignored"
OUTSIDE = "outside-workspace"
UNRESOLVABLE = "unresolvable"
LOCAL_ONLY = "local-only"


# -- resolving ---------------------------------------------------------------------------


def source(role: Role, path: str, chars: int = 0, *, fold: bool = False) -> PlanSource:
    """One prompt source, resolved now."""
    return PlanSource(
        role, privacy.normal_path(path, fold=fold), privacy.real_path(path, fold=fold), chars
    )


def make_plan(
    tier: str,
    path: str,
    roots: Sequence[str],
    *,
    window_chars: int = 0,
    context: Iterable[tuple[str, int]] = (),
    fold: bool | None = None,
) -> PromptPlan:
    """The plan of one tier's prompt: the window of `path`, then each context file
    (path, characters), every one with its resolved real path."""
    folds = _folds(path, roots) if fold is None else fold
    sources = [source("window", path, window_chars, fold=folds)]
    sources += [source("context", p, n, fold=folds) for p, n in context]
    real_roots = tuple(r for r in (privacy.real_path(x, fold=folds) for x in roots) if r)
    return PromptPlan(
        tier=tier,
        sources=tuple(sources),
        roots=tuple(privacy.normal_path(r, fold=folds).rstrip("/") for r in roots),
        real_roots=real_roots,
        folds_case=folds,
    )


def _folds(path: str, roots: Sequence[str]) -> bool:
    probe = roots[0] if roots else path
    return privacy.folds_case(probe) if probe.startswith("/") else False


# -- the question --------------------------------------------------------------------------


def private_reason(src: PlanSource, plan: PromptPlan, settings: PrivacySettings) -> str | None:
    """Why `src` may not leave the machine under `settings`, or None when it may."""
    if src.role == "window" and not src.path:
        return None  # text with no file behind it (the CLI's stdin): nothing to match
    if src.real is None:
        return UNRESOLVABLE
    if (src.role == "context" or plan.real_roots) and not privacy.within(src.real, plan.real_roots):
        return OUTSIDE
    fold = plan.folds_case
    named = privacy.normal_path(src.path, fold=fold)

    def covered(patterns: Sequence[str]) -> bool:
        pats = tuple(p.casefold() for p in patterns) if fold else tuple(patterns)
        return privacy.never_send(pats, src.real or "", plan.real_roots) or privacy.never_send(
            pats, named, plan.roots
        )

    if covered(settings.never_send):
        return NEVER_SEND
    if settings.secret_files and covered(privacy.SECRET_PATTERNS):
        return SECRET_FILE
    root = _root_of(src.real, plan.real_roots)
    if root is not None and gitignored(src.real, root, fold=fold):
        return GITIGNORED
    return None


def refusal(plan: PromptPlan | None, settings: Settings) -> str | None:
    """Why a request with this plan may not be sent under `settings` (None: it may)."""
    if plan is not None and plan.sources and all(s.role == "dataset" for s in plan.sources):
        return None  # benchmark or probe text: none of the workspace's code
    if settings.privacy.local_only:
        return LOCAL_ONLY
    if plan is None or plan.window is None:
        return UNRESOLVABLE  # a request that does not say what it holds is not sent
    for src in plan.sources:
        why = private_reason(src, plan, settings.privacy)
        if why is not None:
            return f"{why} ({src.role})"
    return None


def check_path(
    path: str, roots: Sequence[str], settings: PrivacySettings, role: Role = "window"
) -> str | None:
    """`private_reason` for one path, resolved now (the pipeline's early questions)."""
    plan = make_plan("remote", path, roots)
    src = plan.sources[0] if role == "window" else attrs.evolve(plan.sources[0], role=role)
    return private_reason(src, plan, settings)


def in_workspace(path: str, roots: Sequence[str]) -> bool:
    """Whether `path` really lies inside one of the workspace folders `roots` (symlinks
    followed on both sides): only such files are indexed."""
    real = privacy.real_path(path)
    real_roots = [r for r in (privacy.real_path(x) for x in roots) if r]
    return real is not None and privacy.within(real, real_roots)


class EgressGate:
    """Installed on the remote client: the one check between a request and the wire.

    `settings` gives the settings of the moment (the pipeline's, which privacy changes
    update in place of a request's snapshot)."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self.checked = 0
        self.refused = 0

    def __call__(self, body: bytes, plan: PromptPlan | None) -> None:
        self.checked += 1
        why = refusal(plan, self._settings())
        if why is None and not body:
            why = "empty body"
        if why is not None:
            self.refused += 1
            log.info("egress gate: refused a remote request: %s", why)
            raise EgressRefused(
                f"not sent: a source of the prompt is private ({why})",
                backend="openai",
                reason=why,
            )


def guard(remote: object, settings: Callable[[], Settings]) -> EgressGate | None:
    """Install an egress gate on `remote` (a client with `set_egress`); the gate."""
    install = getattr(remote, "set_egress", None)
    if install is None:
        return None
    gate = EgressGate(settings)
    install(gate)
    return gate


# -- .gitignore ------------------------------------------------------------------------


def _root_of(real: str, roots: Sequence[str]) -> str | None:
    inside = [r for r in roots if privacy.within(real, (r,))]
    return max(inside, key=len) if inside else None


@functools.lru_cache(maxsize=1024)
def _rules(
    folder: str, mtime_ns: int, fold: bool
) -> tuple[tuple[re.Pattern[str], bool, bool], ...]:
    """(regex, folder-only, negated) per line of `folder`/.gitignore (cached by mtime)."""
    try:
        text = files.read_regular_text(
            os.path.join(folder, ".gitignore"), files.GITIGNORE_MAX_BYTES
        )
    except (files.NotRegular, files.TooLarge):  # a FIFO, a device: its rules are unknown,
        return ((re.compile(".*", re.DOTALL), False, False),)  # so all below is private
    except OSError:
        return ()
    lines = text.splitlines()
    out = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        negate = line.startswith("!")
        body = line[1:] if negate else line
        compiled = privacy._compile(body.casefold() if fold else body)
        if compiled is not None:
            out.append((compiled[0], compiled[1], negate))
    return tuple(out)


def _folder_rules(folder: str, fold: bool) -> tuple[tuple[re.Pattern[str], bool, bool], ...]:
    try:
        mtime = os.stat(os.path.join(folder, ".gitignore")).st_mtime_ns
    except (OSError, ValueError):
        return ()
    return _rules(folder, mtime, fold)


def gitignored(real: str, root: str, *, fold: bool = False) -> bool:
    """Whether the `.gitignore` files from `root` down to `real`'s folder exclude `real`
    (or a folder above it), with git's rules: the last matching line wins, `!` negates,
    patterns are relative to the folder of their .gitignore."""
    rel = real[len(root.rstrip("/")) + 1 :] if real != root else ""
    if not rel:
        return False
    parts = rel.split("/")
    top = root.rstrip("/")
    # The .gitignore of each folder from the root down (one stat each).
    rules = [_folder_rules("/".join([top, *parts[:i]]), fold) for i in range(len(parts))]
    for depth in range(1, len(parts) + 1):  # each folder above the file, then the file
        is_dir = depth < len(parts)
        target = parts[:depth]
        ignored = False
        for base_depth in range(depth):
            sub = "/".join(target[base_depth:])
            for regex, dir_only, negate in rules[base_depth]:
                if dir_only and not is_dir:
                    continue
                if regex.fullmatch(sub):
                    ignored = not negate
        if ignored:
            return True  # git does not look inside an ignored folder
    return False
