"""`ctxpipe hook NAME`: one of the hooks Claude Code (or Codex) runs, on a light path (no typer, no rich).

    ctxpipe hook pre-compact [--block-when tokens<N]     # PreCompact: the facts the summary must keep
    ctxpipe hook session-start                           # SessionStart: put back what a summary lost
    ctxpipe hook post-compact                            # PostCompact: check the summary, record the audit
    ctxpipe hook prompt                                  # UserPromptSubmit: put back what a summary lost

The hook's JSON comes on stdin. A hook never fails the session: any error (bad input, an unreadable
transcript, a bug) is one line on stderr, exit 0, nothing on stdout. The one exit 2 is pre-compact's
refusal, which Claude Code reads as "block this compaction".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

USAGE = "usage: ctxpipe hook {pre-compact,session-start,post-compact,prompt} [--block-when tokens<N]"
NAMES = ("pre-compact", "session-start", "post-compact", "prompt")


def _block_under(condition: str) -> int:
    """`tokens<N` (N may end in k): refuse a compaction of a context under N tokens, one not worth it."""
    import re

    found = re.fullmatch(r"\s*tokens\s*<\s*(\d+)\s*([kK]?)\s*", condition)
    if not found:
        raise ValueError(f"--block-when takes tokens<N (e.g. tokens<40k), not {condition!r}")
    return int(found.group(1)) * (1000 if found.group(2) else 1)


def _parse(argv: Sequence[str]) -> tuple[str, int | None]:
    if not argv or argv[0] not in NAMES:
        raise ValueError(USAGE)
    block: int | None = None
    rest = list(argv[1:])
    while rest:
        flag = rest.pop(0)
        name, _, value = flag.partition("=")
        if name == "--block-when" and argv[0] == "pre-compact":
            block = _block_under(value or (rest.pop(0) if rest else ""))
        else:
            raise ValueError(f"unknown option {flag!r}; {USAGE}")
    return argv[0], block


def _visible(text: str) -> str:
    """A hook's answer as Claude Code may show it: plain text escaped line by line; a JSON answer with
    each string in it escaped the same way (JSON's own escapes only hide a control character until
    Claude Code decodes the string and shows it)."""
    from .terminal import shown

    if text.lstrip().startswith("{"):
        try:
            answer = json.loads(text)
        except ValueError:
            pass
        else:
            return json.dumps(_strings_shown(answer), ensure_ascii=False) + "\n"
    return "".join(shown(line) + "\n" for line in text.splitlines())


def _strings_shown(value: Any) -> Any:
    from .terminal import shown

    if isinstance(value, str):
        return "\n".join(shown(line) for line in value.split("\n"))  # the lines stay lines
    if isinstance(value, dict):
        return {key: _strings_shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_strings_shown(item) for item in value]
    return value


def main(argv: Sequence[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        from .emit import say_and_exit

        say_and_exit(__doc__ or "", sys.stdout)
    code = 0
    try:
        name, block = _parse(argv)
        try:
            payload: Any = json.loads(sys.stdin.buffer.read() or b"{}")
        except ValueError as exc:  # UnicodeDecodeError too
            raise ValueError(f"the hook input on stdin is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        from .. import api

        answer = api.run_hook(name, payload, api.HookOptions(block_under_tokens=block))
        # Claude Code shows a hook's answer on the user's terminal: transcript text in it is escaped
        # line by line (in a JSON answer, in each string), and written as UTF-8 whatever the locale.
        if answer.stdout:
            sys.stdout.buffer.write(_visible(answer.stdout).encode())
        if answer.stderr:
            sys.stderr.buffer.write(_visible(answer.stderr).encode())
        code = answer.code
    except KeyboardInterrupt:
        code = 0
    except BaseException as exc:  # never fail the session: one line, exit 0, nothing on stdout
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            raise
        sys.stdout.flush()
        sys.stderr.buffer.write(_visible(f"ctxpipe hook: {str(exc) or type(exc).__name__}").encode())
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(code)
