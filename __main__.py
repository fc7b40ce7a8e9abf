"""`python -m ctxpipe` runs the command line."""

try:
    from ctxpipe.cli.app import main
except KeyboardInterrupt:  # Ctrl-C while starting up: quietly, with ExitStatus.INTERRUPTED
    raise SystemExit(130) from None

main()
