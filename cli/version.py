"""`ctxpipe --version`: answered alone before anything loads (cli/entry.py), listed in `ctxpipe --help` (cli/app.py)."""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING without loading typing (core/records.py says why); not from core.records:
# `--help` loads this module and nothing of core.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NoReturn

VERSION_FLAGS = ("-V", "--version")


def print_version() -> NoReturn:
    from .. import __version__

    sys.stdout.write(f"ctxpipe {__version__}\n")
    raise SystemExit(0)
