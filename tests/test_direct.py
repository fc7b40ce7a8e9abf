"""cli/direct.py runs a plain command line without typer. Wherever it takes a command line, it must
hand the command exactly the values typer would (checked on command lines drawn from each command's
own declarations, valid and not), print what typer prints and exit as typer does, and never load
typer or click; whatever it leaves to typer is typer's answer, as before."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from ctxpipe.cli import direct
from helpers import FIXTURES, child_env, registered_commands, run_cli, run_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BASIC = FIXTURES / "claude-code" / "basic.jsonl"
# Commands typer must parse: statusline takes its arguments untouched (its own parser, cli/statusline.py).
TYPERS_OWN = {"statusline"}


def typer_values(function: Any, argv: list[str]) -> dict[str, Any] | None:
    """What typer hands the command for `argv` (None: typer does not run it), parsed by typer's own
    click command built from the same declaration, run up to the call."""
    from ctxpipe.cli.coercion import Command
    from typer.main import get_command_from_info
    from typer.models import CommandInfo

    seen: list[dict[str, Any]] = []

    def record(**values: Any) -> None:
        seen.append(values)

    record.__signature__ = function.__signature__  # type: ignore[attr-defined]  # typer's signature of the command
    command = get_command_from_info(CommandInfo(name="command", cls=Command, callback=record), pretty_exceptions_short=True, rich_markup_mode=None)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # --help's page: not ours to show
            command.main(args=list(argv), prog_name="ctxpipe command", standalone_mode=False)
    except Exception:  # a usage error, or an option's check refusing its value: typer does not run the command
        return None
    return seen[0] if seen else None


@functools.cache  # the same declaration gives the same slots: built once per command, not per example
def direct_slots(name: str) -> tuple[Any, list[direct.Slot]]:
    function = direct.command(name)
    assert function is not None, name
    found = direct.slots(function.declared)
    assert found is not None, f"{name}: a parameter the direct path does not model"
    return function, found


def test_every_command_but_statusline_is_parsed_directly() -> None:
    names = set(registered_commands())
    taken = {name for name in names if (function := direct.command(name)) is not None and direct.slots(function.declared) is not None}
    assert names - taken == TYPERS_OWN


def _text(slot: direct.Slot) -> st.SearchStrategy[str]:
    """A value's text for a slot: its plain spellings, around its limits, and what only typer can judge."""
    odd = st.sampled_from(["", "-", "-1", "--x", "1e3", "0x10", " 5", "5 ", "١٢", "nan", "inf", "True", "RULE", "a=b"])
    if isinstance(slot.kind, type) and issubclass(slot.kind, Enum):
        choice = st.sampled_from([member.value for member in slot.kind])
        return st.one_of(choice, choice, st.sampled_from([member.value.upper() for member in slot.kind]), odd)
    if slot.kind is int or slot.kind is float:
        low = slot.low if slot.low is not None else -10
        high = slot.high if slot.high is not None else 10**6
        whole = st.integers(min_value=low - 2, max_value=min(high, low + 10**6) + 2).map(str)
        if slot.kind is int:
            return st.one_of(whole, whole, odd)
        decimal = st.floats(min_value=low - 2, max_value=min(high, low + 10**6) + 2, allow_nan=False).map(repr)
        return st.one_of(whole, decimal, st.sampled_from(["1.", ".5", "2.5e1", "100.0", "0.0"]), odd)
    text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8)
    return st.one_of(text, text, odd)


@functools.cache  # one strategy per slot (direct_slots keeps them): Hypothesis validates a new one at every draw
def _pieces(slot: direct.Slot) -> st.SearchStrategy[list[str]]:
    """One parameter as it may appear on a command line (or misspelled)."""
    if not slot.option:
        return st.lists(_text(slot), min_size=0, max_size=3)
    names = st.sampled_from(slot.names + slot.negations)
    if slot.flag:
        return st.one_of(names.map(lambda name: [name]), st.tuples(names, _text(slot)).map(lambda pair: [f"{pair[0]}={pair[1]}"]))
    return st.one_of(
        st.tuples(names, _text(slot)).map(list),
        st.tuples(st.sampled_from([name for name in slot.names if name.startswith("--")]), _text(slot)).map(lambda pair: [f"{pair[0]}={pair[1]}"]),
        names.map(lambda name: [name]),  # the value missing
    )


NOISE = st.sampled_from([["--"], ["-h"], ["--help"], ["--no-such-flag"], ["-Z"], ["-"], ["extra"]])


@st.composite
def command_lines(draw: st.DrawFn, found: list[direct.Slot]) -> list[str]:
    chosen = draw(st.lists(st.sampled_from(found), max_size=6))
    groups = [draw(_pieces(slot)) for slot in chosen]
    if draw(st.integers(0, 4)) == 0:
        groups.append(draw(NOISE))
    order = draw(st.permutations(range(len(groups))))
    return [piece for at in order for piece in groups[at]]


@pytest.mark.parametrize("name", sorted(set(registered_commands()) - TYPERS_OWN))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_command_line_taken_directly_gives_the_command_typers_values(name: str, data: st.DataObject) -> None:
    function, found = direct_slots(name)
    argv = data.draw(command_lines(found), label="argv")
    parsed = direct.parse(found, argv)
    if parsed is None:  # typer's to answer
        return
    try:
        mine = direct.checked(*parsed)
    except Exception:  # a check refused its value here: typer refuses the line too
        assert typer_values(function, argv) is None, argv
    else:  # taken here: typer must take it too, with the same values
        assert mine == typer_values(function, argv), argv


@pytest.mark.parametrize("name", sorted(set(registered_commands()) - TYPERS_OWN))
def test_every_option_in_a_plain_spelling_is_taken_directly(name: str, tmp_path: Path) -> None:
    # Each option once, by each of its names, with a value typer takes (one its check accepts, for an
    # option with a check): the direct path must not leave it to typer, and gives the check's value.
    function, found = direct_slots(name)
    for slot in found:
        if not slot.option:
            continue
        for spelled in slot.names + slot.negations:
            value = [] if slot.flag else [_plain_text(slot, tmp_path)]
            argv = [spelled, *value, *_required(found, slot)]
            parsed = direct.parse(found, argv)
            assert parsed is not None, (name, argv)
            assert direct.checked(*parsed) == typer_values(function, argv), (name, argv)


# A text each option's check takes, by the check's name (a check not listed here fails the test above).
CHECKED_TEXTS: dict[str, Callable[[Path], str]] = {
    "iso_time": lambda tmp: "2026-05-04T10:00:00Z",
    "rollup_bound": lambda tmp: "2026-05-04",
    "time_zone": lambda tmp: "UTC",
    "percentage": lambda tmp: "80",
    "claude_code_rules": lambda tmp: "latest",
    "_turns": lambda tmp: "2",
    "_names": lambda tmp: "Read,Bash",
    "_span": lambda tmp: "a..b",
    "readable_file": lambda tmp: str(BASIC),
    "existing_folder": lambda tmp: str(tmp),
    "price_table": lambda tmp: _price_table(tmp),
}


def _price_table(folder: Path) -> str:
    table = folder / "prices.json"
    table.write_text(json.dumps({"acme-coder": {"input": 2, "cache_write_5m": 2.5, "cache_write_1h": 4, "cache_read": 0.2, "output": 8}}))
    return str(table)


def _plain_text(slot: direct.Slot, tmp_path: Path) -> str:
    if slot.check is not None:
        assert slot.check.__name__ in CHECKED_TEXTS, f"no text known to pass {slot.check.__name__}: add one to CHECKED_TEXTS"
        return CHECKED_TEXTS[slot.check.__name__](tmp_path)
    if isinstance(slot.kind, type) and issubclass(slot.kind, Enum):
        return str(list(slot.kind)[-1].value)
    if slot.kind is int or slot.kind is float:
        return str(slot.low if slot.low is not None else 7)
    return "some text"


def _required(found: list[direct.Slot], besides: direct.Slot) -> list[str]:
    """What the command needs besides `besides`: its required options and argument."""
    needed = []
    for slot in found:
        if slot is besides or not slot.required:
            continue
        needed += [slot.names[0], _plain_text(slot, Path())] if slot.option else [_plain_text(slot, Path())]
    return needed


@pytest.mark.parametrize("names", [("--x",), ("--x", "-x"), ("-x", "--x"), ("--x/--no-x", "-x")], ids=" ".join)
def test_a_refusal_names_the_option_as_click_names_it(names: tuple[str, ...]) -> None:
    # A check's BadParameter without a hint: click names the option by its names, quoted; with
    # declare.THIS_OPTION: the first declaration, as cli/typed.py hands it to typer.
    import click
    from ctxpipe.cli import declare

    slot = direct.Slot("x", declare.Option(*names), bool if "/" in names[0] else str, None)
    assert slot.hint(None) == click.Option(list(names)).get_error_hint(None)  # type: ignore[arg-type]
    assert slot.hint(declare.THIS_OPTION) == names[0]
    assert slot.hint("--other") == "--other"


# --- the whole run: the same bytes and exit code as typer, without loading it -------------------------

# The console entry, then what it loaded (its exit code kept).
STARTED = """\
import sys
from ctxpipe.cli.entry import main
sys.argv = ["ctxpipe", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = ("typer", "click", "rich", "pydantic")
sys.stderr.write("\\nloaded: " + repr(sorted(name for name in sys.modules if name.startswith(heavy))))
sys.exit(code)
"""

# (argv, stdin): plain runs of many commands, and the usage errors and exits a command raises itself.
RUNS: list[tuple[list[str], bytes]] = [
    (["count", "--json", str(BASIC)], b""),
    (["count", "--json", "--by", "role", "-"], BASIC.read_bytes()),
    (["count", "--scheduler", "tcp://h:1", str(BASIC)], b""),  # Batch's own check: a usage error
    (["count", "--json", str(FIXTURES / "claude-code"), "no-such-file.jsonl"], b""),
    (["warn", "--json", str(BASIC)], b""),
    (["warn", "--window", "20000", str(BASIC)], b""),  # a level above normal: its exit code
    (["microcompact", "--force", str(BASIC)], b""),
    (["snip", "--report", "-"], BASIC.read_bytes()),
    (["collapse", "-"], BASIC.read_bytes()),
    (["convert", "--to", "anthropic", str(BASIC)], b""),
    (["convert", "--to", "claude-code", "--repair", str(BASIC)], b""),  # the command's own usage error
    (["validate", str(BASIC)], b""),
    (["compact", "--backup", ".bak", str(BASIC)], b""),  # --backup without --in-place
    (["compact", "--report-json", "/dev/stdout", "-"], BASIC.read_bytes()),
    (["api-edits", "--compact-trigger", "100000", str(BASIC)], b""),  # GivenEdits' own check
    (["report", "--json", str(BASIC)], b""),
    (["audit", "--json", str(BASIC)], b""),
    (["expand", "--ledger", "no-such-ledger.jsonl", str(BASIC)], b""),
    (["restore", "--plan", "--json", str(BASIC)], b""),
    # Options with a check, given values it takes: the check runs here, as typer runs it.
    (["count", "--json", "--by", "day", "--since", "2026-01-01", "--until", "2030-01-01", "--timezone", "UTC", str(FIXTURES / "claude-code")], b""),
    (["microcompact", "--force", "--tools", "Task,mcp__x__y,Read", "--now", "2030-01-01T00:00:00Z", str(BASIC)], b""),  # its warnings, once
    (["restore", "--root", str(FIXTURES), "--now", "2030-01-01T00:00:00Z", str(BASIC)], b""),
    (["warn", "--autocompact-pct", "80", "--rules", "latest", str(BASIC)], b""),
    (["api-edits", "--thinking-keep", "2", str(BASIC)], b""),
    (["snip", "--range", "a..b", str(BASIC)], b""),  # the check takes it; the command refuses what it names
    # A check refusing its value, said here as click says it: after a check that warned (the warning
    # once, before the refusal), and after one that read its file.
    (["microcompact", "--tools", "Task", "--now", "yesterday", str(BASIC)], b""),
    (["count", "--since", "soon", "--by", "day", str(BASIC)], b""),
    (["snip", "--range", "a", str(BASIC)], b""),  # the check names the option itself (declare.THIS_OPTION)
    (
        ["count", "--cost", "--prices", "/dev/stdin", "--since", "soon", "--by", "day", str(BASIC)],
        b'{"acme-coder": {"input": 2, "cache_write_5m": 2.5, "cache_write_1h": 4, "cache_read": 0.2, "output": 8}}',
    ),
    (["count", "--cost", "--prices", "/dev/stdin", str(BASIC)], b"not json"),  # the check's own error, read once
]


@pytest.mark.parametrize("argv,stdin", RUNS, ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_a_direct_run_is_typers_run_without_typer(argv: list[str], stdin: bytes) -> None:
    function, found = direct_slots(argv[0])
    assert direct.parse(found, argv[1:]) is not None, "this command line should be taken directly"
    child = subprocess.run([sys.executable, "-c", STARTED, *argv], input=stdin, capture_output=True, env=child_env(), timeout=120)
    errors, loaded = child.stderr.rsplit(b"\nloaded: ", 1)
    assert loaded == b"[]"
    typer = run_cli(*argv, stdin=stdin)
    assert (child.returncode, child.stdout, errors) == (typer.returncode, typer.stdout, typer.stderr)


@pytest.mark.parametrize(
    "argv",
    [
        ["count", "--help"],
        ["count", "--top", "x"],
        ["count", "--top=-1"],
        ["warn", "-h", "x"],
        ["no-such-command"],
        ["count", "-t"],
        ["convert"],
        ["hooks"],
        ["count", "--json", "--top", "1" * 5000, str(BASIC)],  # more digits than int() reads: typer's converter says so
    ],  # fmt: skip
    ids=" ".join,
)
def test_what_the_direct_path_leaves_is_typers_answer(argv: list[str]) -> None:
    child, typer = run_process(*argv), run_cli(*argv)
    assert (child.returncode, child.stdout, child.stderr) == (typer.returncode, typer.stdout, typer.stderr)


def test_a_whole_number_of_more_digits_than_int_reads_is_a_usage_error() -> None:
    # Python's int() refuses more than 4,300 digits: the plain converter leaves such a value to typer's
    # (a traceback on the direct path, an internal error on typer's, before).
    result = run_cli("count", "--json", "--top", "1" * 5000, BASIC)
    assert result.returncode == 2 and b"Invalid value for '--top'" in result.stderr and b"internal error" not in result.stderr


# typer's own run of a command line, in a child (the console entry would take it directly).
TYPERS_RUN = """\
import sys
from ctxpipe.cli.app import main
main(sys.argv[1:])
"""


def test_a_checks_warning_is_written_as_typer_writes_it(tmp_path: Path) -> None:
    # The check runs once the standard streams are set up: on an ASCII stderr, a character it cannot
    # hold is the same stand-in as typer's run writes, not Python's backslash escape.
    argv = ["microcompact", "--force", "--tools", "mcp__\u00e9__x", "--now", "2030-01-01T00:00:00Z", str(BASIC)]
    env = child_env({"PYTHONIOENCODING": "ascii"})
    mine = subprocess.run([sys.executable, "-c", STARTED, *argv], capture_output=True, env=env, timeout=120, cwd=tmp_path)
    typers = subprocess.run([sys.executable, "-c", TYPERS_RUN, *argv], capture_output=True, env=env, timeout=120, cwd=tmp_path)
    errors, loaded = mine.stderr.rsplit(b"\nloaded: ", 1)
    assert loaded == b"[]" and b"mcp__?__x" in errors
    assert (mine.returncode, mine.stdout, errors) == (typers.returncode, typers.stdout, typers.stderr)


# The console entry (the direct path where it takes the line), nothing written after it.
ENTRY = """\
import sys
from ctxpipe.cli.entry import main
sys.argv = ["ctxpipe", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["count", "--since", "x", str(BASIC)],  # a check's refusal
        ["microcompact", "--force", "--tools", "Agent", "--now", "2030-01-01T00:00:00Z", str(BASIC)],  # a check's warning
        ["validate", "--scheduler", "tcp://h:1", str(BASIC)],  # the command's own usage error
    ],
    ids=lambda argv: argv[0],
)
def test_a_stderr_whose_reader_went_away_ends_the_run_as_typer_does(argv: list[str], tmp_path: Path) -> None:
    # What is said on stderr cannot be: the run fails (exit 1, as click ends a run whose pipe broke),
    # on the direct path as on typer's; never the quiet success of a stdout whose reader went away.
    def run(script: str) -> subprocess.CompletedProcess[bytes]:
        read, write = os.pipe()
        os.close(read)
        try:
            return subprocess.run(
                [sys.executable, "-c", script, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=write,
                env=child_env(),
                timeout=120,
                cwd=tmp_path,
            )
        finally:
            os.close(write)

    mine, typers = run(ENTRY), run(TYPERS_RUN)
    assert (mine.returncode, mine.stdout) == (typers.returncode, typers.stdout) == (1, b"")


def _open_for_writing(fifo: Path, run: subprocess.Popen[bytes]) -> int:
    """A writer's end of `fifo`, once the run has it open to read (the open succeeds only then)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            assert run.poll() is None and time.monotonic() < deadline, f"the run never opened {fifo}"
            time.sleep(0.01)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
@pytest.mark.parametrize("sent,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_signal_while_a_check_reads_its_file_ends_quietly(tmp_path: Path, sent: int, status: int) -> None:
    # --prices names a FIFO: its check waits to read the table. Ctrl-C there ends the run with 130,
    # SIGTERM with 143 (128 + the signal, as every command ends on it), nothing on stderr; never a traceback.
    fifo = tmp_path / "prices.json"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "ctxpipe", "count", "--cost", "--prices", str(fifo), str(BASIC)]
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()) as run:
        writer = _open_for_writing(fifo, run)
        try:
            time.sleep(0.2)  # into its read, which waits on the writer
            run.send_signal(sent)
            stdout, stderr = run.communicate(timeout=60)
        finally:
            os.close(writer)
    assert (run.returncode, stdout, stderr) == (status, b"", b"")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_a_file_a_check_read_is_read_once_when_a_later_check_refuses(tmp_path: Path) -> None:
    # --session-memory's check opens a FIFO, then --now's refuses its value: the refusal is said, and
    # the FIFO is not opened a second time (it would wait for a writer that has gone).
    fifo, notes = tmp_path / "notes.md", tmp_path / "plain-notes.md"
    os.mkfifo(fifo)
    notes.write_text("notes\n")
    argv = [sys.executable, "-m", "ctxpipe", "compact", "--session-memory", str(fifo), "--now", "bad", str(BASIC)]
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()) as run:
        # The check opens the file and closes it (it reads nothing): a writer lets its open through.
        os.close(_open_for_writing(fifo, run))
        try:
            stdout, stderr = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            pytest.fail("the run still waits: it opened the FIFO again")
    typers = run_cli("compact", "--session-memory", notes, "--now", "bad", BASIC)
    assert b"Invalid value for '--now'" in typers.stderr and typers.returncode == 2
    assert (run.returncode, stdout, stderr) == (typers.returncode, typers.stdout, typers.stderr)
