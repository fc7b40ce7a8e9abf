"""Budget settings from the environment, as Claude Code reads them, with flags over them.

Kept apart from cli/budget_options.py (which declares the typer options) so that `ctxpipe
statusline`, which starts without typer, reads the same settings the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..core.records import TYPE_CHECKING

if TYPE_CHECKING:  # loaded by budget_settings: the status line's memo reads ENVIRONMENT without the model catalog
    from ..core.budget import BudgetSettings

ENVIRONMENT = {
    "auto_compact_window": "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "autocompact_pct": "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "max_output_tokens": "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "blocking_limit": "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
    "disable_auto_compact": "DISABLE_AUTO_COMPACT",
    "disable_compact": "DISABLE_COMPACT",
    "disable_1m": "CLAUDE_CODE_DISABLE_1M_CONTEXT",
    "max_context_tokens": "CLAUDE_CODE_MAX_CONTEXT_TOKENS",
}


def budget_settings(
    environ: Mapping[str, str] | None = None,
    autocompact_pct: float | None = None,
    max_output_tokens: int | None = None,
    blocking_limit: int | None = None,
    no_auto_compact: bool = False,
    rules: str | None = None,
) -> BudgetSettings:
    from ..core.budget import BudgetSettings, Setting

    environ = os.environ if environ is None else environ
    values: dict[str, Setting | None] = {field: Setting(environ[name], name) if environ.get(name, "") != "" else None for field, name in ENVIRONMENT.items()}
    flags = {
        "autocompact_pct": (autocompact_pct, "--autocompact-pct"),
        "max_output_tokens": (max_output_tokens, "--max-output-tokens"),
        "blocking_limit": (blocking_limit, "--blocking-limit"),
    }
    for field, (value, flag) in flags.items():
        if value is not None:
            values[field] = Setting(f"{value:g}" if isinstance(value, float) else str(value), flag)
    if no_auto_compact:
        values["disable_auto_compact"] = Setting("1", "--no-auto-compact")
    if rules is not None:
        values["rules"] = Setting(rules, "--rules")
    return BudgetSettings(**values)
