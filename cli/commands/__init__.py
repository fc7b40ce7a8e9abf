"""One module per command; each keeps to parsing flags, calling the core and writing results."""
