"""cli/coercion.py converts option values without pydantic where it can: the value, or the error, must
be the one typer's own (pydantic) converter gives, for every option of every command."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from ctxpipe.cli.app import app
from ctxpipe.cli.coercion import _Plain
from helpers import FIXTURES, RUN_THE_ENTRY, child_env
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.main import get_command

SAMPLES: list[Any] = [
    *["0", "5", "-1", "+5", " 5", "5 ", "1_000", "5.0", "5.", ".5", "1.5", "-0", "1e3", "1E-2", "inf", "nan", "abc", "", "0x10", "٣"],
    *["999999999999999", "1000000000000000", "99999999999999999999999"],
    *["fail", "skip", "FAIL", "local", "dask", "claude-code", "claude_code", "role", "tiktoken:cl100k_base", "all", "--json"],
    *[0, 1, 5, -1, 2.5, True, False, None, (), ("a", "b"), ["x"], ("a", 1)],
]


def _outcome(runtime: Any, value: Any, param: Any, context: Context) -> tuple[str, str]:
    try:
        found = runtime.coerce(value, param=param, ctx=context)
    except BadParameter as exc:
        return ("error", exc.format_message())
    return ("value", f"{type(found).__name__} {found!r}")


def _parameters() -> list[tuple[str, Any, Any]]:
    group = get_command(app)
    found = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]  # a TyperGroup
        context = Context(command, info_name=name)
        for param in [*command.params, command.get_help_option(context)]:
            if isinstance(getattr(param, "_runtime_param", None), _Plain):
                found.append((f"{name} {param.name}", command, param))
    return found


PARAMETERS = _parameters()


def test_most_options_are_converted_plainly() -> None:
    assert len(PARAMETERS) > 200  # every option of the kinds ctxpipe declares, --help included


@pytest.mark.parametrize("where, command, param", PARAMETERS, ids=[where for where, _, _ in PARAMETERS])
def test_the_plain_converter_gives_typers_value_or_error(where: str, command: Any, param: Any) -> None:
    context = Context(command, info_name=where.split()[0])
    typers = build_runtime_param(param.type_descriptor)
    for value in SAMPLES:
        assert _outcome(param._runtime_param, value, param, context) == _outcome(typers, value, param, context), (where, value)


LOADED = (
    RUN_THE_ENTRY
    + """\
commands = sorted(name for name in sys.modules if name.startswith("ctxpipe.cli.commands."))
sys.stderr.write(repr(("pydantic" in sys.modules, commands, "ctxpipe.jobs.pipeline" in sys.modules)))
"""
)


@pytest.mark.parametrize(
    "argv, modules, stages",
    [
        (["count", "--top", "2", "--by", "tool"], ["ctxpipe.cli.commands.count"], False),
        (["warn", "--window", "200000", "--autocompact-pct", "80"], ["ctxpipe.cli.commands.warn"], False),
        (["microcompact", "--force", "--keep-recent", "2"], [], True),
    ],
)
def test_a_command_loads_its_own_modules_and_not_pydantic(argv: list[str], modules: list[str], stages: bool) -> None:
    # cli/app loads a command's module when it runs; a stage's command comes from the stage registry.
    transcript = str(FIXTURES / "claude-code" / "repeats.jsonl")
    run = subprocess.run([sys.executable, "-c", LOADED, *argv, transcript], capture_output=True, env=child_env(), timeout=60)
    assert run.stderr.endswith(repr((False, modules, stages)).encode()), run.stderr[-2000:]
