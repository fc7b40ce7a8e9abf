"""The pure core: the transcript model and the operations on it. No streams, no terminal."""
