"""ctxpipe.files.dataclass_code: the functions `dataclasses` generates for ctxpipe's classes are compiled once, kept
beside the bytecode and loaded at later starts, and the classes they make are the classes `dataclasses`
makes without it.

Each test runs children with a pycache prefix of this file's (the cache follows it, as bytecode does), and
counts with an audit hook the generated sources a child compiled (`compile` events of sources that
define dataclasses' `__create_fn__`)."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ctxpipe.files import dataclass_code

# Counts the generated sources compiled from here on, then runs the child's code, then prints what it put in
# `out` with the count.
COUNTING = textwrap.dedent(
    """\
    import json, sys
    compiled = []
    def hook(event, args):
        if event == "compile" and isinstance(args[0], (str, bytes)) and args[0][:17] in ("def __create_fn__", b"def __create_fn__"):
            compiled.append(1)
    sys.addaudithook(hook)
    out = {}
    """
)
DONE = "out['compiled'] = len(compiled); print(json.dumps(out))\n"
IMPORT_THE_LIBRARY = "import ctxpipe.api\n"


def child(prefix: Path, code: str, *flags: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    done = subprocess.run(
        [sys.executable, *flags, "-X", f"pycache_prefix={prefix}", "-c", COUNTING + code + DONE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def cache_file(prefix: Path) -> Path:
    """Where a child with this prefix keeps the code (the package's folder mirrored under the prefix)."""
    here = Path(dataclass_code.__file__).resolve().parent
    return prefix / str(here).lstrip(os.sep) / dataclass_code.FILE_NAME


# Generated sources `import ctxpipe.api` compiles at least: Python 3.11 compiles one per function
# (about 400), 3.13 one per class (about 20).
MANY = 10


def kept_bytes(codes: object) -> bytes:
    """A kept file holding `codes`, as save writes one: the header, the checksum, the marshalled codes."""
    import zlib

    payload = marshal.dumps(codes)
    return dataclass_code._header() + zlib.crc32(payload).to_bytes(4, "little") + payload


def kept_sources(path: Path) -> dict[str, object]:
    data = path.read_bytes()
    assert data.startswith(dataclass_code._header())
    kept: dict[str, object] = marshal.loads(data[len(dataclass_code._header()) + 4 :])  # after the checksum
    return kept


@pytest.fixture(scope="module")
def shared_prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pycache")


@pytest.fixture
def prefix(shared_prefix: Path) -> Path:
    """The pycache prefix of this file's children: one for all its tests (ctxpipe's bytecode is
    compiled there once), with no kept dataclass code in it when a test starts."""
    cache_file(shared_prefix).unlink(missing_ok=True)
    return shared_prefix


def test_a_second_start_compiles_none_of_the_generated_code(prefix: Path) -> None:
    first = child(prefix, IMPORT_THE_LIBRARY)
    assert isinstance(first["compiled"], int) and first["compiled"] > MANY
    kept = kept_sources(cache_file(prefix))
    assert len(kept) == first["compiled"]
    assert child(prefix, IMPORT_THE_LIBRARY)["compiled"] == 0
    # A class whose source is not kept yet is compiled, then kept beside the others.
    more = child(prefix, "import ctxpipe.api, ctxpipe.jobs.hooks\n")
    assert isinstance(more["compiled"], int) and more["compiled"] > 0
    assert len(kept_sources(cache_file(prefix))) == len(kept) + more["compiled"]


# A class with what `dataclasses` generates code for: defaults, a factory, frozen (its __setattr__), order,
# keyword-only fields, a field out of repr and compare, InitVar and __post_init__, slots, annotations that
# are strings (the modules' `from __future__ import annotations`).
PROBE = textwrap.dedent(
    """\
    from __future__ import annotations
    import dataclasses
    from dataclasses import InitVar, dataclass, field
    from typing import ClassVar

    @dataclass(frozen=True, order=True, slots=True)
    class Probe:
        name: str
        size: int = 3
        tags: tuple[str, ...] = field(default_factory=tuple)
        secret: str = field(default="s", repr=False, compare=False)
        scale: InitVar[int] = 1
        limit: ClassVar[int] = 9
        twice: int = field(init=False, default=0)
        _: dataclasses.KW_ONLY
        late: bool = False

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "twice", self.size * 2 * scale)
    """
)
# What the class does, as JSON: the same for the class made through the cache and the one made without it.
BEHAVIOUR = textwrap.dedent(
    """\
    import dataclasses, inspect, sys, types

    def made(module_name):
        module = types.ModuleType(module_name)
        sys.modules[module_name] = module
        exec(PROBE, module.__dict__)
        return module.Probe

    def behaviour(cls):
        a, b = cls("a", 2, ("x",), "p", 5, late=True), cls("a", 2, ("x",), "q", 5, late=True)
        try:
            a.size = 4
            frozen = "not frozen"
        except dataclasses.FrozenInstanceError as error:
            frozen = type(error).__name__ + str(error)
        return {
            "signature": str(inspect.signature(cls)),
            "init annotations": {k: str(v) for k, v in cls.__init__.__annotations__.items()},
            "repr": repr(a).replace(cls.__module__, "M"),
            "equal": a == b, "less": cls("a", 1) < cls("a", 2), "hash": hash(a) == hash(b),
            "twice": a.twice, "frozen": frozen, "fields": [f.name for f in dataclasses.fields(cls)],
            "doc": cls.__doc__, "slots": cls.__slots__, "match": cls.__match_args__,
            "filename": cls.__init__.__code__.co_filename,
        }

    out["plain"] = behaviour(made("probe_module_before"))  # before ctxpipe is imported: dataclasses untouched
    import ctxpipe
    out["kept"] = behaviour(made("ctxpipe.probe_module"))
    out["elsewhere"] = behaviour(made("probe_module_elsewhere"))
    """
)


def test_the_classes_made_from_kept_code_are_the_classes_dataclasses_makes(prefix: Path) -> None:
    code = f"PROBE = {PROBE!r}\n{BEHAVIOUR}"
    first = child(prefix, code)
    again = child(prefix, code)
    assert first["kept"] == first["elsewhere"] == first["plain"]
    assert again["kept"] == again["elsewhere"] == again["plain"] == first["plain"]
    # The classes outside ctxpipe are compiled in both runs; ctxpipe's only in the first (then kept).
    assert isinstance(first["compiled"], int) and isinstance(again["compiled"], int)
    assert again["compiled"] > 0 and first["compiled"] * 2 == again["compiled"] * 3
    kept = kept_sources(cache_file(prefix))
    assert 2 * len(kept) == again["compiled"] and all("__create_fn__" in source for source in kept)


def test_a_cache_that_cannot_be_read_is_compiled_again_and_replaced(prefix: Path) -> None:
    path = cache_file(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    good = kept_bytes({"def __create_fn__(): pass": compile("pass", "<string>", "exec")})
    # Empty, not ours, cut short, a checksum that does not match, codes of another shape.
    for broken in (b"", b"not a cache", good[:-3], good[:-1] + bytes([good[-1] ^ 1]), kept_bytes([1, 2])):
        path.write_bytes(broken)
        first = child(prefix, IMPORT_THE_LIBRARY)
        assert isinstance(first["compiled"], int) and first["compiled"] > MANY
        assert len(kept_sources(path)) == first["compiled"]
        assert child(prefix, IMPORT_THE_LIBRARY)["compiled"] == 0


def test_nothing_is_written_where_bytecode_would_not_be(prefix: Path) -> None:
    for _ in range(2):
        assert isinstance(compiled := child(prefix, IMPORT_THE_LIBRARY, "-B")["compiled"], int) and compiled > MANY
    assert not cache_file(prefix).exists()


def test_a_cache_past_its_bound_keeps_only_what_a_run_used(prefix: Path) -> None:
    path = cache_file(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    code = compile("pass", "<string>", "exec")
    path.write_bytes(kept_bytes({f"stale {n}": code for n in range(dataclass_code.MOST_KEPT)}))
    first = child(prefix, IMPORT_THE_LIBRARY)
    kept = kept_sources(path)
    assert len(kept) == first["compiled"] and not any(source.startswith("stale") for source in kept)
    assert child(prefix, IMPORT_THE_LIBRARY)["compiled"] == 0


def test_dataclasses_is_not_imported_for_it_and_is_routed_once_imported(prefix: Path) -> None:
    out = child(
        prefix,
        "import ctxpipe\nout['imported'] = 'dataclasses' in sys.modules\nimport dataclasses\nout['exec'] = dataclasses.exec.__module__\n",
    )
    assert out["imported"] is False and out["exec"] == "ctxpipe.files.dataclass_code"


def test_the_kept_file_has_the_bytecodes_mode_whatever_the_umask(prefix: Path) -> None:
    """Under umask 0 a plain open() would make the file writable by anyone, and code from it runs at
    every start: it gets the mode Python gives the module's bytecode (the source's, owner-writable)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run(
        [sys.executable, "-X", f"pycache_prefix={prefix}", "-c", IMPORT_THE_LIBRARY],
        env=env, check=True, timeout=120, preexec_fn=lambda: os.umask(0),
    )  # fmt: skip
    source_mode = os.stat(dataclass_code.__file__).st_mode
    assert cache_file(prefix).stat().st_mode & 0o777 == (source_mode | 0o200) & 0o666 & 0o777


def test_a_kept_file_others_may_write_is_not_loaded(prefix: Path) -> None:
    child(prefix, IMPORT_THE_LIBRARY)
    path = cache_file(prefix)
    path.chmod(0o666)
    compiled = child(prefix, IMPORT_THE_LIBRARY)["compiled"]
    assert isinstance(compiled, int) and compiled > MANY


def test_the_loader_of_dataclasses_is_wrapped_not_changed(prefix: Path) -> None:
    """The loader may be shared with other modules (a zip, a frozen importer): nothing is set on it."""
    out = child(
        prefix,
        "import ctxpipe, dataclasses\n"
        "wrapper = dataclasses.__spec__.loader\n"
        "out['own'] = 'exec_module' in vars(wrapper.loader)\n"
        "out['source'] = wrapper.get_source('dataclasses')[:30] == open(dataclasses.__file__).read()[:30]\n",
    )
    assert out["own"] is False and out["source"] is True


def test_exec_takes_what_the_builtin_takes() -> None:
    """A later `dataclasses` may call exec with closure= (3.11), or globals= and locals= (3.13): passed on as given."""
    namespace: dict[str, object] = {"__name__": "ctxpipe.probe"}
    keywords = {"globals": namespace} if sys.version_info >= (3, 13) else {"closure": None}
    dataclass_code._exec("def __create_fn__():\n    return 7\n", *([] if "globals" in keywords else [namespace]), **keywords)
    assert callable(namespace["__create_fn__"]) and namespace["__create_fn__"]() == 7  # type: ignore[operator]
    other: dict[str, object] = {"__name__": "elsewhere"}
    dataclass_code._exec("x = 1", other, None)
    assert other["x"] == 1
