"""The thin command-line layer over ctxpipe's core."""

# typing.TYPE_CHECKING without loading typing (core/records.py says why), for the command line's
# modules that every start loads, `--help` too, which loads nothing of core (the status line's own
# take it from core.records). A type checker reads any name TYPE_CHECKING as true.
TYPE_CHECKING = False
