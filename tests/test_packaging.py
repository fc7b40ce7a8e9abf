"""The README's quick start is what CI runs, and the test extra installs with the pip a new venv brings.

Issue 30: the test extra named `ctxpipe[s3,dask]`, which sends pip 23's resolver (the one Python
3.10-3.12's venv brings) into ResolutionImpossible, while `.ci/run` upgraded pip first and stayed
green. These tests hold the parts that let CI catch that again: `.ci/run` runs the README's two
commands verbatim in a fresh venv and never upgrades pip, and no extra refers to ctxpipe itself.
"""

from __future__ import annotations

import re
from importlib.metadata import requires

from helpers import ROOT
from packaging.requirements import Requirement


def quick_start() -> list[str]:
    """The commands of the README's Quick start section (its first sh block), in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's Quick start has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def ci_commands() -> list[str]:
    """What .ci/run executes, without comments and blank lines."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_quick_start_is_two_commands_installing_and_testing() -> None:
    commands = quick_start()
    assert len(commands) == 2
    assert commands[0].startswith("python -m pip install . && ctxpipe ")
    assert commands[1].startswith("python -m pip install '.[test]' && ") and commands[1].endswith("python -m pytest")


def test_ci_ends_with_the_readme_commands_verbatim_in_a_fresh_venv() -> None:
    commands = ci_commands()
    assert commands[-2:] == quick_start(), "the last two commands of .ci/run must be the README's quick start, as written"
    before = commands[:-2]
    venv = [i for i, line in enumerate(before) if re.fullmatch(r"python3? -m venv \S+", line.strip())]
    activate = [i for i, line in enumerate(before) if re.fullmatch(r"\. \S+/bin/activate", line.strip())]
    assert venv and activate and venv[-1] < activate[-1], ".ci/run makes a venv and activates it before the README's commands"
    # The venv is made anew (a kept one would hide a resolution that fails from scratch).
    assert any(re.fullmatch(r"rm -rf (\S+)", line.strip()) and line.split()[-1] in before[venv[-1]] for line in before[: venv[-1]])


def test_ci_never_upgrades_pip_or_installs_python_packages_before_the_readme() -> None:
    """The pip the venv brings is the one a new user has: the README's commands must work with it."""
    for line in ci_commands()[:-2]:
        assert not re.search(r"\bpip\b.*\binstall\b", line), f".ci/run installs with pip before the README's commands: {line}"


def test_no_extra_refers_to_ctxpipe_itself() -> None:
    """A self-referencing extra (ctxpipe[s3,dask] inside [test]) is what pip 23's resolver cannot do."""
    declared = [Requirement(r) for r in requires("ctxpipe") or []]
    assert declared, "ctxpipe's metadata lists no requirements: is it installed?"
    assert [str(r) for r in declared if r.name.lower() == "ctxpipe"] == []


def extra_requirements(extra: str) -> set[str]:
    found = set()
    for raw in requires("ctxpipe") or []:
        requirement = Requirement(raw)
        if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
            found.add(str(Requirement(raw.split(";")[0])))
    return found


def test_the_test_extra_holds_every_requirement_of_the_s3_and_dask_extras() -> None:
    """The tests run a real S3 server and a real Dask cluster: [test] lists what [s3] and [dask] need, the same specifiers."""
    test = extra_requirements("test")
    for extra in ("s3", "dask"):
        needed = extra_requirements(extra)
        assert needed, f"the {extra} extra lists nothing"
        assert needed <= test, f"[test] lacks {sorted(needed - test)} of [{extra}]"


def test_version_is_the_installed_package_s() -> None:
    """`ctxpipe --version` says what pip installed: ctxpipe.__version__ cannot drift from pyproject.toml."""
    import importlib.metadata

    from helpers import run_process

    done = run_process("--version")
    assert done.returncode == 0 and done.stdout == f"ctxpipe {importlib.metadata.version('ctxpipe')}\n".encode()
    assert run_process("-V").stdout == done.stdout
