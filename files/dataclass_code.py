"""The code `dataclasses` generates for ctxpipe's classes, compiled once and kept like bytecode.

`@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__`, ... and compiles it
with `exec` at every import: on Python 3.11 that is about half of what a command's start costs (90
classes and 387 functions for `report`, 40-50 ms). Python keeps a module's bytecode in `__pycache__`;
this keeps the generated functions' code beside it, keyed by their exact source text, so a start
loads them instead of compiling them again. A class whose source changed misses and is compiled as
before; a cache that cannot be read (a checksum over it) is ignored; nothing is written where Python
would not write bytecode (`-B`, PYTHONDONTWRITEBYTECODE), and `sys.pycache_prefix` is followed. Code
from the file runs at every start, so it is trusted as bytecode is: written new with the bytecode's
mode whatever the umask, and not loaded when others may write to it more than to the module itself.
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

    return MAGIC_NUMBER + b"ctxpipe dataclass code 2\n"


def _bytecode_mode() -> int:
    """The mode Python gives this module's bytecode file (importlib's _calc_mode): the source's, and
    writable by its owner; the umask applies to both alike."""
    try:
        return (os.stat(__file__).st_mode | 0o200) & 0o666
    except OSError:
        return 0o644


def _load() -> dict[str, CodeType]:
    """The kept code, or nothing when there is none, it is damaged (a checksum over it), or it is open
    to more writers than this module's own file (code from it would run in every start)."""
    import zlib

    try:
        with open(cache_path(), "rb") as file:
            if os.fstat(file.fileno()).st_mode & 0o022 & ~_bytecode_mode():
                return {}
            data = file.read()
        header = _header()
        if data.startswith(header) and len(data) >= len(header) + 4:
            payload = data[len(header) + 4 :]
            if zlib.crc32(payload) == int.from_bytes(data[len(header) : len(header) + 4], "little"):
                codes = marshal.loads(payload)
                if isinstance(codes, dict) and all(isinstance(k, str) and isinstance(v, CodeType) for k, v in codes.items()):
                    return codes
    except Exception:  # marshal raises SystemError too on some damaged data: a cache that cannot be read is none
        pass
    return {}


def _compiled(source: str) -> CodeType:
    # dont_inherit: compiled as `dataclasses` compiles it, without this module's `from __future__`
    # (which would turn the generated functions' annotations into strings).
    return compile(source, "<string>", "exec", dont_inherit=True)


def _exec(source: Any, /, *args: Any, **kwargs: Any) -> None:
    """`exec` as `dataclasses` calls it: the source of a ctxpipe class's functions is compiled once.
    Whatever else it is given (a later Python's `closure=`, keywords) goes to `exec` as it came."""
    global _codes, _missed
    globals = args[0] if args else kwargs.get("globals")
    if not isinstance(source, str):
        exec(source, *args, **kwargs)
        return
    if not (isinstance(globals, dict) and str(globals.get("__name__", "")).startswith(PACKAGE + ".")):
        exec(_compiled(source), *args, **kwargs)  # another library's class: compiled as dataclasses would
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
    exec(code, *args, **kwargs)


def save() -> None:
    """Write what this process compiled (at exit, when anything was missing): whole, then renamed."""
    if sys.dont_write_bytecode or _codes is None:
        return
    import zlib

    codes = _codes if len(_codes) <= MOST_KEPT else {source: _codes[source] for source in _used}
    payload = marshal.dumps(codes)
    path = cache_path()
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # A new file (never one there already, nor through a link), with the bytecode's mode.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _bytecode_mode())
    except OSError:
        return
    try:
        with open(descriptor, "wb") as file:
            file.write(_header() + zlib.crc32(payload).to_bytes(4, "little") + payload)
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
        if getattr(spec.loader, "exec_module", None) is None:
            return spec
        # dataclasses' own loader, wrapped: the loader may be shared (a zip, a frozen importer) and
        # must load the other modules as it did.
        spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader:
    """A loader that loads as `loader` does, then patches the module (dataclasses)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, …: the loader's own
        return getattr(self.loader, name)


def install() -> None:
    """Route `dataclasses`' compiling through the cache, now or when it is first imported."""
    module = sys.modules.get("dataclasses")
    if module is not None:
        _patch(module)
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
