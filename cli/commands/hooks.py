"""`ctxpipe hooks install|uninstall`: ctxpipe's hooks in Claude Code's settings, and out again."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

from .. import declare, streams
from ..flags import with_options
from ..terminal import json_shown_bytes


class Action(str, Enum):
    install = "install"
    uninstall = "uninstall"


@with_options()  # no bundle: its parameters declared without typer, as every command's
def hooks(
    action: Annotated[Action, declare.Argument(help="install: add ctxpipe's hooks. uninstall: take out only what install added.")],
    project: Annotated[bool, declare.Option("--project", help="The project's .claude/settings.json (in the current folder), not the user's.")] = False,
    dry_run: Annotated[bool, declare.Option("--dry-run", help="Show the settings file as it would be; change nothing.")] = False,
    settings: Annotated[Optional[str], declare.Option("--settings", help="This settings file instead.", show_default=False)] = None,
    program: Annotated[
        Optional[str],
        declare.Option(
            "--program",
            help="How the hooks start ctxpipe (default: this interpreter, `python -P -m ctxpipe`; with --project, `ctxpipe` on PATH, as a shared file needs).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Put ctxpipe inside live Claude Code sessions: its compaction hooks in the settings file.

    install merges four hooks into ~/.claude/settings.json (CLAUDE_CONFIG_DIR's when set; the
    project's with --project): PreCompact runs `ctxpipe hook pre-compact` (the facts the summary
    must keep, sent with the summary request), PostCompact `ctxpipe hook post-compact` (checks the
    summary, records the audit), SessionStart `ctxpipe hook session-start` and UserPromptSubmit
    `ctxpipe hook prompt` (put back, once, what the summary lost; on an expensive resume, say so).
    Every other key and hook is kept; the file is written atomically, the old one kept beside it
    (.ctxpipe-backup); a second install changes nothing. uninstall takes out only ctxpipe's hooks.

    Example:  ctxpipe hooks install --dry-run
    """
    from ... import api
    from ...core.errors import SettingsError

    if action is Action.install:
        try:
            change = api.install_hooks(project=project, dry_run=dry_run, settings=settings, program=program)
        except SettingsError as exc:  # a --program whose hooks would not be found again: a usage error
            raise declare.BadParameter(exc.what, param_hint=exc.flag) from None
    else:
        change = api.uninstall_hooks(project=project, dry_run=dry_run, settings=settings)
    where = str(change.path)
    if dry_run:
        if change.changed:
            streams.note(f"{where} would become:")
            with streams.open_output(None) as out:
                # JSON, its strings as a terminal may show them: a settings file's text is escaped too.
                out.write(json_shown_bytes(change.after) if change.after else b"(removed: install created it)\n")
        else:
            streams.note(f"{where}: nothing to change")
        return
    if not change.changed:
        streams.note(f"{where}: nothing to change ({'already installed' if action is Action.install else 'no ctxpipe hook in it'})")
    elif action is Action.install:
        streams.note(f"{where}: ctxpipe's hooks installed" + (f" (the old file kept as {change.backup})" if change.backup else ""))
    else:
        streams.note(f"{where}: ctxpipe's hooks taken out" + ("" if change.after is not None else " (the file install created is gone)"))
