"""The thin command-line layer over ctxpipe's core."""
