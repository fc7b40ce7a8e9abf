"""`python -m ctxpipe` runs the command line."""

from ctxpipe.cli.app import main

main()
