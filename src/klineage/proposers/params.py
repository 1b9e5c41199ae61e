"""Carrying an expert's parameters to this program: the expert's code adapted where this program can evaluate it
(klineage.carry: `adapt`, `visible_code`, `numeric_neighbours`), an expert's launch configuration mapped onto this
program's launch parameters of the same names (`tile_assignment`, `missing_knobs`), and what says whether it is
evidence here at all (the tiles' dimensions, the element size, the construct)."""

from __future__ import annotations

import re

from klineage import launch_config
from klineage.carry import adapt, numeric_neighbours, visible_code
from klineage.launch_config import expert_tiles
from klineage.program import Program
from klineage.skills import Skill

ELEMENT_BYTES = {"dtype_float32": 4, "dtype_float16": 2, "dtype_bfloat16": 2}
# What a CUDA launch that passes no knob runs with (Triton 3.x's CUDAOptions)
KNOB_DEFAULTS = {"num_warps": 4, "num_stages": 3}


def element_bytes(feats: dict[str, float]) -> int | None:
    """The element size a program's features name, or None (Transform.launch_configuration: evidence for one
    element size only)."""
    return next((n for key, n in ELEMENT_BYTES.items() if feats.get(key)), None)


def tile_dims(values: dict) -> frozenset[str]:
    """The tile sizes among launch parameters by the names launch_config reads as tiles (BLOCK_M, TILE_N, BM,
    BLOCK_SIZE_K, ...), not warps, stages or program order: a `TILE_`-named config had read as no tiles at all, and
    so as warps and stages alone, the lineage's own knobs carried onto any kernel."""
    return frozenset(k for k in values if launch_config.TILE_NAME.match(k))


def config_tiles(skill: Skill) -> list[dict[str, int]]:
    """The tiles (not only warps and stages) in a skill's config list."""
    return [t for t in expert_tiles(skill.transform.get("params") or {}) if set(t) - set(launch_config.KNOBS)]


def runs_one_of(program: Program, tiles: list[dict[str, int]]) -> bool:
    """Whether the program's launch parameters already equal one of these tiles on every parameter they share, and
    its launches run the tile's warps and stages (a launch that passes none runs Triton's defaults)."""
    for _, source in program.module_sources():
        tunables = launch_config.tunables(source)
        names = {t.keyword for t in tunables}
        if any(
            names & set(tile)
            and not tile_assignment(tunables, tile)
            and not (tile_dims(tile) and missing_knobs(tunables, tile))
            for tile in tiles
        ):
            return True
    return False


def missing_knobs(tunables: list[launch_config.Tunable], tile: dict[str, int]) -> dict[str, int]:
    """The tile's warps and stages for the kernels it tiles whose launches pass no knob, as {kernel.knob: value};
    a value equal to Triton's default is not missing."""
    tiled = {t.kernel for t in tunables if t.keyword in tile and t.keyword not in launch_config.KNOBS}
    with_knobs = {t.kernel for t in tunables if t.keyword in launch_config.KNOBS}
    return {
        f"{kernel}.{knob}": int(tile[knob])
        for kernel in sorted(tiled - with_knobs)
        for knob in launch_config.KNOBS
        if knob in tile and int(tile[knob]) != KNOB_DEFAULTS[knob]
    }


def tile_assignment(tunables: list[launch_config.Tunable], tile: dict[str, int]) -> dict[str, int]:
    """Map an expert's tile onto a program's tunables by keyword name (BLOCK_M -> BLOCK_M, num_warps -> ...)."""
    values = {}
    for t in tunables:
        if t.keyword in tile and tile[t.keyword] != t.value:
            values[t.key] = int(tile[t.keyword])
    return values


def _callee(code: str) -> str | None:
    match = re.match(r"\s*(?:\w+\s*=\s*)?([\w.]+)\(", code)
    return match.group(1) if match else None


def same_construct(skill_code: str, site_code: str) -> bool:
    """Whether a skill's site and a program's site are the same kind of construct (the same call, `tl.load` vs
    `tl.store`); sites that are not a call (launches, statement groups) are not told apart here."""
    a, b = _callee(skill_code), _callee(site_code)
    return a is None or b is None or a == b


__all__ = [
    "ELEMENT_BYTES",
    "KNOB_DEFAULTS",
    "adapt",
    "config_tiles",
    "element_bytes",
    "expert_tiles",
    "missing_knobs",
    "numeric_neighbours",
    "runs_one_of",
    "same_construct",
    "tile_assignment",
    "tile_dims",
    "visible_code",
]
