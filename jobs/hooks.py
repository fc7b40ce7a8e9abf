"""ctxpipe inside a live session: the hook commands Claude Code (and Codex) run, and their installation.

Claude Code 2.1.332 runs, for one `/compact` (checked with the real client): PreCompact (its answer is
appended to the summary request as "Additional Instructions"), then SessionStart with source
"compact", then PostCompact (it gets `compact_summary`, the summary just written); it writes the
boundary and the summary to the transcript only after all three. So:

- pre-compact reads the history about to be summarized, prints the facts the summary must keep and
  keeps them in the session's state file;
- post-compact checks the summary it is handed against those facts, records the audit (the
  session's `.audit.jsonl`) and keeps what was lost as pending;
- session-start (any source, resume included) and prompt (UserPromptSubmit) put the pending facts
  back as `additionalContext`, once, which Claude Code writes into the session as a
  `hook_additional_context` attachment and sends to the model (and adds again after later
  compactions); on a resume whose cache has likely expired with a large context, session-start also
  tells the user what the resume costs and what `ctxpipe compact` would save.

A hook never fails the session: any error is one line on stderr, exit 0 and nothing on stdout
(cli/hook.py). The state lives in ~/.claude/ctxpipe/hooks/ (CLAUDE_CONFIG_DIR's, when set).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError

if TYPE_CHECKING:
    from ..core.hooks import KeepList

# The fact engine, the reader and the writer are imported where they are used: the hooks that
# usually have nothing to say (a prompt, a session start) answer from the state file alone.

RESUME_NOTE_TOKENS = 50_000  # a resume below this is cheap enough to say nothing about
SETTINGS_BACKUP = ".ctxpipe-backup"
SESSION_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass(frozen=True)
class HookAnswer:
    """What a hook prints and how it exits (Claude Code: exit 2 with stderr blocks a PreCompact)."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0


@dataclass(frozen=True)
class HookOptions:
    block_under_tokens: int | None = None  # pre-compact: refuse a compaction of a context smaller than this
    state_dir: Path | None = None  # where the sessions' state is kept (None: config_dir()/ctxpipe/hooks)


def config_dir() -> Path:
    """Claude Code's configuration folder: CLAUDE_CONFIG_DIR, else ~/.claude."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


# --- the session's state ------------------------------------------------------------------------


Pair = tuple[str, str]  # a fact as the state keeps it: (kind, text)


@dataclass
class SessionState:
    """What one session's hooks pass on: the facts before the compaction, what its summary lost
    (and the text that puts it back, written when it was found, so delivering it reads no transcript)."""

    facts: list[Pair] = field(default_factory=list)
    pending: list[Pair] = field(default_factory=list)  # lost, not yet put back
    pending_text: str = ""
    trigger: str | None = None

    def to_json(self) -> bytes:
        return json.dumps({"facts": self.facts, "pending": self.pending, "pending_text": self.pending_text, "trigger": self.trigger}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> SessionState:
        raw = json.loads(data)
        raw = raw if isinstance(raw, dict) else {}

        def pairs(key: str) -> list[Pair]:
            found = raw.get(key)
            return [(kind, text) for kind, text in found if isinstance(kind, str) and isinstance(text, str)] if isinstance(found, list) else []

        text, trigger = raw.get("pending_text"), raw.get("trigger")
        return cls(pairs("facts"), pairs("pending"), text if isinstance(text, str) else "", trigger if isinstance(trigger, str) else None)


def as_facts(pairs: list[Pair]) -> list[Any]:
    """core.summarize.Fact of each pair (a file again with the spellings that carry it)."""
    from ..core.summarize import FACT_KINDS, Fact, path_forms

    # A kind this version does not know (a state written by another) is left out, not guessed at.
    return [Fact(kind, text, path_forms(text) if kind in ("file", "current-work") else ()) for kind, text in pairs if kind in FACT_KINDS]


def _session_id(payload: Mapping[str, Any]) -> str:
    session = payload.get("session_id")
    if not isinstance(session, str) or not session or not set(session) <= SESSION_ID_CHARS or len(session) > 128:
        raise InputError("hook input", None, "no session_id a file may be named after")
    return session


def _state_path(options: HookOptions, session: str, suffix: str = ".json") -> Path:
    return (options.state_dir or config_dir() / "ctxpipe" / "hooks") / f"{session}{suffix}"


def load_state(options: HookOptions, session: str) -> SessionState:
    path = _state_path(options, session)
    try:
        return SessionState.from_json(path.read_bytes())
    except FileNotFoundError:
        return SessionState()
    except OSError as exc:
        raise InputError(str(path), None, f"unreadable hook state: {exc.strerror or exc}") from None
    except (ValueError, TypeError):
        # Damaged (a crash, a disk error): what it held cannot be delivered anyway; the session starts
        # its state again, and the next save replaces the file, instead of every hook failing on it.
        return SessionState()


def save_state(options: HookOptions, session: str, state: SessionState) -> None:
    from ..files.atomic import atomic_file

    path = _state_path(options, session)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the user's messages are in it: theirs only
    with atomic_file(path) as out:
        out.write(state.to_json())


# --- reading the transcript the hook names ----------------------------------------------------------


@dataclass(frozen=True)
class Context:
    facts: list[Any]  # core.summarize.Fact
    ranked: KeepList
    plan: str | None
    tokens: int | None  # the active context, by count's accounting (when asked for)


# Past this size the resume note says what the resume costs without the offline compact's dry run
# (about 5 MB a second): SessionStart waits on it, and Claude Code gives a hook 60 s.
RESUME_DRY_RUN_LIMIT = 32 << 20


def local_transcript(path: str) -> int:
    """The size of the transcript a hook's input names, a regular file on this machine: the hooks run
    offline, so a URL is not fetched, and a FIFO or a device is not waited on."""
    from ..files import storage

    if storage.is_remote(path):
        raise InputError(path, None, "not a local file (the hooks run offline)")
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(path, None, "not a regular file")
    return info.st_size


def read_context(payload: Mapping[str, Any], measure: bool = False) -> Context:
    """The facts of the transcript's active context (what a compaction is about to replace)."""
    from ..core.facts import gather
    from ..core.hooks import keep_list
    from ..core.jsonl import ReadStats, iter_buffer_entries
    from ..core.summarize import key_facts
    from ..files.inputs import detect_format, mapped
    from .count import CountOptions, count_buffer

    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise InputError("hook input", None, "no transcript_path")
    local_transcript(path)
    with mapped(path, on_error="skip") as buffer:
        transcript_format = detect_format(buffer, path)
        entries = list(iter_buffer_entries(buffer, path, "skip", ReadStats()))
        messages = transcript_format.messages(entries)
        side = transcript_format.typed_elsewhere(entries)
        gathered = gather(messages, side)
        key = key_facts(messages, [], side, gathered)
        tokens = int(count_buffer(buffer, path, CountOptions(on_error="skip")).count_report().tokens) if measure else None
    plan = gathered.plan[0] if gathered.plan and gathered.plan[1].strip() else None
    return Context(key, keep_list(key, gathered), plan, tokens)


# --- the hooks ------------------------------------------------------------------------------------------


def pre_compact(payload: Mapping[str, Any], options: HookOptions = HookOptions()) -> HookAnswer:
    from ..core.hooks import pre_compact_text

    session = _session_id(payload)
    context = read_context(payload, measure=options.block_under_tokens is not None)
    # Refused only on a measured context: a transcript that could not be counted (empty, not one) says
    # nothing of what the compaction is worth, and blocking it could leave a full session stuck.
    if options.block_under_tokens is not None and context.tokens and context.tokens < options.block_under_tokens:
        return HookAnswer(
            stderr=f"ctxpipe: not worth compacting: the context holds {context.tokens:,} tokens, under {options.block_under_tokens:,} (--block-when)",
            code=2,
        )
    state = load_state(options, session)
    trigger = payload.get("trigger")
    facts = [(fact.kind, fact.text) for fact in context.facts]
    save_state(options, session, SessionState(facts, state.pending, state.pending_text, trigger if isinstance(trigger, str) else None))
    cwd = payload.get("cwd")
    return HookAnswer(stdout=pre_compact_text(context.ranked, context.plan, cwd if isinstance(cwd, str) else None))


def post_compact(payload: Mapping[str, Any], options: HookOptions = HookOptions()) -> HookAnswer:
    from ..core.fields import rounded_down
    from ..core.hooks import reinjection_text, verdict
    from ..core.summarize import verify

    session = _session_id(payload)
    summary = payload.get("compact_summary")
    if not isinstance(summary, str):
        raise InputError("hook input", None, "no compact_summary")
    state = load_state(options, session)
    facts = as_facts(state.facts) if state.facts else read_context(payload).facts  # no PreCompact ran (installed since): read them now
    checked = verify(facts, summary)
    record = {
        "file": payload.get("transcript_path"),
        "session_id": session,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "trigger": payload.get("trigger"),
        "by": "claude-code",
        "facts": len(facts),
        "carried": len(facts) - len(checked.missing),
        "recall": rounded_down(checked.recall) if facts else None,
        "lost": [{"kind": fact.kind, "text": fact.text[:300]} for fact in checked.missing],
    }
    audit_path = _state_path(options, session, ".audit.jsonl")
    audit_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(os.open(audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:  # one write per line: lines of concurrent sessions never mix
        out.write(json.dumps(record).encode() + b"\n")
    pending = list(dict.fromkeys([*state.pending, *((fact.kind, fact.text) for fact in checked.missing)]))
    save_state(options, session, SessionState([], pending, reinjection_text(as_facts(pending)), state.trigger))
    return HookAnswer(stdout=verdict(len(facts), len(checked.missing)))


def _deliver(options: HookOptions, session: str, event: str, note: str | None = None) -> HookAnswer:
    """Put the pending facts back as the event's additionalContext, once (and a note for the user)."""
    state = load_state(options, session)
    text = state.pending_text
    if text:
        save_state(options, session, SessionState(state.facts, [], "", state.trigger))
    answer: dict[str, Any] = {}
    if text:
        answer["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": text}
    if note:
        answer["systemMessage"] = note
    return HookAnswer(stdout=json.dumps(answer) if answer else "")


def session_start(payload: Mapping[str, Any], options: HookOptions = HookOptions()) -> HookAnswer:
    session = _session_id(payload)
    note = None
    tokens = payload.get("context_tokens")
    if payload.get("source") == "resume" and payload.get("prompt_cache_likely_expired") is True and isinstance(tokens, int) and tokens >= RESUME_NOTE_TOKENS:
        note = resume_note(payload, tokens)
    return _deliver(options, session, "SessionStart", note)


def prompt_submit(payload: Mapping[str, Any], options: HookOptions = HookOptions()) -> HookAnswer:
    return _deliver(options, _session_id(payload), "UserPromptSubmit")


def resume_note(payload: Mapping[str, Any], tokens: int) -> str:
    """What resuming costs now, and what the offline compact would leave (its dry run: nothing written)."""
    cost = payload.get("estimated_cache_write_usd")
    paid = f" (about ${cost:.2f} to write the cache again)" if isinstance(cost, (int, float)) else ""
    path = str(payload.get("transcript_path") or "")
    try:
        after = compacted_tokens(path)
    except Exception:  # the note is advice: without the dry run it still says what the resume costs
        after = None
    saving = f"; `ctxpipe compact --in-place {shlex.quote(path)}` would bring it to about {after:,}" if after is not None and after < tokens else ""
    return f"ctxpipe: this resume sends {tokens:,} tokens to an expired prompt cache{paid}{saving}."


def compacted_tokens(path: str) -> int:
    from datetime import datetime, timezone

    from ..core.summarize import SummarizeSettings
    from ..files.inputs import mapped
    from .breaker import breaker
    from .pipeline import CompactOptions, compact_buffer

    if local_transcript(path) > RESUME_DRY_RUN_LIMIT:
        raise InputError(path, None, "too large for a dry run while the session starts")
    options = CompactOptions({"summarize": SummarizeSettings(engine="offline")}, now=datetime.now(timezone.utc))
    with mapped(path, on_error="skip") as buffer:
        _, report = compact_buffer(buffer, path, options, breaker())
    return report.tokens_after


HOOKS = {"pre-compact": pre_compact, "session-start": session_start, "post-compact": post_compact, "prompt": prompt_submit}


# --- installing them ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingsChange:
    path: Path
    before: bytes | None  # None: there was no settings file
    after: bytes | None  # None: the file goes (uninstall of what install created)
    backup: str | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after


TOO_DEEP = "nested too deeply to read and write back; left as it is"


def settings_path(project: bool, cwd: Path | None = None) -> Path:
    """The user's settings (CLAUDE_CONFIG_DIR's or ~/.claude/settings.json), or the project's."""
    return (cwd or Path.cwd()) / ".claude" / "settings.json" if project else config_dir() / "settings.json"


def this_program() -> str:
    """How the hooks start this ctxpipe: its interpreter running the package (no PATH needed). Claude
    Code runs a hook in the project's folder, which `-m` would put first on the import path: a
    project's own `platform.py` or `ctxpipe/` would run instead. `-P` (Python 3.11) keeps it off; on
    3.10 the console script beside the interpreter, whose folder is put there instead."""
    if sys.version_info >= (3, 11):
        return f"{shlex.quote(sys.executable)} -P -m ctxpipe"
    script = Path(sys.executable).with_name("ctxpipe")
    return shlex.quote(str(script)) if script.is_file() else f"{shlex.quote(sys.executable)} -m ctxpipe"


def _read_settings(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would hang the read, a device never end
            raise InputError(str(path), None, "not a regular file; left as it is")
        data = path.read_bytes()
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    try:
        settings = json.loads(data) if data.strip() else {}
    except ValueError as exc:
        raise InputError(str(path), None, f"not JSON: {exc}") from None
    except RecursionError:
        raise InputError(str(path), None, TOO_DEEP) from None
    if not isinstance(settings, dict):
        raise InputError(str(path), None, "not a JSON object")
    return data, settings


def _dumped(settings: dict[str, Any], path: Path) -> bytes:
    try:
        # allow_nan=False: a number JSON cannot write (1e999 read as infinity) would be written as
        # Infinity, which Claude Code's parser refuses, and with it the whole file.
        return json.dumps(settings, indent=2, ensure_ascii=False, allow_nan=False).encode() + b"\n"
    except (ValueError, UnicodeEncodeError) as exc:
        raise InputError(str(path), None, f"cannot be written back as it is read ({exc}); left as it is") from None


def install(path: Path, program: str | None = None, dry_run: bool = False) -> SettingsChange:
    """Merge ctxpipe's hooks into the settings file at `path` (atomic, the old file kept as a backup)."""
    from ..core.errors import SettingsError
    from ..core.hook_settings import HOOKS, hook_command, installed, malformed, ours, with_ctxpipe
    from ..files.storage import version

    program = program or this_program()
    if any(ours({"command": hook_command(program, name)}) != name for name in HOOKS.values()):
        # Its hooks would not be found again: a second install would add them twice, uninstall leave them.
        raise SettingsError("--program", f"{program!r} does not run ctxpipe by its name (…/ctxpipe, or … -m ctxpipe)")
    read = version(str(path))  # Claude Code may write the file meanwhile: replaced only if it did not
    before, settings = _read_settings(path)
    problem = malformed(settings)
    if problem is not None:
        raise InputError(str(path), None, f"{problem}; left as it is")
    try:
        wanted = with_ctxpipe(settings, program)
        after = before if wanted == settings and before is not None else _dumped(wanted, path)
        first = not installed(settings)
    except RecursionError:
        raise InputError(str(path), None, TOO_DEEP) from None
    # Installed already: the backup kept is the file before the first install (uninstall gives its bytes back).
    return _write(SettingsChange(path, before, after), dry_run, replace_backup=first, if_version=read)


def uninstall(path: Path, dry_run: bool = False) -> SettingsChange:
    """Take ctxpipe's hooks out of the settings at `path`; when what is left is what install found,
    its bytes come back as they were (the backup install kept)."""
    from ..core.hook_settings import installed, without_ctxpipe
    from ..files.storage import version

    read = version(str(path))
    before, settings = _read_settings(path)
    try:
        if before is None or not installed(settings):
            return SettingsChange(path, before, before)
        left = without_ctxpipe(settings)
        after: bytes | None = _dumped(left, path)
    except RecursionError:
        raise InputError(str(path), None, TOO_DEEP) from None
    try:
        kept = Path(str(path) + SETTINGS_BACKUP).read_bytes()
        if json.loads(kept) == left:
            after = kept
    except FileNotFoundError:
        if not left:
            after = None  # install made the file: it goes
    except (OSError, ValueError, RecursionError):
        pass
    return _write(SettingsChange(path, before, after), dry_run, if_version=read)


def _write(change: SettingsChange, dry_run: bool, replace_backup: bool = True, if_version: tuple[object, ...] | None = None) -> SettingsChange:
    """`change` made (atomically; the old file kept as the backup), unless the file is no longer the
    version it was read as (`if_version`): then ChangedMeanwhile, and it is left as it is now."""
    from ..core.errors import ChangedMeanwhile
    from ..files.atomic import atomic_file, keep_backup
    from ..files.storage import version

    if dry_run or not change.changed:
        return change
    with contextlib.suppress(OSError):
        if change.before is not None and not stat.S_IMODE(os.stat(change.path).st_mode) & 0o222:
            # Made read-only (chmod a-w): kept from changes, ctxpipe's too (a rename needs no write
            # permission on the file, and root has every permission).
            raise InputError(str(change.path), None, "read-only; left as it is (chmod u+w it to let ctxpipe change it)")
    if version(str(change.path)) != if_version:
        raise ChangedMeanwhile(str(change.path), None, "changed while ctxpipe read it (is Claude Code writing it?); left as it is: try again")
    if change.after is None:
        # The file install made; through a link (a dotfiles manager's, to a file not there yet), the
        # file it made at the link's end: the link stays, as it was.
        os.unlink(os.path.realpath(change.path))
        return change
    backup = None
    change.path.parent.mkdir(parents=True, exist_ok=True)
    backup_path = str(change.path) + SETTINGS_BACKUP
    if change.before is not None and (replace_backup or not os.path.exists(backup_path)):
        if os.path.exists(backup_path):
            os.unlink(backup_path)  # one backup: the settings as they were before the last change
        backup = keep_backup(str(change.path), SETTINGS_BACKUP, change.before)
    with atomic_file(change.path, if_version) as out:
        out.write(change.after)
    return SettingsChange(change.path, change.before, change.after, backup)
