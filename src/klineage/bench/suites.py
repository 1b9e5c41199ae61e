"""The instances a bench run evaluates: a workload, the program an optimizer starts from, and optionally the expert
program it is compared with. Suites:
- `heldout`: the 22 naive programs of `klineage.suites` (no lineage touched them);
- `naive`: the bundled examples' naive programs, with the project-written expert (else the tuned version) as the
  reference;
- `experts`: the simplest form of every finished lineage under `$KLINEAGE_HOME/lineages` (what mining reduced each
  expert to), with the expert itself as the reference;
- `wild`, `wild-quant`: real Triton kernels of installed packages, each its own reference (klineage.suites.wild,
  klineage.suites.wild_quant)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from klineage.config import Settings
from klineage.mine import LineageStore
from klineage.program import Program, load_program
from klineage.workload import UserError, source_hash

EXAMPLES_DIR = Path(__file__).parent.parent / "examples"
PACKAGE_DIR = Path(__file__).parent.parent  # klineage/: where a bundled workload's copy is read (_relocated)


@dataclass(frozen=True)
class Instance:
    name: str
    workload: Path
    start: Program = field(repr=False)
    expert: Program | None = field(default=None, repr=False)
    # where a wild instance comes from: package, module, the PyTorch-op workload that classifies a rejection
    origin: dict = field(default_factory=dict, repr=False, compare=False, hash=False)


def suite(name: str, settings: Settings) -> list[Instance]:
    """A suite's instances; `a,b,...` joins several, each instance named `suite:instance` so names stay unique."""
    if "," in name:
        parts = [n.strip() for n in name.split(",") if n.strip()]
        return [replace(i, name=f"{Path(part).name}:{i.name}") for part in parts for i in suite(part, settings)]
    if name == "heldout" or Path(name).is_dir():
        from klineage.suites import suite_instances

        try:
            pairs = suite_instances(name)
        except KeyError as e:
            raise UserError(str(e.args[0])) from None
        return [Instance(w.parent.name, w, load_program(p)) for w, p in pairs]
    if name == "naive":
        out = []
        for folder in sorted(EXAMPLES_DIR.iterdir()):
            naive = folder / "naive.py"
            expert = next((folder / f for f in ("expert.py", "tuned.py") if (folder / f).is_file()), None)
            if naive.is_file():
                out.append(
                    Instance(
                        folder.name,
                        folder / "workload.py",
                        load_program(naive),
                        load_program(expert) if expert else None,
                    )
                )
        return out
    if name == "experts":
        return expert_instances(settings)
    if name in WILD_SUITES:
        return wild_instances(settings, wild_catalogue(name))[0]
    raise UserError(f"unknown suite {name!r}: expected heldout, naive, experts, wild, wild-quant or a suite folder")


# real kernels, each its own reference: every final program re-timed, every rejected start classified
WILD_SUITES = ("wild", "wild-quant")


def wild_catalogue(name: str) -> tuple:
    """The catalogue of the wild suite `name` (klineage.suites.wild, klineage.suites.wild_quant)."""
    from klineage.suites import wild, wild_quant

    return wild_quant.catalogue() if name == "wild-quant" else wild.catalogue()


def wild_instances(settings: Settings, kernels: tuple | None = None) -> tuple[list[Instance], dict[str, str]]:
    """The wild suite's instances (their files written into the data directory), and the kernels not offered with
    why (a package not installed). The start carries a copy of the kernel's module, so methods can rewrite it; the
    reference is the program as written, importing the installed module. `kernels`: the catalogue's by default."""
    from klineage.reference import self_reference_workload
    from klineage.suites import wild

    kernels, left = wild.chosen(kernels)
    out = []
    for k in kernels:
        files = wild.write(k, settings.data_dir)
        program = load_program(files.program)
        workload = self_reference_workload(files.inputs, program, settings.data_dir)
        source = wild.module_source(k.module)
        start = program.with_module(k.module, source) if source is not None else program
        origin = {"package": k.package, "module": k.module, "pytorch": str(files.pytorch)}
        out.append(Instance(k.name, workload, start, origin=origin))
    return out, left


def expert_instances(settings: Settings) -> list[Instance]:
    """The simplest form of every finished lineage (the latest one per workload and expert), expert as reference."""
    root = settings.data_dir / "lineages"
    found: dict[tuple[str, str], tuple[float, Instance]] = {}
    for lineage_json in sorted(root.glob("*/lineage.json")) if root.is_dir() else []:
        meta_path = lineage_json.parent / "meta.json"
        store = LineageStore(lineage_json.parent)
        lineage = store.lineage()
        if lineage is None or not lineage.finished or not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text())
        simplest = store.load_program(lineage.simplest, lineage.expert)
        expert = store.load_program(lineage.expert_hash, lineage.expert)
        key = (lineage.workload, lineage.expert)
        mtime = lineage_json.stat().st_mtime
        if key not in found or found[key][0] < mtime:
            where = _relocated(meta["workload"], meta.get("workload_hash", ""))
            found[key] = (mtime, Instance(f"{lineage.workload}-{lineage.expert}", where, simplest, expert))
    return [inst for _, inst in sorted(found.values(), key=lambda t: t[1].name)]


def _relocated(path: str, workload_hash: str = "") -> Path:
    """Where to read a lineage's workload, recorded as a path on the machine that mined it. A bundled workload is
    read from this installation's package whenever its copy here has the recorded content (`workload_hash`), even
    where the recorded path exists too: on the device machine the recorded /work/main/... is the device call's own
    tree, which every later call replaces while the bench runs from a copy, and a bench on the H200 read it while it
    was being replaced (a FileNotFoundError in an escape re-check: RESULTS.md#run-23). Otherwise the recorded path
    where it is a file, and the package's copy where only that exists."""
    recorded = Path(path)
    if "klineage/" not in path:
        return recorded
    moved = PACKAGE_DIR / path.rsplit("klineage/", 1)[1]
    if not moved.is_file():
        return recorded
    if not recorded.is_file() or (workload_hash and source_hash(moved.read_text()) == workload_hash):
        return moved
    return recorded
