"""A sandbox child's outcome, read back without letting the child choose what runs: the bytes a job's child writes
are a length and a pickle, unpickled here with an allow-list of globals (plain data and this package's records)."""

from __future__ import annotations

import dataclasses
import enum
import io
import os
import pickle
import struct
import sys
from typing import Any

# what a result may hold: plain data, and the records of this package (a class only: a function of the package
# called with chosen arguments would be code the child chose). numpy's scalar rebuilds a number from bytes.
_SAFE_GLOBALS = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "slice"),
    ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"),
    ("pathlib", "Path"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "dtype"),
}
RESULT_LIMIT = 256 * 2**20  # a result larger than this is no job's honest answer


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module.split(".")[0] == "klineage" and _package_module(module):
            found = getattr(sys.modules[module], name, None)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"a result may not name {module}.{name}")


def _package_module(module: str) -> bool:
    """One of this package's own modules, imported if it is not yet (trusted code: the package, never a program's;
    the warm server has not imported `klineage.audit` when an audit job's report arrives)."""
    if module in sys.modules:
        return True
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    package = importlib.util.find_spec("klineage")
    root = os.path.dirname(package.origin) if package and package.origin else ""
    if spec is None or not spec.origin or not root or not os.path.realpath(spec.origin).startswith(root + os.sep):
        return False
    importlib.import_module(module)
    return True


def safe_loads(data: bytes):
    """Unpickle a job's result or a server's reply, refusing any global but plain data and this package's records:
    a child that ran a candidate's code could otherwise make this process run code of its choosing."""

    return _ResultUnpickler(io.BytesIO(data)).load()


def parse_result(data: bytes) -> tuple[str, Any] | None:
    """The judge's outcome from the bytes it wrote (None: it wrote none, or not a readable one)."""
    if len(data) < 8 or len(data) > RESULT_LIMIT + 8:
        return None
    (size,) = struct.unpack("<Q", data[:8])
    if size != len(data) - 8:
        return None
    try:
        outcome = safe_loads(data[8:])
    except Exception:
        return None
    if not (isinstance(outcome, tuple) and len(outcome) == 2 and outcome[0] in ("ok", "oom", "exception")):
        return None
    return outcome
