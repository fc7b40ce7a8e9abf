"""Bytecode for the commands a bench starts, as an installed ctxpipe has it.

`pip install` compiles a package's modules. A checkout run with PYTHONDONTWRITEBYTECODE set (as
container images often set it) compiles every module it imports again at every start: 20-30 ms of a
`count` that no installed copy pays. So, as the suite does (tests/conftest.py), the bench's children
keep their bytecode in a cache folder of the bench's own (PYTHONPYCACHEPREFIX), compiled before the
first timed run, and the setting's wish, a source tree without __pycache__, still holds. A
PYTHONPYCACHEPREFIX of the caller's is kept as it is.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import re
import sys
from pathlib import Path

# Folders beside the package's modules in a checkout that are not ctxpipe's code.
NOT_THE_PACKAGE = r"[/\\](\.ci|\.venv|venv|bench|tests|build|dist|node_modules)[/\\]"


def keep_bytecode(folder: Path) -> None:
    """Have every interpreter this process starts keep its bytecode under `folder` when
    PYTHONDONTWRITEBYTECODE would have it compile from source, and compile ctxpipe there now."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    sys.pycache_prefix = str(folder)  # compileall names each file's bytecode as the children will look for it
    spec = importlib.util.find_spec("ctxpipe")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:  # the folders below the package's own (its path may hold any name)
        compileall.compile_dir(location, quiet=1, rx=re.compile(re.escape(location) + NOT_THE_PACKAGE))
