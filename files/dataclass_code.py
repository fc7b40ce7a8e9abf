"""The code `dataclasses` generates for ctxpipe's classes, compiled once and kept like bytecode.

`@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__`, ... and compiles it
with `exec` at every import: on Python 3.11 that is about half of what a command's start costs (90
classes and 387 functions for `report`, 40-50 ms). Python keeps a module's bytecode in `__pycache__`;
this keeps the generated functions' code beside it, keyed by their exact source text, so a start
loads them instead of compiling them again. A class whose source changed misses and is compiled as
before; a cache that cannot be read is ignored; nothing is written where Python would not write
bytecode (`-B`, PYTHONDONTWRITEBYTECODE), and `sys.pycache_prefix` is followed.
"""

from __future__ import annotations

import marshal
import os
import sys
from types import CodeType, ModuleType

# typing.TYPE_CHECKING without loading typing (core/records.py says why); here, not from core.records,
# because every start loads this module, `--help` too, and help loads nothing of core.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

PACKAGE = __name__.partition(".")[0]
FILE_NAME = f"dataclass_code.{sys.implementation.cache_tag}.bin"
# Past this many functions the file starts again from those this run used: stale sources do not pile up.
MOST_KEPT = 2000

_codes: dict[str, CodeType] | None = None
_used: set[str] = set()
_missed = False


def cache_path() -> str:
    """Where the code is kept: the `__pycache__` beside this module's bytecode, or its mirror under
    `sys.pycache_prefix`."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, here.lstrip(os.sep), FILE_NAME)
    return os.path.join(here, "__pycache__", FILE_NAME)


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER  # the bytecode's version: marshal's format follows it

    return MAGIC_NUMBER + b"ctxpipe dataclass code 1\n"


def _load() -> dict[str, CodeType]:
    try:
        with open(cache_path(), "rb") as file:
            data = file.read()
        header = _header()
        if data.startswith(header):
            codes = marshal.loads(data[len(header) :])
            if isinstance(codes, dict) and all(isinstance(k, str) and isinstance(v, CodeType) for k, v in codes.items()):
                return codes
    except (OSError, ValueError, EOFError, TypeError):
        pass
    return {}


def _compiled(source: str) -> CodeType:
    # dont_inherit: compiled as `dataclasses` compiles it, without this module's `from __future__`
    # (which would turn the generated functions' annotations into strings).
    return compile(source, "<string>", "exec", dont_inherit=True)


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """`exec` as `dataclasses` calls it: the source of a ctxpipe class's functions is compiled once."""
    global _codes, _missed
    if not isinstance(source, str):
        exec(source, globals, locals)
        return
    if not (isinstance(globals, dict) and str(globals.get("__name__", "")).startswith(PACKAGE + ".")):
        exec(_compiled(source), globals, locals)
        return
    if _codes is None:
        _codes = _load()
    code = _codes.get(source)
    if code is None:
        code = _codes[source] = _compiled(source)
        if not _missed:
            _missed = True
            import atexit

            atexit.register(save)
    _used.add(source)
    exec(code, globals, locals)


def save() -> None:
    """Write what this process compiled (at exit, when anything was missing): whole, then renamed."""
    if sys.dont_write_bytecode or _codes is None:
        return
    codes = _codes if len(_codes) <= MOST_KEPT else {source: _codes[source] for source in _used}
    path = cache_path()
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as file:
            file.write(_header() + marshal.dumps(codes))
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _patch(module: ModuleType) -> None:
    # A name in the module shadows the builtin `exec` it calls.
    module.exec = _exec  # type: ignore[attr-defined]


class _PatchOnImport:
    """A finder that patches `dataclasses` as it is imported: a start that never imports it (help,
    the status line) does not pay for importing it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "dataclasses":
            return None
        if self in sys.meta_path:  # (unless something else took it out)
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(name, path, target) if find_spec is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Route `dataclasses`' compiling through the cache, now or when it is first imported."""
    module = sys.modules.get("dataclasses")
    if module is not None:
        _patch(module)
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
