"""The package's house, read from its source with `ast` (imports inside functions included, since
many are kept there for start-up time and would otherwise hide a wrong-way edge):

    api.py       the face: every job the CLI does, for a program as for the CLI
    cli/         the command line: parses options, makes one call, renders the result
    report/      a session's report and its page
    jobs/        running things: count of a file, stages, the pipeline, the summary's engines, batches
    files/       the files a command reads and writes: inputs, atomic writes, stores, sessions
    formats/     one module per transcript format, behind core's contract
    core/        pure: the transcript model, counting, the stages' rules

Each room imports only the rooms below it (ROOMS says which) and itself; no import cycles; the
package root holds its face alone.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = "ctxpipe"
ROOT = Path(__file__).resolve().parent.parent  # the repository root is the package
SKIPPED = {"tests", "bench", "fixtures", "schemas", "build", "dist", "docs"}  # not the importable package (build/: what pip install . leaves)

# What each room may import besides itself (the package's face is `api`; `root` is ctxpipe/__init__).
ROOMS: dict[str, set[str]] = {
    "core": set(),
    "formats": {"core"},
    "files": {"core", "formats"},
    "jobs": {"core", "formats", "files"},
    "report": {"core", "formats", "files", "jobs"},
    "api": {"core", "formats", "files", "jobs", "report"},
    "cli": {"core", "api"},  # the command line is one client of the face: core's types, and the rest through api
    "root": {"api", "files"},  # the face loads the library on first use; importing it installs files/dataclass_code
    "main": {"cli"},
}
# The modules the package root may hold: its face.
FACE = {"__init__.py", "__main__.py", "api.py"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _package_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).parts
        if relative[0] in SKIPPED or any(part.startswith(".") or part.endswith(".egg-info") for part in relative):
            continue
        yield path


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of `from <level dots><target> import …` written in `module`."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules `path` imports, wherever the import statement stands."""
    name = _module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(name, is_package, node.level, node.module)
            # `from . import io` names a module; `from .x import y` names x (or x.y when y is a module).
            candidates = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules] or [source]
        else:
            continue
        for candidate in candidates:
            # The longest package module the name starts with (`ctxpipe.core.fields.moment` -> `ctxpipe.core.fields`).
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate.startswith(PACKAGE) and candidate != name:
                found.add(candidate)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each package module's imports, read once, when a test first asks (not in every worker that collects this file)."""
    files = list(_package_files())
    modules = {_module_name(path) for path in files}
    return {_module_name(path): _imports(path, modules) for path in files}


def _layer(module: str) -> str:
    """The room a module lives in: its folder, or api / root / main for the package's face."""
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    if len(parts) == 2 and parts[1] in ("api", "__main__"):
        return "main" if parts[1] == "__main__" else "api"
    return parts[1]


# Wrong-way edges known today and being fixed elsewhere; each is named so it cannot hide a new one.
KNOWN_WRONG_WAY: set[tuple[str, str]] = set()


def _wrong_way() -> list[tuple[str, str]]:
    edges = []
    for module, imported in sorted(graph().items()):
        layer = _layer(module)
        allowed = ROOMS[layer] | {layer}
        edges += [(module, target) for target in sorted(imported) if _layer(target) not in allowed and not module.startswith(target + ".")]
    return edges


def test_the_root_holds_the_face_alone() -> None:
    modules = {path.name for path in ROOT.glob("*.py")}
    assert modules <= FACE, f"modules at the root beside the face: {sorted(modules - FACE)}"
    assert {path.parent.name for path in _package_files() if path.parent != ROOT} <= set(ROOMS) | {"commands", "reports"}


def test_every_module_is_in_a_room() -> None:
    assert sorted(m for m in graph() if _layer(m) not in ROOMS) == []


def test_graph_is_read() -> None:
    # The reader sees both kinds of import: a module-level one and one inside a function.
    assert "ctxpipe.core.count" in graph()["ctxpipe.core.microcompact"]
    assert "ctxpipe.api" in graph()["ctxpipe.cli.batch"]  # imported inside find_inputs
    assert "ctxpipe.jobs.breaker" in graph()["ctxpipe.jobs.batch"]  # `from .breaker import …`
    assert len(graph()) > 50


def test_each_room_imports_only_the_rooms_below_it() -> None:
    wrong = [edge for edge in _wrong_way() if edge not in KNOWN_WRONG_WAY]
    assert wrong == [], "\n".join(f"{source} imports {target}" for source, target in wrong)


def _names_taken_from_the_api(path: Path) -> set[str]:
    """What a module takes from ctxpipe.api: `from ..api import x` and, after `from .. import api`, `api.x`."""
    name = _module_name(path)
    taken: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and _resolve(name, path.name == "__init__.py", node.level, node.module) == f"{PACKAGE}.api":
            taken |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "api":
            taken.add(node.attr)
    return taken


def _defined_in(path: Path) -> set[str]:
    """The names a module's own top-level statements define (its functions, classes and constants)."""
    defined: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            defined |= {target.id for target in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(target, ast.Name)}
    return defined


def test_the_cli_takes_from_the_api_only_its_own_names_and_those_it_lists() -> None:
    # What the command line uses from the rooms below is re-exported on purpose (api.__all__), not reached for.
    import ctxpipe.api

    allowed = set(ctxpipe.api.__all__) | {name for name in _defined_in(ROOT / "api.py") if not name.startswith("_")}
    taken = {(_module_name(path), name) for path in _package_files() if _layer(_module_name(path)) == "cli" for name in _names_taken_from_the_api(path)}
    assert sorted(f"{module}: {name}" for module, name in taken if name not in allowed) == []
    assert len(taken) > 20  # the scan sees them


def test_core_imports_not_even_the_package_root() -> None:
    # `from .. import x` in core would load ctxpipe/__init__ (the library API) and, through it, the services.
    assert [m for m, imported in graph().items() if _layer(m) in ("core", "formats") and PACKAGE in imported] == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
                continue
            if child not in graph:
                continue
            if child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


# A package's __init__ importing its own modules while they import names it re-exports is how
# Python packages are built, not a layering cycle: edges from a package to its own submodules are
# left out, so `formats/__init__` -> `formats/claude_code` -> `formats` is not counted.
def _without_package_to_child(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages = {m for m in graph if (ROOT / Path(*m.split(".")[1:]) / "__init__.py").exists() or m == PACKAGE}
    return {m: {t for t in targets if not (m in packages and t.startswith(m + "."))} for m, targets in graph.items()}


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    cycles = _cycles(_without_package_to_child(graph()))
    assert cycles == [], "\n".join(" <-> ".join(cycle) for cycle in cycles)


# Commands are leaves: only the app that registers them imports them; what two commands share lives
# in a module beside them (cli/breaker.py, cli/stages.py, …).


def test_only_the_app_imports_commands() -> None:
    edges = {
        (module, target)
        for module, imported in graph().items()
        for target in imported
        if target.startswith("ctxpipe.cli.commands.") and module != "ctxpipe.cli.app" and not module.startswith("ctxpipe.tests")
    }
    assert sorted(edges) == []


@pytest.mark.parametrize("module", sorted(m for m in map(_module_name, _package_files()) if _layer(m) == "core"))
def test_each_core_module_stays_in_core(module: str) -> None:
    outside = sorted(t for t in graph()[module] if _layer(t) != "core" and (module, t) not in KNOWN_WRONG_WAY)
    assert outside == []


# The standard streams have owners: inputs.py reads stdin (the one input path); cli/streams.py writes
# stdout and stderr for the commands, cli/run.py repairs them at start-up and exit, atomic.py names
# /dev/stdout. A command printing on its own would bypass the escaping and the closed-stream rules.
# cli/statusline.py is the status line's own entry point, as cli/run.py is every other command's: it
# starts without cli/streams (and what that loads) because Claude Code runs it after every message;
# cli/hook.py, the hooks' entry point, for the same reason (a compaction waits on it); cli/version.py
# answers --version, before anything is imported (cli/entry.py) and on typer's path (cli/app.py).
# cli/encoding.py sets both entries' streams to write what their encoding cannot hold as stand-ins.
STREAM_OWNERS = {
    "stdin": {"ctxpipe.files.inputs", "ctxpipe.cli.statusline", "ctxpipe.cli.hook"},
    "stdout": {
        "ctxpipe.cli.streams",
        "ctxpipe.cli.run",
        "ctxpipe.files.atomic",
        "ctxpipe.cli.statusline",
        "ctxpipe.cli.encoding",
        "ctxpipe.cli.hook",
        "ctxpipe.cli.version",
        "ctxpipe.cli.help",  # help answered at start-up, as cli/app would
    },
    "stderr": {
        "ctxpipe.cli.streams",
        "ctxpipe.cli.run",
        "ctxpipe.files.atomic",
        "ctxpipe.cli.statusline",
        "ctxpipe.cli.encoding",
        "ctxpipe.cli.hook",
        "ctxpipe.cli.help",
        "ctxpipe.cli.emit",  # help's and --version's one error line, before anything loads
    },
}


def _stream_users() -> dict[str, set[str]]:
    """For each of sys.stdin, sys.stdout and sys.stderr, the modules that name it."""
    users: dict[str, set[str]] = {name: set() for name in STREAM_OWNERS}
    for path in _package_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys" and node.attr in users:
                users[node.attr].add(_module_name(path))
    return users


@pytest.mark.parametrize("stream", sorted(STREAM_OWNERS))
def test_only_their_owners_touch_the_standard_streams(stream: str) -> None:
    users = _stream_users()[stream]
    assert users  # the scan sees them
    assert sorted(users - STREAM_OWNERS[stream]) == []
