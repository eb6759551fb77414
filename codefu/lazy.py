"""Package exports that load on first use: a package whose __init__ re-exports torch code stays cheap to
import, so that loading and checking a config, and `codefu --help`, need no torch (a second or more)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """A module `__getattr__` and `__all__` for `package`: `exports` maps each public name to the submodule
    defining it (relative: "export" for package.export); `from package import name` imports that submodule
    then."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__, list(exports)
