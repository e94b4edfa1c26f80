"""The one privacy question, and the egress gate that asks it before every remote send.

Privacy by allow-list: a source of a prompt (the current file's window, or another file's
code as context) may leave only when, at the moment of sending, it is known to be public.
Judged on its resolved real path (symlinks followed, `.`/`..` removed, case-folded where
the file system folds case) and on the path it was named by, it must:

- exist now as a regular file (a moved, deleted or never-saved file is not known);
- lie inside a workspace folder open now; with no folder open at all, inside the git
  repository of the current file (context), its relative `never_send` patterns then
  matched from every folder above it (a file in no repository and no folder: see below);
- not be ignored by git, from any of git's sources (`gitignore.py`);
- match no `never_send` pattern, the user's or those of a folder that holds it (each
  folder's own workspace settings, `FolderRules`), and no built-in secret-file pattern;
- lie in no folder whose settings keep everything local or are not known yet.

Anything else is private, with a named reason. A window with no path at all (text given
directly, as the CLI does) has no file to match and is judged by `local_only` alone. A
file in no repository with no folder open may still escalate under the user's own rules:
its relative `never_send` patterns and the `.gitignore` files are matched from every
folder above it (over-private, never under-private).

`make_plan` resolves each source once per request and tier (a `PromptPlan`);
`EgressGate` checks the plan at the moment the request is sent, under the settings of
that moment: the backend factory wraps every remote backend in it (`routing.gated`), so
no remote backend exists without it.
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
from collections.abc import Callable, Iterable, Sequence

import attrs

from synconfroute.clients.errors import EgressRefused
from synconfroute.clients.plan import FolderRules, PlanSource, PromptPlan, Role

from ..settings.config import PrivacySettings, Settings
from . import gitignore, privacy

log = logging.getLogger(__name__)

NEVER_SEND = "never-send"
SECRET_FILE = "secret-file"
GITIGNORED = "gitignored"
OUTSIDE = "outside-workspace"
UNRESOLVABLE = "unresolvable"
LOCAL_ONLY = "local-only"
NOT_A_FILE = "not-a-file"  # missing (moved, deleted, never saved) or not a regular file
NO_ROOT = "no-root"  # no folder open and no git repository to stand in for one
FOLDER_CLOSED = "folder-settings"  # its folder keeps it local, or its settings are unknown
GIT_UNREADABLE = "git-unreadable"  # its repository exists but cannot be read


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
    folders: Sequence[FolderRules] = (),
) -> PromptPlan:
    """The plan of one tier's prompt: the window of `path`, then each context file
    (path, characters), every one with its resolved real path; `roots` are the workspace
    folders open now, `folders` their own settings (roots as named; resolved here, each
    path once: a folder's settings name the folder its root is)."""
    seen: dict[str, bool] = {}  # what the file system said during this plan
    real: dict[str, str | None] = {}
    folds = bool(fold)
    probe = roots[0] if roots else path
    if fold is None and probe.startswith("/"):
        # Whether the file system folds case, probed on the first folder (else the file),
        # resolved first: the probe then asks no `stat` of its own.
        r = privacy.real_path(probe, fold=False, seen=seen)
        folds = privacy.folds_case(probe, seen)
        real[probe] = r.casefold() if folds and r is not None else r

    def resolved(p: str) -> str | None:
        if p not in real:
            real[p] = privacy.real_path(p, fold=folds, seen=seen)
        return real[p]

    def src(role: Role, p: str, chars: int) -> PlanSource:
        return PlanSource(role, privacy.normal_path(p, fold=folds), resolved(p), chars)

    sources = [src("window", path, window_chars)]
    sources += [src("context", p, n) for p, n in context]
    real_roots = tuple(r for r in (resolved(x) for x in roots) if r)
    rules = []
    for f in folders:
        root = resolved(f.root)
        if root is not None:
            rules.append(f if root == f.root else attrs.evolve(f, root=root))
    return PromptPlan(
        tier=tier,
        sources=tuple(sources),
        roots=tuple(privacy.normal_path(r, fold=folds).rstrip("/") for r in roots),
        real_roots=real_roots,
        folds_case=folds,
        folders=tuple(rules),
    )


# -- the question --------------------------------------------------------------------------


def private_reason(
    src: PlanSource,
    plan: PromptPlan,
    settings: PrivacySettings,
    *,
    memo: gitignore.Memo | None = None,
) -> str | None:
    """Why `src` may not leave the machine under `settings`, or None when it is known to
    be public now (the allow-list in the module's docstring). `memo`: what an earlier
    question of the same check read (the same moment), shared across its sources."""
    memo = {} if memo is None else memo
    if src.role == "window" and not src.path:
        return None  # text with no file behind it (the CLI's stdin): nothing to match
    if src.real is None:
        return UNRESOLVABLE
    real = src.real
    if not _regular_file(real):
        return NOT_A_FILE
    fold = plan.folds_case
    named = privacy.normal_path(src.path, fold=fold)
    repo = gitignore.repository_root(real, memo)
    # Where its relative patterns are anchored: the folders open now that hold it (and
    # its repository); with no folder, every folder above it (over-private is safe).
    if plan.real_roots:
        if not privacy.within(real, plan.real_roots):
            return OUTSIDE
        # The repository's root anchors them too: a folder opened below it (an editor
        # that took the file's own folder as root) must not un-anchor `secrets/**`.
        anchors = (*plan.real_roots, repo) if repo is not None else plan.real_roots
        named_anchors = plan.roots
    else:
        window = plan.window
        home = repo if src.role == "window" or window is None else _repo_of(window, memo)
        if src.role == "context" and (home is None or not privacy.within(real, (home,))):
            return OUTSIDE  # with no folder, context comes only from the file's repository
        # Relative patterns from every folder above it: the folder they were written for
        # is not known (it may have been removed, below the repository root).
        anchors, named_anchors = _folders_above(real), _folders_above(named)
    mine = [f for f in plan.folders if privacy.within(real, (f.root,))]
    if any(f.closed or (f.no_context and src.role == "context") for f in mine):
        return FOLDER_CLOSED
    never = (*settings.never_send, *(p for f in mine for p in f.never_send))
    secret = settings.secret_files or any(f.secret_files for f in mine)
    # Each name of it, relative to each anchor and absolute (real and named are often one).
    names = {
        real,
        named,
        *privacy.relative_paths(real, anchors),
        *privacy.relative_paths(named, named_anchors),
    }

    def covered(patterns: Sequence[str]) -> bool:
        pats = tuple(p.casefold() for p in patterns) if fold else tuple(patterns)
        return any(privacy.never_send(pats, name) for name in names)

    # One pass over both lists; only a hit asks which list it was.
    if covered((*never, *privacy.SECRET_PATTERNS) if secret else never):
        if covered(never):
            return NEVER_SEND
        return SECRET_FILE
    if repo is not None:
        try:
            if gitignore.ignored_in_repository(real, repo, fold=fold, memo=memo):
                return GITIGNORED
        except gitignore.GitUnreadable as exc:
            log.info("egress gate: %s", exc)
            return GIT_UNREADABLE
    else:
        tops = [r for r in anchors if privacy.within(real, (r,))] or ["/"]
        if any(gitignore.ignored_below(real, top, fold=fold, memo=memo) for top in tops):
            return GITIGNORED
    return None


def _regular_file(real: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(real).st_mode)
    except (OSError, ValueError):
        return False


def _repo_of(src: PlanSource, memo: gitignore.Memo) -> str | None:
    return gitignore.repository_root(src.real, memo) if src.real else None


def _folders_above(path: str) -> tuple[str, ...]:
    """Every folder above `path` (no folder and no repository: a relative pattern may be
    meant from any of them, so it is matched from each)."""
    out = []
    d = posixpath.dirname(path)
    while d and d != "/":
        out.append(d)
        d = posixpath.dirname(d)
    return tuple(out)


def refusal(plan: PromptPlan | None, settings: Settings) -> str | None:
    """Why a request with this plan may not be sent under `settings` (None: it may)."""
    if plan is not None and plan.sources and all(s.role == "dataset" for s in plan.sources):
        return None  # benchmark or probe text: none of the workspace's code
    if settings.privacy.local_only:
        return LOCAL_ONLY
    if plan is None or plan.window is None:
        return UNRESOLVABLE  # a request that does not say what it holds is not sent
    memo: gitignore.Memo = {}  # one moment: each folder's files are read once
    for src in plan.sources:
        why = private_reason(src, plan, settings.privacy, memo=memo)
        if why is not None:
            return f"{why} ({src.role})"
    return None


def check_path(
    path: str,
    roots: Sequence[str],
    settings: PrivacySettings,
    role: Role = "window",
    *,
    window: str = "",
    folders: Sequence[FolderRules] = (),
) -> str | None:
    """`private_reason` for one path, resolved now (the pipeline's early questions);
    `window`: the current file, whose repository stands in for a folder when none is
    open (a context file's question)."""
    if role == "window":
        plan = make_plan("remote", path, roots, folders=folders)
        return private_reason(plan.sources[0], plan, settings)
    plan = make_plan("remote", window, roots, context=[(path, 0)], folders=folders)
    return private_reason(plan.sources[1], plan, settings)


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


# -- .gitignore ------------------------------------------------------------------------


def gitignored(real: str, root: str, *, fold: bool = False) -> bool:
    """Whether the `.gitignore` files from `root` down exclude `real` (outside a git
    repository; inside one, git's own answer is asked: `gitignore.py`)."""
    return gitignore.ignored_below(real, root, fold=fold)
