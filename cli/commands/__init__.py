"""One module per command; each keeps to parsing flags, calling the core and writing results.

The commands, each (module here, function), in `ctxpipe --help`'s order; the stage registry's
commands go after warn (cli/stages.py makes them; restore's is its own, for --from and --plan).
A command's module is imported when that command runs, or when every command is listed. Nothing
here imports typer: typer (cli/app.py) and the direct path (cli/direct.py) both look commands up here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

OWN_COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("convert", "convert"),
    "validate": ("validate", "validate"),
    "count": ("count", "count"),
    "warn": ("warn", "warn"),
    "restore": ("restore", "restore"),
    "compact": ("compact", "compact"),
    "report": ("report", "report"),
    "audit": ("audit", "audit"),
    "expand": ("expand", "expand"),
    "api-edits": ("api_edits", "api_edits"),
    "statusline": ("statusline", "statusline"),  # its module's SETTINGS: its own parser takes its arguments (cli/statusline.py)
    "hooks": ("hooks", "hooks"),
}
STAGES_AFTER = "warn"


def command_names() -> list[str]:
    """Every command's name, in `ctxpipe --help`'s order."""
    from ...api import STAGE_NAMES

    own = list(OWN_COMMANDS)
    at = own.index(STAGES_AFTER) + 1
    stages = list(STAGE_NAMES)
    return own[:at] + stages + [name for name in own[at:] if name not in stages]


def command_function(name: str) -> tuple[Callable[..., None], dict[str, Any]]:
    """The function of command `name` and typer's keywords for it (KeyError: no such command)."""
    if name in OWN_COMMANDS:
        module_name, function = OWN_COMMANDS[name]
        module = importlib.import_module(f"{__package__}.{module_name}")
        return getattr(module, function), getattr(module, "SETTINGS", {})
    from ...api import STAGE_NAMES, stage_named  # only this stage's module loads
    from ..stages import stage_command

    if name not in STAGE_NAMES:
        raise KeyError(name)
    return stage_command(stage_named(name)), {}
