"""Measured effects carried from one data directory to another: a walk made on a machine without a GPU takes the
effects, and the GPU's condition probes, that a GPU measured for the very same steps elsewhere.

A step is matched by its transform and the content hashes of its parent and child programs, so an effect is only
ever carried to the programs it was measured on; a step the exporting walk did not make (another commit's
transforms, another expert version) stays untimed and says so. An export holds no program source: lineage ids,
hashes, effects (times, spreads, the device and versions that took them) and probe verdicts.

Why: timing a library's steps took 9 of a 26-minute H200 pipeline (six experts, 50 steps; RESULTS.md#run-26), and
the walks themselves are deterministic on a CPU (RESULTS.md#run-26-effects-carried). A team walks once per commit
wherever it likes and times once per device; a CI machine or a laptop then has the GPU's evidence for ranking
without a GPU."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, replace
from pathlib import Path

from klineage.config import Settings, device_kind
from klineage.library import Library
from klineage.mine import Lineage, LineageStore, timed_on
from klineage.probing import probes_path, read_probes, stored_probes, write_probes
from klineage.skills import skills_from_lineage
from klineage.workload import UserError

FORMAT = "klineage-effects/1"


@dataclass(frozen=True)
class Imported:
    """What one local lineage took from an export: steps given an effect, steps already timed on that device,
    steps with no measured match (they still need a GPU), and probes taken."""

    lineage: str
    matched: int
    kept: int
    unmatched: tuple[int, ...]
    probes: int
    why: str = ""  # set where the lineage took nothing: no record of it, or no finished walk


def _lineages(data_dir: Path) -> list[tuple[LineageStore, Lineage]]:
    root = data_dir / "lineages"
    found = []
    for meta in sorted(root.glob("*/meta.json")) if root.is_dir() else []:
        store = LineageStore(meta.parent)
        lineage = store.lineage()
        if lineage is not None:
            found.append((store, lineage))
    return found


def export_effects(data_dir: Path) -> dict:
    """Every accepted step a GPU timed, per lineage, with the lineage's GPU probes (the files beside it other than
    the walk device's own)."""
    lineages = []
    for store, lineage in _lineages(data_dir):
        steps = [
            {
                "index": s.index,
                "transform": s.transform,
                "parent": s.parent,
                "child": s.child,
                "effect": {k: v for k, v in s.effect.items() if k != "earlier"},
            }
            for s in lineage.accepted
            if s.effect.get("measured") and s.effect.get("device")
        ]
        probes = {}
        for path in sorted(store.root.glob("probes-*.json")):
            found = read_probes(path)
            if found:
                probes[path.stem.removeprefix("probes-")] = {str(k): v for k, v in found.items()}
        if steps or probes:
            lineages.append(
                {
                    "id": lineage.id,
                    "workload_hash": lineage.workload_hash,
                    "expert_hash": lineage.expert_hash,
                    "walk_device": lineage.device,
                    "steps": steps,
                    "probes": probes,
                }
            )
    return {
        "format": FORMAT,
        "exported": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "lineages": lineages,
    }


def read_export(path: Path) -> dict:
    """An export file, or a UserError saying what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"no effects file at {path}") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is not an effects export: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("lineages"), list):
        raise UserError(f"{path} is not an effects export (format {FORMAT!r} expected)")
    return data


def import_effects(data_dir: Path, export: dict, source: str = "") -> list[Imported]:
    """Give each local lineage's untimed accepted steps the effects `export` measured for the same programs, take
    its GPU probes for those steps where none are kept here, and save the lineage's skills again (into
    `data_dir/library`). A step already timed on the export's device keeps its own effect."""
    records = {(r["id"], r["expert_hash"], r["workload_hash"]): r for r in export["lineages"]}
    out = []
    for store, lineage in _lineages(data_dir):
        record = records.get((lineage.id, lineage.expert_hash, lineage.workload_hash))
        if record is None:
            out.append(
                Imported(
                    lineage.id,
                    0,
                    0,
                    tuple(s.index for s in lineage.accepted),
                    0,
                    "no record of this lineage (another expert or workload version)",
                )
            )
            continue
        measured = {(s["transform"], s["parent"], s["child"]): s for s in record["steps"]}
        steps, matched, kept, unmatched, index_of = list(lineage.steps), 0, 0, [], {}
        for i, step in enumerate(lineage.steps):
            if not step.accepted:
                continue
            theirs = measured.get((step.transform, step.parent, step.child))
            if theirs is None:
                unmatched.append(step.index)
                continue
            index_of[theirs["index"]] = step.index
            if timed_on(step, theirs["effect"]["device"]):
                kept += 1
                continue
            earlier = {k: v for k, v in step.effect.items() if k != "earlier"}
            effect = {
                **theirs["effect"],
                "static_delta": step.effect.get("static_delta", {}),
                "earlier": earlier,
                "imported": {"from": source, "exported": export.get("exported", "")},
            }
            steps[i] = replace(step, effect=effect)
            matched += 1
        lineage = replace(lineage, steps=steps)
        if matched:
            store.rewrite_steps(steps)
            store.write_lineage(lineage)
        taken = _take_probes(store, lineage, record.get("probes", {}), index_of)
        if matched or taken:
            _save_skills(data_dir, lineage, {s["effect"]["device"] for s in record["steps"]})
        out.append(Imported(lineage.id, matched, kept, tuple(unmatched), taken))
    return out


def _take_probes(store: LineageStore, lineage: Lineage, probes: dict, index_of: dict[int, int]) -> int:
    """The export's probes on each device, for matched steps only, where this lineage has none kept."""
    taken = 0
    for device, by_index in probes.items():
        path = probes_path(store.root, lineage, device)
        if path.name == "probes.json":
            continue  # the walk device's own probes were made here
        mine = read_probes(path)
        local = {index_of[int(k)]: v for k, v in by_index.items() if int(k) in index_of}
        new = {i: v for i, v in local.items() if i not in mine}
        if new:
            write_probes(path, {**mine, **new})
            taken += len(new)
    return taken


def _save_skills(data_dir: Path, lineage: Lineage, devices: set[str]) -> None:
    """The lineage's skills written again from its records, with the probes kept beside it (the GPU's that timed
    the export over the walk device's: `probe.stored_probes`) and the expert's features and tile rank the earlier
    skills recorded."""
    settings = Settings(data_dir=data_dir)
    probes = {}
    for device in sorted(devices):
        probes.update(stored_probes(lineage, settings, device_kind(device)))
    with Library(data_dir / "library") as library:
        earlier = [s.provenance for s in library.list() if s.provenance.get("lineage") == lineage.id]
        context = next((p["features"] for p in earlier if p.get("features")), None)
        rank = next((p["tile_rank"] for p in earlier if isinstance(p.get("tile_rank"), int)), None)
        for skill in skills_from_lineage(lineage, probes or None, context, rank):
            library.save(skill)
