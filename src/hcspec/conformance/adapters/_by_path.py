"""Loading one file of a user's checkout by path, for the adapters whose code is not a PyPI
release (vLLM's torch mHC path, torchtitan's DeepSeek-V4 port): the user names the checkout in
an environment variable, the adapter executes the one file it needs under a private module name
and never imports the project (whose package import pulls in GPU toolchains).

Torch-free except for what the loaded file imports, so the declarations can call
:func:`checkout_file` to say whether a target is usable.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def checkout_file(env: str, relative: str, project: str) -> Path:
    """The file ``relative`` under the checkout named by ``$env``.

    Raises:
        ImportError: ``$env`` is unset or empty, or names a directory without the file; the
            message says what to set.
    """
    checkout = os.environ.get(env)
    if not checkout:
        raise ImportError(f"set ${env} to the root of a {project} checkout (this target loads "
                          f"{relative} from it by path)")
    path = Path(checkout) / relative
    if not path.is_file():
        raise ImportError(f"${env}={checkout}: no {relative} there (give the root of a "
                          f"{project} checkout)")
    return path


def unavailable_reason(env: str, relative: str, project: str) -> str | None:
    """Why :func:`checkout_file` fails (its message), or None when the file is there."""
    try:
        checkout_file(env, relative, project)
    except ImportError as exc:
        return str(exc)
    return None


def module_name(prefix: str, path: str) -> str:
    """The private ``sys.modules`` name of the file at ``path``: ``prefix`` and the first 16 hex
    digits of the SHA-256 of ``path`` (two checkouts in one process are two modules)."""
    return prefix + hashlib.sha256(path.encode()).hexdigest()[:16]


@functools.cache
def load_file(prefix: str, path: str) -> ModuleType:
    """Execute the Python file at ``path`` once per ``(prefix, path)`` and register it in
    ``sys.modules`` under :func:`module_name` (TorchDynamo looks a traced function's module up
    there).

    Raises:
        ImportError: ``path`` cannot be loaded as a Python module.
        Exception: whatever executing the file raises (e.g. an import it needs).
    """
    name = module_name(prefix, path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
