"""`ctxpipe --version`: answered alone before anything loads (cli/entry.py), listed in `ctxpipe --help` (cli/app.py)."""

from __future__ import annotations

import sys

from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn

VERSION_FLAGS = ("-V", "--version")


def print_version() -> NoReturn:
    from .. import __version__
    from .emit import say_and_exit

    say_and_exit(f"ctxpipe {__version__}\n", sys.stdout)
