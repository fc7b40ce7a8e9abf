"""The files a command reads and writes: inputs (paths, streams, stores, mapped reads), atomic writes and backups, object stores, and the sessions a folder holds."""
