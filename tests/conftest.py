"""pytest configuration; the shared helpers live in helpers.py (tests/ is on pythonpath)."""
