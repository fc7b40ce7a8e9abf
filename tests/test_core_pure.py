"""core/ does no I/O and builds no clients, read from its source with `ast`.

The disk, the stores, the network and the model are ports handed in by the caller, and their real
implementations live in jobs/: ports.py the disk restore reads (core.restore.Workspace, carried by
core.stage.StageContext.workspace), llm.py the model on the anthropic client
(core.summarize_engines.SummaryModel), tokenizers.py the tiktoken counters built from their package's
data (core.tokens.TextCounter, handed to a count). So a core module never
opens, stats, lists or resolves a path, reads the environment or the current directory, starts a
process or a socket, or imports a client library (anthropic, httpx, fsspec, requests, …).

Working on a stream or a buffer the caller hands in is a port and is fine: core/jsonl.py reads
the binary stream it is given and writes to the stream it is given; nothing here forbids calling
`.read()` or `.write()` on an argument. What is forbidden is reaching the outside world on core's
own initiative: a builtin `open`, the `os` functions that touch the file system or the process's
environment, `io`'s file openers, and the modules whose only business is I/O. A buffer in memory
(`io.BytesIO`) is not I/O. Package data core needs is Python (core/catalog_data.py, generated).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "core"

# Modules core may not import at all: their business is files, processes, sockets or remote clients.
IO_MODULES = {
    "pathlib",
    "mmap",
    "subprocess",
    "socket",
    "shutil",
    "tempfile",
    "glob",
    "fcntl",
    "select",
    "ssl",
    "http",
    "urllib.request",
    "importlib.resources",
    "anthropic",
    "httpx",
    "fsspec",
    "requests",
    "aiohttp",
    "boto3",
    "s3fs",
    "stat",
}
# Builtins that reach the outside world.
IO_BUILTINS = {"open", "input", "print"}
# `os` is mostly I/O; what it also has that is pure (path separators) does not need it: posixpath.
# Any use of `os` (import os, os.path.realpath, os.environ, os.getcwd, os.open, os.stat, …) is I/O.
IO_NAMESPACES = {"os", "os.path"}
# Modules that are I/O only in part: `io.BytesIO` is a buffer in memory, `io.open` opens a file.
IO_FUNCTIONS = {"io": {"open", "open_code", "FileIO"}}


def _forbidden(name: str) -> str | None:
    """The forbidden module `name` is or lies in (the longest: `os.path` before `os`), else None."""
    for module in sorted(IO_MODULES | IO_NAMESPACES, key=len, reverse=True):
        if name == module or name.startswith(module + "."):
            return module
    return None


def io_uses(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, what) for every I/O a module's source does: an import of an I/O module, a call of an
    I/O builtin, the use of `os` however it was imported, or of `io`'s file openers."""
    tree = ast.parse(source, filename)
    found: list[tuple[int, str]] = []
    bound: dict[str, str] = {}  # local names bound to a forbidden module (`import os`, `import os.path as p`)
    partly: dict[str, str] = {}  # local names bound to a module of IO_FUNCTIONS (`import io`)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module = _forbidden(alias.name)
                if module:
                    found.append((node.lineno, module))
                    bound[alias.asname or alias.name.split(".")[0]] = module
                elif alias.name in IO_FUNCTIONS:
                    partly[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                module = _forbidden(f"{node.module}.{alias.name}") or _forbidden(node.module)
                if module:
                    found.append((node.lineno, module))
                elif alias.name in IO_FUNCTIONS.get(node.module, ()):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_BUILTINS:
            found.append((node.lineno, f"{node.func.id}()"))
        elif isinstance(node, ast.Name) and node.id in bound and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, bound[node.id]))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in partly:
            if node.attr in IO_FUNCTIONS[partly[node.value.id]]:
                found.append((node.lineno, f"{partly[node.value.id]}.{node.attr}"))
    return sorted(set(found))


def test_the_scan_sees_io() -> None:
    # Every kind it must catch, so a scan that silently sees nothing fails here.
    source = """
import os
import os.path as osp
from pathlib import Path
from importlib import resources
import subprocess
import io
from io import FileIO
def f(x, stream):
    import anthropic
    from fsspec import open as fs_open
    stream.read(); stream.write(b"")   # a stream handed in: a port, allowed
    open(x)
    os.getcwd()
    osp.realpath(x)
    io.open(x)
"""
    what = {item for _, item in io_uses(source)}
    assert what == {"os", "os.path", "pathlib", "importlib.resources", "subprocess", "anthropic", "fsspec", "open()", "io.open", "io.FileIO"}
    pure = "import io\nimport posixpath\nposixpath.join('a', 'b')\nio.BytesIO(b'')\ndef g(s): return s.read()\n"
    assert io_uses(pure) == []


def test_the_scan_reads_every_core_module() -> None:
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) > 20 and CORE / "restore.py" in modules


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda path: path.name)
def test_core_does_no_io(path: Path) -> None:
    uses = [(line, what) for line, what in io_uses(path.read_text(encoding="utf-8"), str(path))]
    assert uses == [], "\n".join(f"{path.name}:{line}: {what}" for line, what in uses)


def test_core_holds_no_data_files() -> None:
    # Package data beside core's modules is read from the disk by whoever uses it: core's data is Python.
    assert sorted(p.name for p in CORE.iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")) == []
