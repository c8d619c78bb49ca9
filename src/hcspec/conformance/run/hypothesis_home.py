"""Keep hypothesis' files out of the user's current directory.

hypothesis writes under its *home* directory, ``.hypothesis/`` in the current directory by
default: the example database (the kit runs without one) and, since hypothesis 6.131, a cache
of the constants it collects from the source files of the code under test
(``.hypothesis/constants/``). A run of the kit — the CLI, or properties run by the pytest
plugin — points that home at a temporary directory of its own while the kit's code runs, so it
leaves no ``.hypothesis/`` behind; the previous home (``set_hypothesis_home_dir`` or
``$HYPOTHESIS_STORAGE_DIRECTORY``) is put back after, so the user's own hypothesis tests in the
same session keep theirs.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_PREFIX = "hc-conformance-hypothesis-"


@contextlib.contextmanager
def use(home: str | Path) -> Iterator[None]:
    """Within the block, hypothesis' home directory is ``home``; the previous setting is
    restored after (also when the block raises)."""
    from hypothesis import configuration

    previous = getattr(configuration, "__hypothesis_home_directory", None)
    configuration.set_hypothesis_home_dir(home)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


@contextlib.contextmanager
def private() -> Iterator[Path]:
    """Within the block, hypothesis' home is a fresh temporary directory (yielded), removed
    after as far as it can be (a worker abandoned by an interrupt may still be writing into
    it); the previous home is restored."""
    with tempfile.TemporaryDirectory(prefix=_PREFIX, ignore_cleanup_errors=True) as home, \
            use(home):
        yield Path(home)


class SessionHome:
    """One private home for many blocks (a pytest session): created at the first
    :meth:`active` block, removed by :meth:`close`."""

    def __init__(self) -> None:
        self._path: Path | None = None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Within the block, hypothesis' home is this session's directory."""
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix=_PREFIX))
        with use(self._path):
            yield

    def close(self) -> None:
        """Remove the directory (if one was made)."""
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None
