"""Help at start-up (cli/help.py): `ctxpipe --help`, `ctxpipe COMMAND --help` and a bare `ctxpipe` are
answered from stored pages without typer. They must be typer's bytes at every width, and the stored
pages must be the declarations' current ones (regenerate: python -m ctxpipe.cli.help_render)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from ctxpipe.cli.help import page
from ctxpipe.cli.help_render import PAGES, WIDTHS, command_names, render_help, source
from helpers import RUN_THE_ENTRY, child_env, run_cli, run_process


def test_the_stored_pages_are_the_declarations() -> None:
    assert PAGES.read_text(encoding="utf-8") == source(), "a command's help changed: run python -m ctxpipe.cli.help_render"


@pytest.mark.parametrize("name", ["", *command_names()])
def test_each_page_is_typers_at_every_width(name: str) -> None:
    path = [name] if name else []
    for width in WIDTHS:
        assert page(name, width) == render_help(path, width), (name, width)


# (argv, environment): typer's width comes from COLUMNS (or the terminal), clamped to 50..78 + 2.
FORMS = [[], ["--help"], ["-h"], ["count", "--help"], ["warn", "-h"], ["microcompact", "--help"], ["statusline", "--help"]]


@pytest.mark.parametrize("columns", ["20", "61", "80", "300"])
@pytest.mark.parametrize("argv", FORMS, ids=lambda argv: " ".join(argv) or "no-arguments")
def test_the_start_up_answer_is_the_apps(argv: list[str], columns: str) -> None:
    env = {"COLUMNS": columns}
    fast = run_process(*argv, env=env)  # python -m ctxpipe: cli/entry.py, where help is answered without typer
    app = run_cli(*argv, env=env)  # cli/app.main: typer
    assert (fast.returncode, fast.stdout, fast.stderr) == (app.returncode, app.stdout, app.stderr)
    assert (fast.stdout or fast.stderr).startswith(b"Usage: ctxpipe")


TYPER = "import sys; from ctxpipe.cli.app import main; main(sys.argv[1:])"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_show_every_character_gets_what_typer_writes(encoding: str) -> None:
    # compact's summary holds arrows: click writes UTF-8 to an ASCII stdout; stderr uses cli/encoding's stand-ins.
    for argv in (["--help"], ["compact", "--help"], []):
        env = child_env({"PYTHONIOENCODING": encoding})
        fast = subprocess.run([sys.executable, "-m", "ctxpipe", *argv], capture_output=True, env=env, timeout=60)
        app = subprocess.run([sys.executable, "-c", TYPER, *argv], capture_output=True, env=env, timeout=60)
        assert (fast.returncode, fast.stdout, fast.stderr) == (app.returncode, app.stdout, app.stderr), argv


LOADED = (
    RUN_THE_ENTRY
    + """\
heavy = ("typer", "click", "rich", "pydantic", "orjson", "ctxpipe.core", "ctxpipe.api", "ctxpipe.cli.app", "ctxpipe.cli.commands")
sys.stderr.write(repr(sorted(name for name in sys.modules if name.startswith(heavy))))
"""
)


@pytest.mark.parametrize("argv", FORMS[:-1], ids=lambda argv: " ".join(argv) or "no-arguments")
def test_help_loads_no_command_and_no_typer(argv: list[str]) -> None:
    run = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, env=child_env(), timeout=60)
    assert run.stderr.rsplit(b"\n", 1)[-1].endswith(b"[]"), run.stderr[-500:]


def test_other_arguments_go_to_typer() -> None:
    # Help after another flag, or of an unknown command, is typer's to answer (a usage error there).
    for argv in (["count", "--json", "--help"], ["no-such-command", "--help"], ["--help", "count"]):
        fast, app = run_process(*argv), run_cli(*argv)
        assert (fast.returncode, fast.stdout, fast.stderr) == (app.returncode, app.stdout, app.stderr), argv


def test_every_value_has_a_metavar_a_person_reads() -> None:
    """FILE, N, ISO-TIME, PATH or the choices, never typer's type names (`<str>`, `<int range>`, `<list[str]>`)."""
    from ctxpipe.cli.help_render import command_names, render_help
    from ctxpipe.cli.statusline import HELP

    type_names = re.compile(r"<(?:str|int|float|bool|path|list\[[^\]]*\])(?: range)?>")
    for name in ["", *command_names()]:
        page = HELP if name == "statusline" else render_help([name] if name else [], 78)
        assert not type_names.search(page), f"ctxpipe {name} --help: {type_names.search(page)}"
    assert "-o, --output FILE" in render_help(["compact"], 78) and "--now ISO-TIME" in render_help(["compact"], 78)
    # Arguments too: `PATH…` for many, never typer's `[PATH]...` or `{action}`; the choices listed.
    assert "Usage: ctxpipe count [OPTIONS] [PATH…]\n" in render_help(["count"], 78)
    assert "Usage: ctxpipe convert [OPTIONS] [PATH]\n" in render_help(["convert"], 78)
    assert "Usage: ctxpipe hooks [OPTIONS] ACTION\n" in render_help(["hooks"], 78)
    assert "  ACTION <install|uninstall>  " in render_help(["hooks"], 78)
    usage_words = re.compile(r"\{\w+\}|\]\.\.\.")
    for name in command_names():
        page = HELP if name == "statusline" else render_help([name], 78)
        assert not usage_words.search(page.splitlines()[0]), f"ctxpipe {name} --help: {page.splitlines()[0]}"
    # --version is listed where a person looks for it.
    assert "-V, --version  Print the version and exit." in render_help([], 78)


def test_every_page_ends_with_one_example_on_its_own_line() -> None:
    from ctxpipe.cli.help_render import command_names, help_markdown

    for name in command_names():
        page = help_markdown(name)
        examples = [line for line in page.splitlines() if line.strip().startswith("Example:")]
        assert len(examples) == 1, f"ctxpipe {name} --help: {examples}"
        # One command: the paragraph holds only the example (click would run a second one into it).
        paragraph = page[page.index(examples[0]) :].split("\n\n")[0]
        started = len(re.findall(r"(?<![|\w~/-]) *\bctxpipe ", paragraph)) - len(re.findall(r"\| *ctxpipe ", paragraph))  # not piped from another
        assert f"ctxpipe {name}" in paragraph and started <= 1, f"ctxpipe {name} --help: {paragraph!r}"


def test_version_is_the_same_on_the_start_up_path_and_typers() -> None:
    # `ctxpipe --version` alone is answered before anything loads; typer answers it too (it is listed
    # in `ctxpipe --help`), also in front of a command, which it then does not run.
    from ctxpipe import __version__

    for argv in (["--version"], ["-V"], ["--version", "count"]):
        app = run_cli(*argv)
        assert (app.returncode, app.stdout, app.stderr) == (0, f"ctxpipe {__version__}\n".encode(), b""), argv
    for argv in (["--version"], ["-V"]):
        fast = run_process(*argv)
        assert (fast.returncode, fast.stdout) == (0, f"ctxpipe {__version__}\n".encode()), argv
