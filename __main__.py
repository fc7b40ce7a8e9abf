"""`python -m ctxpipe` runs the command line (cli/entry.py: statusline's light path, or cli/app)."""

try:
    from ctxpipe.cli.entry import main
except KeyboardInterrupt:  # Ctrl-C while starting up: quietly, with ExitStatus.INTERRUPTED
    raise SystemExit(130) from None

main()
