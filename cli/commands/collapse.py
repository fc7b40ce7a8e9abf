"""`ctxpipe collapse`: fold repeated identical tool results."""

from __future__ import annotations

from ..options import Format, InputPath, OnError, Output, Unbuffered
from ..stage_options import NoMarker
from ..stages import Ledger, Now, Report, ReportJson, parse_now, print_report, run_stage


def collapse(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    no_marker: NoMarker = False,
    now: Now = None,
    report: Report = False,
    report_json: ReportJson = None,
    ledger: Ledger = None,
    unbuffered: Unbuffered = False,
    on_error: OnError = "fail",  # type: ignore[assignment]
) -> None:
    """Fold a tool result that a later call repeated exactly into a pointer to the later copy.

    Same tool, same input, same result (a file read again with nothing changed, the same `git
    status` twice): the earlier copy becomes a stub naming the tool, its input and the later call.
    The latest copy stays whole. A result that differs (the file changed in between) is never
    folded, nor is a full read that Claude Code's "file unchanged" stub points back to.

    Example:  ctxpipe microcompact session.jsonl | ctxpipe collapse --report > smaller.jsonl
    """
    from ...core.collapse import CollapseConfig
    from ...core.collapse import collapse as run

    config = CollapseConfig(not no_marker, parse_now(now))
    outcome = run_stage(
        "collapse", path, input_format, on_error, output, ledger, report_json, lambda entries, fmt, _measure: run(entries, fmt, config), unbuffered
    )
    if report:
        print_report(outcome.report)
