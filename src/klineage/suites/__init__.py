"""Evaluation suites: folders of instances, each instance a folder holding a workload (`workload.py`) and the naive
program an optimizer starts from (`naive.py`). The instance folders are data loaded by path, not modules of the
package (no `__init__.py` inside them), like the bundled examples.

- `heldout`: 22 instances that no lineage touched (other operators, shapes, dtypes and layouts than the mined
  experts), each naming in its docstring the tempting optimization that is unsafe on it. See `heldout/README.md`.
"""

from __future__ import annotations

from pathlib import Path

SUITES_DIR = Path(__file__).resolve().parent
SUITES: dict[str, Path] = {"heldout": SUITES_DIR / "heldout"}


def suite_instances(name: str) -> list[tuple[Path, Path]]:
    """(workload, naive program) pairs of a suite, sorted by instance name. `name` is a key of `SUITES` or the path
    of a suite folder; an instance is a subfolder holding both `workload.py` and `naive.py`."""
    folder = SUITES.get(name)
    if folder is None:
        folder = Path(name)
        if not folder.is_dir():
            raise KeyError(f"unknown suite {name!r}: expected one of {', '.join(sorted(SUITES))} or a suite folder")
    pairs = []
    for instance in sorted(p for p in folder.iterdir() if p.is_dir()):
        workload, naive = instance / "workload.py", instance / "naive.py"
        if workload.is_file() and naive.is_file():
            pairs.append((workload, naive))
    return pairs
