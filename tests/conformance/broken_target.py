"""A TARGET module that fails to import (bad-input catalogue): its dependency is missing."""

import hcspec_no_such_dependency  # noqa: F401


def make() -> None:
    """Never reached."""
