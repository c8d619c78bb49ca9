"""Developer tools that need the source tree (not installed): run them from the repository root
as ``python -m tools.NAME``."""
