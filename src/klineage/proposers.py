"""Where candidates come from: each method's proposer turns the current program into candidates, best first.

- `SkillProposer` (KLineage): the library's optimization skills. Each skill's conditions are decided against the
  workload's domain (klineage.conditions): apply where they hold, apply behind a run-time guard where they hold on
  part of it, refuse (no budget spent, the reason recorded) where they never hold. The expert's parameters are
  carried over (renamed onto this program's launch where they are tiles) and a small neighbourhood searched;
  candidates are ordered by the effect the skill measured.
- `BlindProposer`: the same transform catalog with default parameters, no conditions, no effects.
- `MemoryProposer`: a knowledge base of past outcomes (program features -> transform, parameters -> observed
  speedup), retrieved by feature similarity, no conditions (a KernelBlaster/KernelSkill-style baseline).
- `AutotuneProposer`: launch configuration only (tile sizes, warps, stages)."""

from __future__ import annotations

import ast
import builtins
import functools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

import libcst as cst

from klineage import launch_config
from klineage.conditions import GATED, HOLDS, PARTIAL, VIOLATED, Decision, decide, guarded
from klineage.config import Settings, device_name
from klineage.features import features, similarity
from klineage.program import Program
from klineage.skills import Skill
from klineage.transform import TRANSFORMS, Site, Transform, load_families
from klineage.transforms._anchored import constexpr_params
from klineage.transforms.autotune_single_config import kernel_launches
from klineage.transforms.launch_knobs import kernel_names, trailing_kwargs
from klineage.transforms.rows_per_program import ROW_TILE_CAP
from klineage.transforms.rows_per_program import TWIN as ROWS_TWIN
from klineage.transforms.whole_row_tile import TWIN, WARPS_NAME, scaled_ladder, twin_ladders
from klineage.workload import Workload

# Condition statuses decided against the domain before applying: backed by a counterexample, required where
# violated, or never probed (conservative: a predicate nobody could test must hold). "not_a_condition" (both
# forms passed the probe) and "outside_domain" (both failed) say nothing about applying.
CHECKED = ("condition", "required", "unprobed", "not_probed")
# Predicates about the program being optimized (does its kernel accumulate, does it write its inputs), decided on
# the target for every skill of a family that lists them: the expert's probe result describes the expert's code.
TARGET_PROPERTIES = ("idempotent_launch", "no_aliasing")
PRIOR_SPEEDUP = 1.0  # an unmeasured skill promises nothing: candidates are then ordered by family cost
STRIDE_GAIN = 1.5  # a kept tile step that paid this much is followed by x4, not x2 (Proposer._same_way)
# Carried warps leave each thread at least this many of the elements one program handles: Liger's launch rule
# (calculate_settings) raises warps above 4 only where each thread keeps 8 or more (8 warps from 2048-element
# blocks, 16 from 8192, 32 from 32768), and on the H200 (run 5) 8 warps carried onto 256- to 512-element blocks
# (1 to 2 elements per thread) ran at x0.57-0.86 on 9 of 10 kernels (x1.035 on one).
MIN_ELEMENTS_PER_THREAD = 8
# Families whose evidence is a launch configuration: tiles, warps and stages cost registers and shared memory in
# proportion to the element size, so their effect is evidence only for kernels of the same element size (the
# bf16 matmul expert's 128x256x64 tile, x4.7 there, ran at x0.054 on an fp32 batched matmul on the H200, run 5).
LAUNCH_FAMILIES = ("autotune_single_config", "launch_knobs")
ELEMENT_BYTES = {"dtype_float32": 4, "dtype_float16": 2, "dtype_bfloat16": 2}
# Families whose expert form buys robustness, not speed (int64 offsets past 2^31, fp32 math in half-precision
# kernels): KLineage applies them where the domain needs them (their predicate fails on part of it), never for speed.
ROBUSTNESS = {"int64_offsets": "offsets_below_2_31", "fp32_upcast": "tolerance"}


@dataclass(frozen=True)
class Candidate:
    label: str  # what is tried, in a few words
    origin: str  # skill id, "catalog", "memory:<entry>" or "launch_config"
    transform: str  # transform id, or "launch_config"
    module: str
    function: str
    params: dict
    expected: float  # expected speedup from the evidence (1.0: none)
    guard: str  # predicate dispatched on at launch ("" for none)
    decided_by: tuple[str, ...]  # conditions that were checked for it, "predicate: verdict"
    # the candidate program, or a function that writes it when first asked: a proposal round lists many candidates
    # and a budget evaluates few (writing each up front took 136 s on Liger's cross-entropy module)
    made: object = field(repr=False, compare=False)
    site: str = ""  # the code of the site it rewrites, where it has one (line numbers move when a change is kept)

    @functools.cached_property
    def program(self) -> Program | None:
        """The rewritten program; None when the rewrite turned out not to apply (costs no budget)."""
        return self.made() if callable(self.made) else self.made

    @property
    def key(self) -> tuple:
        """What makes two proposals the same without writing either."""
        return (self.transform, self.module, self.label, json.dumps(self.params, sort_keys=True, default=str))

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "made"}
        d["program_hash"] = self.program.hash if self.program is not None else None
        return d


@dataclass(frozen=True)
class Refusal:
    origin: str
    transform: str
    function: str
    predicate: str
    reason: str


# --- parameters: carried over and a neighbourhood ----------------------------------------------------------------


def _literal_int(text) -> int | None:
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def expert_tiles(skill_params: dict) -> list[dict[str, int]]:
    """The tile/warps/stages settings an expert's autotune configs (or launch) chose, as {name: value} dicts."""
    out = []
    configs = skill_params.get("config_list") or skill_params.get("configs")
    if configs:
        try:
            tree = ast.parse(configs, mode="eval")
        except SyntaxError:
            tree = None
        for call in ast.walk(tree) if tree is not None else []:
            if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) == "Config":
                values: dict[str, int] = {}
                if call.args and isinstance(call.args[0], ast.Dict):
                    for k, v in zip(call.args[0].keys, call.args[0].values):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, int):
                            values[str(k.value)] = v.value
                for kw in call.keywords:
                    if kw.arg in launch_config.KNOBS and isinstance(kw.value, ast.Constant):
                        values[kw.arg] = kw.value.value
                if values:
                    out.append(values)
    knobs = {k: v for k, v in ((k, _literal_int(skill_params.get(k))) for k in launch_config.KNOBS) if v}
    if knobs:
        out.append(knobs)
    return out


def adapt(params: dict, source: str, defaults: dict, labels: tuple[str, ...] = ()) -> dict:
    """The expert's parameters where this program can evaluate them: an expression naming something the program
    does not define (an expert's helper such as `_num_warps(BLOCK)`) falls back to the family's default, or is
    dropped when the family has none (a role name such as the expert's `pid_m`: the site's own names fill it).
    `labels` (Transform.label_params) are the family's own choices, carried as they are: read as code, fast math's
    `kind: exp2` had been dropped, and its `tl.exp2` then landed on a `1 / tl.sqrt` site."""
    out = {}
    for key, text in params.items():
        if key in labels:
            out[key] = text
            continue
        missing = _undefined(_leaf_names(text), source)
        if missing and key in defaults:
            out[key] = defaults[key]
        elif not missing:
            out[key] = text
    return out


@functools.lru_cache(maxsize=64)
def visible_code(source: str, function: str) -> str:
    """The code whose names `function` can read: its own body and the module's top level, other functions' and
    classes' bodies left out (their names kept). A name defined only inside another function had passed as
    defined: SwiGLU's `num_warps=num_warps` was carried into Liger's cross_entropy_forward, where `num_warps`
    lives in another function, and failed its gate with a NameError on the H200 (run 5). The whole source when
    `function` is neither a top-level function nor a method of a top-level class."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return source
    parts, found = [], False
    for node in module.body:
        if isinstance(node, cst.FunctionDef | cst.ClassDef):
            methods = (
                [m for m in node.body.body if isinstance(m, cst.FunctionDef)]
                if isinstance(node, cst.ClassDef)
                else [node]
            )
            mine = next((m for m in methods if m.name.value == function), None)
            parts.append(module.code_for_node(mine) if mine is not None else f"{node.name.value} = None")
            found = found or mine is not None
        else:
            parts.append(module.code_for_node(node))
    return "\n".join(parts) if found else source


def _undefined(names: set[str], source: str) -> list[str]:
    """The names `source` never binds (assignments, parameters, imports, definitions; builtins and the modules
    every kernel imports aside), sorted. A mention is not a binding: SwiGLU's `num_warps` had passed as defined in
    a module whose launches only spell the keyword `num_warps=`. Where the source does not parse, any mention
    counts."""
    bound = _bound_names(source)
    known = ("tl", "triton", "torch", "True", "False", "None")
    if bound is None:
        return sorted(n for n in names if n not in known and not re.search(rf"\b{re.escape(n)}\b", source))
    return sorted(n for n in names if n not in known and n not in bound and n not in BUILTINS)


BUILTINS = frozenset(dir(builtins))


@functools.lru_cache(maxsize=128)
def _bound_names(source: str) -> frozenset[str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return frozenset(names)


def _leaf_names(value) -> set[str]:
    """Names read by a parameter's code, through lists and dicts: the matmul expert's `tl.assume` facts are a list
    of `stride_am > 0` strings, which as one string had read as no names at all (and then failed to compile on
    kernels without those strides)."""
    if isinstance(value, str):
        return _names_in(value)
    if isinstance(value, dict):
        return set().union(*(_leaf_names(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(_leaf_names(v) for v in value))
    return set()


def _names_in(code: str) -> set[str]:
    """Names a parameter's code reads: an expression, or statements (an expert's whole host-side branch)."""
    for mode in ("eval", "exec"):
        try:
            tree = ast.parse(code, mode=mode)
        except SyntaxError:
            continue
        bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
    return set()


def numeric_neighbours(params: dict) -> list[dict]:
    """Params with one integer-literal value doubled or halved (powers of two), the carried-over params first."""
    out = [params]
    for key, text in params.items():
        value = _literal_int(text)
        if value is None or value < 2 or value & (value - 1) or key in ("decorator",):
            continue
        for other in (value * 2, value // 2):
            if 1 <= other <= 4096:
                out.append({**params, key: str(other)})
    return out


SIZE_PARAM = re.compile(r"^([A-Z]|n_\w+|\w+_size|num_\w+|n\w*)$")


def autotune_params(source: str, kernel: str, tiles: list[dict[str, int]]) -> dict | None:
    """Params for `autotune_single_config.optimize` on this program: the first config is what the launches pass
    now (their trailing tile and knob keywords), the others that config changed by each of `tiles`; the key is the
    kernel's size arguments. None when the launch's trailing keywords are not all tunable literals."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    fn = next((s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == kernel), None)
    values = {t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == kernel}
    launches = kernel_launches(module, kernel)
    if fn is None or not values or not launches:
        return None
    launch = launches[0]  # optimize checks that every launch ends with the same keywords
    n = trailing_kwargs(launch, frozenset(values))
    if n == 0:
        return None
    end = len(launch.args) - 1 if launch.args[-1].star == "**" else len(launch.args)
    first = {a.keyword.value: values[a.keyword.value] for a in launch.args[end - n : end]}
    configs = [first]
    for tile in tiles:
        config = {**first, **{k: v for k, v in tile.items() if k in first or k in launch_config.KNOBS}}
        if config not in configs:
            configs.append(config)
    params = [p.name.value for p in fn.params.params]
    constexpr = constexpr_params(fn)
    key = [p for p in params if p not in constexpr and SIZE_PARAM.match(p) and not p.endswith("_ptr")]

    def config_code(c: dict) -> str:
        meta = ", ".join(f"'{k}': {v}" for k, v in c.items() if k not in launch_config.KNOBS)
        knobs = "".join(f", {k}={v}" for k, v in c.items() if k in launch_config.KNOBS)
        return f"triton.Config({{{meta}}}{knobs})"

    return {"configs": "[" + ", ".join(config_code(c) for c in configs) + "]", "key": repr(key)}


def _tile_dims(values: dict) -> frozenset[str]:
    """The tile sizes among launch parameters (BLOCK_M, BLOCK_N, ...), not warps, stages or program order."""
    return frozenset(k for k in values if k.startswith("BLOCK"))


def _config_tiles(skill: Skill) -> list[dict[str, int]]:
    """The tiles (not only warps and stages) in an autotune skill's config list."""
    return [t for t in expert_tiles(skill.transform.get("params") or {}) if set(t) - set(launch_config.KNOBS)]


def _runs_one_of(program: Program, tiles: list[dict[str, int]]) -> bool:
    """Whether the program's launch parameters already equal one of these tiles on every parameter they share, and
    its launches run the tile's warps and stages (a launch that passes none runs Triton's defaults)."""
    for _, source in program.module_sources():
        tunables = launch_config.tunables(source)
        names = {t.keyword for t in tunables}
        if any(
            names & set(tile)
            and not _tile_assignment(tunables, tile)
            and not (_tile_dims(tile) and _missing_knobs(tunables, tile))
            for tile in tiles
        ):
            return True
    return False


# What a CUDA launch that passes no knob runs with (Triton 3.x's CUDAOptions)
KNOB_DEFAULTS = {"num_warps": 4, "num_stages": 3}


def _missing_knobs(tunables: list[launch_config.Tunable], tile: dict[str, int]) -> dict[str, int]:
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


def _tile_assignment(tunables: list[launch_config.Tunable], tile: dict[str, int]) -> dict[str, int]:
    """Map an expert's tile onto a program's tunables by keyword name (BLOCK_M -> BLOCK_M, num_warps -> ...)."""
    values = {}
    for t in tunables:
        if t.keyword in tile and tile[t.keyword] != t.value:
            values[t.key] = int(tile[t.keyword])
    return values


# --- candidate generation --------------------------------------------------------------------------------------


def _callee(code: str) -> str | None:
    match = re.match(r"\s*(?:\w+\s*=\s*)?([\w.]+)\(", code)
    return match.group(1) if match else None


def _same_construct(skill_code: str, site_code: str) -> bool:
    """Whether a skill's site and a program's site are the same kind of construct (the same call, `tl.load` vs
    `tl.store`); sites that are not a call (launches, statement groups) are not told apart here."""
    a, b = _callee(skill_code), _callee(site_code)
    return a is None or b is None or a == b


@functools.lru_cache(maxsize=64)  # asked per site and per candidate of every round, of the same few sources
def _kernel_names(source: str) -> frozenset[str]:
    try:
        return frozenset(kernel_names(cst.parse_module(source)))
    except cst.ParserSyntaxError:
        return frozenset()


def _unfounded_hint(skill: Skill, source: str, site: Site) -> str | None:
    """Why an expert's alignment hint cannot be carried to this site, or None. `tl.multiple_of(x, BLOCK_M)` claims x
    is a multiple of BLOCK_M: here that bound must exist, and the value must be built from it (`pid * BLOCK`,
    `tl.arange(0, BLOCK)`), or the claim is unfounded: the attention expert's hints had landed on
    `pid = tl.program_id(0)` with a `BLOCK_M` the kernel did not define."""
    for fn, bound in (skill.transform.get("params") or {}).get("hints", []):
        if _literal_int(bound) is not None:
            continue  # a number: whether it holds is the conditions' question (divisible_by_block, aligned_16)
        names = _names_in(str(bound))
        if missing := _undefined(names, source):
            return f"the expert's bound {bound} names {', '.join(missing)}, which this program does not define"
        if not any(re.search(rf"\b{re.escape(n)}\b", site.before) for n in names):
            return f"{site.before.strip()[:60]} is not built from {bound}: {fn} would claim what nothing shows"
    return None


REDUCTIONS = (
    "tl.sum(",
    "tl.max(",
    "tl.min(",
    "tl.argmax(",
    "tl.argmin(",
    "tl.cumsum(",
    "tl.cumprod(",
    "tl.reduce(",
    "tl.associative_scan(",
    "tl.atomic_",
)


def _reduces_1d(source: str, kernel: str) -> str | None:
    """The reduction a 1-D kernel (no broadcast indexing) applies to its lanes, if any: there, lanes a wrap
    duplicates are summed, maxed or atomically added twice, while in a 2-D GEMM the wrapped rows are independent."""
    body = launch_config.kernel_code(source, kernel)
    if launch_config.broadcasts(body):
        return None
    return next((op.rstrip("(") for op in REDUCTIONS if op in body), None)


def _element_bytes(feats: dict[str, float]) -> int | None:
    return next((n for key, n in ELEMENT_BYTES.items() if feats.get(key)), None)


def _present_warps(source: str, kernel: str) -> int:
    """The warps `kernel` is launched with: a literal `num_warps`, else Triton's default of 4."""
    return next((t.value for t in launch_config.tunables(source) if t.kernel == kernel and t.keyword == "num_warps"), 4)


def _warps_for_tile(variants: list[dict], source: str, kernel: str, launches: list[dict] | None = None) -> list[dict]:
    """Carried warps adapted to this launch's tile: at most the warps that leave each thread
    MIN_ELEMENTS_PER_THREAD of the elements one program handles (an expert's 8 or 16 warps were measured on rows
    of thousands of elements; on a 256-element block they idle). A variant the tile has no room for (its warps
    capped at or below the present ones: a reduction nobody measured) is dropped, as are variants that end at the
    launch's present warps or repeat one another: they would spend an evaluation on the same program. A computed
    tile (`next_power_of_2(n)`) has its size from the bench case's launches (`launches`), where the check saw them;
    without them it is not capped. RoPE's 64-wide half per program took SwiGLU's 8 warps (expected x1.16) first and
    ran at x0.50, and the rows-per-program twin, x5.9 for blind, never got its turn in four evaluations (H200,
    run 19).
    Where a computed tile has no room for more warps than the present ones, the carried variant becomes half the
    present warps (one step; the next round steps again from there): such a tile is the row or the head, which no
    launch parameter enlarges, so fewer threads are the one way to give each more of it. Measured: on RoPE (64
    elements a program) and the masked softmax (1024 fp16 elements) the autotune baseline's 2 warps ran at x1.234
    and x1.068, and 1 warp after them at x1.000 and x1.140, where the cap had left KLineage no warps at all (H200,
    run 20). A literal tile keeps the drop: the launch-configuration search enlarges it instead."""
    elements = launch_config.elements_per_program(source, kernel)
    computed = elements is None
    if computed:
        elements = launch_config.launched_elements(source, kernel, launches)
    cap = None
    if elements is not None:
        room = elements // (32 * MIN_ELEMENTS_PER_THREAD)
        cap = 1 << (room.bit_length() - 1) if room else 0  # a power of two
    present = _present_warps(source, kernel)
    out = []
    for params in variants:
        warps = _literal_int(params.get("num_warps"))
        if warps is not None and cap is not None and warps > cap:
            if cap > present:
                params = {**params, "num_warps": str(cap)}
            elif computed and present >= 2:
                params = {**params, "num_warps": str(present // 2)}
            else:
                continue
        if params.get("num_warps") is not None and _literal_int(params["num_warps"]) == present and len(params) == 1:
            continue
        if params not in out:
            out.append(params)
    return out


def _variant_expected(
    expected: float, params: dict, carried: dict | None, transform: str, source: str, kernel: str | None
) -> float:
    """A carried variant's expected effect: the skill's own; a neighbour's, discounted (the square root); for
    warps turned the other way from the carried ones (`_warps_for_tile`), none: the skill measured more warps."""
    if params == carried:
        return expected
    warps, asked = _literal_int(params.get("num_warps")), _literal_int((carried or {}).get("num_warps"))
    if transform == "launch_knobs" and kernel is not None and warps is not None:
        present = _present_warps(source, kernel)
        if warps < present and (asked is None or asked > present):
            return PRIOR_SPEEDUP
    return expected**0.5


def _kernel_of(site: Site, source: str) -> str | None:
    """The Triton kernel a site is in, or that its launch launches."""
    return _kernel_at(site.function, site.before, source)


def _kernel_at(function: str, code: str, source: str) -> str | None:
    """`function` where it is a kernel of `source`; else the kernel that `code` (a launch statement) launches."""
    kernels = _kernel_names(source)
    if function in kernels:
        return function
    # `name[` rather than `name[grid](`: a grid lambda holds brackets of its own (the rows twin's
    # `META["BLOCK_ROW"]`), and its launch had been taken for no kernel's, so its carried warps went uncapped
    launched = re.findall(r"(\w+)\s*\[", code)
    return next((k for k in launched if k in kernels), None)


def launched_kernel(candidate: Candidate, program: Program) -> str | None:
    """The Triton kernel a candidate's site launches, where the site is a launch in a host function (launch knobs,
    a dispatch); None for a site inside a kernel, or none found. A check's `functions_run` names the host function,
    which ran, not which of its launches did: Liger SwiGLU's Blackwell-only tiled launch took two of KLineage's three
    evaluations on the H200 and changed nothing there (x1.0008 and x1.000, run 19)."""
    source = dict(program.module_sources()).get(candidate.module)
    if not source or not candidate.site:
        return None
    kernel = _kernel_at(candidate.function, candidate.site, source)
    return None if kernel == candidate.function else kernel


def _rewrite(program: Program, module: str, transform: Transform, source: str, site: Site, params: dict):
    """A function that writes the candidate program (None when the rewrite does not apply)."""

    def make() -> Program | None:
        new = _apply(transform, source, site, params)
        return program.with_source(module, new) if new is not None else None

    return make


def _sites(transform: Transform, program: Program) -> Iterator[tuple[str, str, Site]]:
    """(module, source, site) for every optimize site of a family in the program's modules; a family that fails on
    odd code offers none there."""
    for module, source in program.module_sources():
        try:
            sites = transform.optimize_sites(source)
        except Exception:
            continue
        for site in sites:
            if not _fallback(source, _kernel_of(site, source)):
                yield module, source, site


def _spent_key(candidate: Candidate) -> tuple:
    """The same rewrite at the same site: by the site's code, not its label, whose line moves when an earlier
    change is kept (whole_row_tile on MSE's final reduction, spent at forward:42, came back as forward:60 after the
    rows twin was kept above it; H200, run 10)."""
    where = candidate.site or candidate.label
    return (
        candidate.origin,
        candidate.transform,
        candidate.module,
        candidate.function,
        where,
        json.dumps(candidate.params, sort_keys=True, default=str),
    )


def _fallback(source: str, kernel: str | None) -> bool:
    """Whether `kernel` only runs where its twin cannot (rows wider than the one-tile twin's cap, whole_row_tile;
    row tiles wider than the rows twin's cap, rows_per_program): a change to it, or to its launch, leaves the timed
    case as it was and would spend an evaluation on nothing."""
    return kernel is not None and any(f"def {kernel}{twin}(" in source for twin in (TWIN, ROWS_TWIN))


def _apply(transform: Transform, source: str, site: Site, params: dict) -> str | None:
    try:
        out = transform.optimize(source, site, params)
    except Exception:
        return None
    if transform.id == "autotune_single_config":  # the configs now own the tiles: size the grid from them
        host_tiles = {
            t.name
            for t in launch_config.tunables(source)
            if t.kernel == site.function and t.bound == "assigned" and t.keyword not in launch_config.KNOBS
        }
        out = launch_config.meta_grid(out, site.function, host_tiles)
    if out == source:
        return None
    try:
        compile(out, "<candidate>", "exec")
    except SyntaxError:
        return None
    return out


class Proposer:
    """Turns the current program into an ordered list of candidates. Subclasses say where ideas come from."""

    method = ""

    def __init__(self, workload: Workload, settings: Settings, device: str):
        self.workload, self.settings, self.device = workload, settings, device
        self.refusals: list[Refusal] = []
        # program hash -> its launches on the bench case (optimize fills it from each check: klineage.gates'
        # launch_rows); a tile computed at run time has a size only there
        self.launched: dict[str, list[dict] | None] = {}
        # launch-configuration steps listed so far: candidate key -> {tunable key: (keyword, before, after)}
        self._steps: dict[tuple, dict[str, tuple[str, int, int]]] = {}

    def propose(self, program: Program) -> list[Candidate]:
        raise NotImplementedError

    def observe(self, attempt, evaluations_left: int) -> Candidate | None:
        """Told every gated attempt in order; may return a follow-up candidate to gate next (the llm materializer's
        repair of a failed one)."""
        return None

    def after_refusal(self, candidate: Candidate, predicate: str) -> Candidate | None:
        """Told a candidate optimize refused after writing it (`predicate`, today shared_memory_fits); may return the
        same change written so that it passes, to gate next."""
        return None

    def llm_usage(self) -> dict | None:
        """Model calls and tokens spent (None for a proposer that uses no model)."""
        return None

    def evidence(self) -> dict | None:
        """What the proposer's order rests on, for the report (None: a method with no library)."""
        return None

    def worth(self, candidate: Candidate) -> bool:
        """Asked just before a listed candidate is gated: False skips it, at no cost, because what this run measured
        after the list was made says it will not pay."""
        return True

    def launch_candidates(self, program: Program, origin: str, expected: float) -> Iterator[Candidate]:
        """One tunable changed to a neighbouring value (the launch-configuration search). Work per program whose
        loop steps by a tile moves first together with that tile, the loop's trip count kept: the atomic row sum's
        CHUNK alone went 512 -> 2048 at x1.23 and x1.07, then 4096 ran at x0.65, its 128-wide tile left to loop 32
        times (H200, run 12), where 4096 with a 1024 tile runs at 0.83 of the roofline and 8192 with 2048 at 0.85
        (roofline_gaps.py atomic)."""
        for module, source in program.module_sources():
            found = launch_config.tunables(source, work=True)
            for t in found:
                if _fallback(source, t.kernel):
                    continue
                tile = next((s for s in found if s.kernel == t.kernel and s.keyword == t.step and not s.work), None)
                # a tile's first step up may go further than one doubling (KLineage: _first_stride), a tile with
                # the work it steps through; work alone moves one step
                stride = self._first_stride(source, t.kernel) if t.keyword not in launch_config.KNOBS else 2
                far = t.value * stride if stride > 2 and launch_config.allowed(t, t.value * stride) else None
                if tile is not None:
                    wide = [far] if far and launch_config.allowed(tile, tile.value * stride) else []
                    for value in wide + launch_config.neighbours(t):
                        moved = value * tile.value // t.value
                        if value in wide or moved in launch_config.neighbours(tile):
                            yield self._step(program, module, source, {t: value, tile: moved}, origin, expected)
                for value in ([far] if far and not t.work else []) + launch_config.neighbours(t):
                    yield self._step(program, module, source, {t: value}, origin, expected)

    def _first_stride(self, source: str, kernel: str) -> int:
        """How far a tile's first step up goes: one doubling (the plain neighbourhood search)."""
        return 2

    def _step(
        self,
        program: Program,
        module: str,
        source: str,
        moves: dict[launch_config.Tunable, int],
        origin: str,
        expected: float,
    ) -> Candidate:
        values = {t.key: v for t, v in moves.items()}
        label = (
            f"{', '.join(t.key for t in moves)}: {', '.join(str(t.value) for t in moves)} -> "
            f"{', '.join(str(v) for v in moves.values())}"
        )
        make = functools.partial(_retuned, program, module, source, values)
        cand = Candidate(
            label, origin, "launch_config", module, next(iter(moves)).function, values, expected, "", (), make
        )
        self._steps[cand.key] = {t.key: (t.keyword, t.value, v) for t, v in moves.items()}
        return cand

    def _same_way(self, attempt, evaluations_left: int) -> Candidate | None:
        """After a kept tile step, the next step the same way, gated before the round's list: MSE's partial sums
        paid at each block doubling (256 -> 2048 at x1.98, x1.53 and x1.10), and KLineage then spent its sixth
        evaluation on launch knobs (x1.000) where blind's fourth doubling gave x1.077 (H200, run 11). Warps and
        stages keep their own order (`SkillProposer.worth`).
        A step that paid STRIDE_GAIN or more is followed by two steps' worth at once (x4), where the tunable's bounds
        allow: the program is still far from where the tile stops paying. At budget 4 (run 17, H200) KLineage and
        blind climbed the element-wise kernels' BLOCK one doubling per evaluation (bias_gelu 128 -> 1024 at x1.98,
        x1.74, x1.21), while the memory baseline, jumping to a remembered 4096 at once, ended at x4.64 against x4.16
        on bias_gelu and x3.74 against x3.44 on MSE."""
        cand = attempt.candidate
        step = self._steps.get(cand.key)
        if step is None or not attempt.kept or evaluations_left < 1 or cand.program is None:
            return None
        if any(keyword in launch_config.KNOBS or before == after for keyword, before, after in step.values()):
            return None
        source = dict(cand.program.module_sources()).get(cand.module, "")
        now = {t.key: t for t in launch_config.tunables(source, work=True)}
        gain = attempt.effect.get("speedup") or 1.0
        for stride in (4, 2) if gain >= STRIDE_GAIN else (2,):
            moves = {}
            for key, (_, before, after) in step.items():
                t = now.get(key)
                further = after * stride if after > before else after // stride
                if t is None or t.value != after or not launch_config.allowed(t, further):
                    break
                moves[t] = further
            else:
                return self._step(cand.program, cand.module, source, moves, cand.origin, cand.expected)
        return None


def _retuned(
    program: Program, module: str, source: str, values: dict[str, int], knobs: dict[str, int] | None = None
) -> Program | None:
    """The program with launch parameters set to `values`, and `knobs` ({kernel.num_warps: 8, ...}) appended to
    the launches of their kernels that pass no knob (None when one of those cannot be written)."""
    new = launch_config.with_values(source, values)
    if knobs:
        new = _with_knobs(new, knobs)
    return program.with_source(module, new) if new is not None else None


def _with_knobs(source: str, knobs: dict[str, int]) -> str | None:
    """`source` with `kernel.num_warps`-style knobs appended to every launch of their kernels that passes no knob
    (those run Triton's defaults), through the launch-knobs family; None when a launch could not be rewritten."""
    transform = TRANSFORMS["launch_knobs"]()
    by_kernel: dict[str, dict[str, str]] = {}
    for key, value in knobs.items():
        kernel, knob = key.rsplit(".", 1)
        by_kernel.setdefault(kernel, {})[knob] = str(value)
    for kernel, params in by_kernel.items():
        for _ in range(16):  # each rewrite gives one launch its knobs; a module launches a kernel a few times
            site = next((s for s in transform.optimize_sites(source) if _kernel_of(s, source) == kernel), None)
            if site is None:
                break
            new = _apply(transform, source, site, params)
            if new is None:
                return None
            source = new
    return source


def _transforms() -> dict[str, Transform]:
    load_families()
    return {tid: cls() for tid, cls in sorted(TRANSFORMS.items(), key=lambda kv: (kv[1].cost, kv[0]))}


class SkillProposer(Proposer):
    """KLineage: the library's skills, their conditions decided on the domain, parameters carried over."""

    method = "klineage"
    decides_conditions = True  # optimize counts a candidate that cannot load as refused (shared_memory_fits)

    def __init__(self, workload, settings, device, skills: list[Skill]):
        super().__init__(workload, settings, device)
        self.skills = [s for s in skills if s.kind == "optimization"]
        # guards whose construct kept their expert within the device's shared memory: `after_refusal`
        self.shared_memory_guards = [s for s in skills if s.kind == "guard" and _saves_shared_memory(s)]
        self.transforms = _transforms()
        # lineages whose warps and stages travel inside their autotune configs (see _expert_tiles), never alone
        self._with_configs = {
            s.provenance.get("lineage", s.id)
            for s in self.skills
            if s.transform["id"] == "autotune_single_config" and _config_tiles(s)
        }
        self.context: dict[str, float] = {}
        self._refused: set[tuple] = set()
        self._knobs: dict[tuple, _KnobSite] = {}  # launch-knob candidates (by key) -> where they change warps
        # launch-configuration search keys naming a num_warps -> (module, kernel, elements per program, present warps)
        self._warps_keys: dict[tuple[str, str], tuple[str, str, int | None, int]] = {}
        # (module, kernel, elements per program) -> what this run measured there: (slower warps, faster warps, why)
        self._warps_order: dict[tuple, list[tuple[int, int, str]]] = {}
        self._fewer_tried: set[tuple] = set()
        # (skill, transform, module, label) -> why: a rewrite this run gated and found no faster, or failing
        self._spent: dict[tuple, str] = {}
        # a twin's warp-ladder follow-up (by key) -> (module, kernel, factor, the program it rewrote, step number)
        self._ladders: dict[tuple, tuple] = {}
        self._laddered: set[tuple[str, str]] = set()

    def _first_stride(self, source: str, kernel: str) -> int:
        """x4 for a tile's first step up while that leaves each thread at most MIN_ELEMENTS_PER_THREAD of the
        program's elements, the density the Liger experts keep (above): at one element a thread (128 at 4 warps)
        each load is a 2- or 4-byte scalar, and one doubling leaves the tile far below that density. On the H200
        (run 21) blind's one-doubling ladders ran faster at 512 than at 256 on 12 of 14 one-dimensional held-out
        kernels starting at 128 elements (softplus_odd_n peaking there), the other two within 2% (layer norm
        x0.98, strided add x0.999); KLineage spent its second and third evaluations climbing 128 -> 256 -> 1024
        where the memory baseline's remembered 4096 landed at once. A tile computed at launch, or one the warps
        already fill, keeps the plain step."""
        elements = launch_config.elements_per_program(source, kernel)
        if elements is None or elements * 4 > 32 * _present_warps(source, kernel) * MIN_ELEMENTS_PER_THREAD:
            return 2
        return 4

    def evidence(self) -> dict:
        """How many of the library's optimization skills carry an effect timed on a GPU, and on this very device:
        without any, every skill expects x1.0 and the order is the families' cost, as blind's catalog is (run 16:
        a library walked on the CPU and never timed ended level with blind on six instances)."""
        here = device_name(self.device)
        timed = [s.timed_devices() for s in self.skills]
        # effects another data directory measured (`klineage effects import`): a report says they were carried
        imported = sum(any(s.effect[d].get("imported") for d in devices) for s, devices in zip(self.skills, timed))
        return {
            "skills": len(self.skills),
            "measured": sum(map(bool, timed)),
            "device": here,
            "measured_here": sum(here in devices for devices in timed),
            "imported": imported,
        }

    def expected(self, skill: Skill) -> float:
        """The skill's measured speedup on this device (any device if none here), discounted by how unlike the
        skill's workload this one is; 1.0 without a measurement, or when it was measured in the other roofline
        regime (a compute-bound expert's warps and stages, x4.76 on the H200's matmul, say nothing about an
        elementwise kernel, where they had ranked first at x2.8 before this rule)."""
        effects = [e for e in skill.effect.values() if e.get("measured") and e.get("speedup")]
        here = [e for d, e in skill.effect.items() if d == device_name(self.device) and e.get("measured")]
        chosen = (here or effects)[:1]
        if not chosen or not self._transfers(skill) or not self._same_regime(skill):
            return PRIOR_SPEEDUP
        e = chosen[0]
        gain = math.log(max(e["speedup"], 1e-3))
        if not e.get("significant", True):
            # within the noise: no evidence of a gain, nor of a loss. A quarter of a gain had still ranked
            # cross-entropy's x1.03 fast math (spreads of 7-9%) above the block-size search on every GELU-like
            # held-out kernel; a loss kept had ranked RMSNorm's rows-per-program step (x0.993, spread 0.10, at
            # 0.039 ms) below every untimed candidate, and RoPE, x5.96 with rows per program, ended at x1.24 in
            # run 26 (x5.95 in run 25, where the same step had timed at or above x0.995)
            gain = 0.0
        weight = 0.5 + 0.5 * similarity(self.context, skill.provenance.get("features") or {})
        return math.exp(gain * weight)

    def _same_regime(self, skill: Skill) -> bool:
        """False where the skill was measured on a compute-bound kernel and this one is memory-bound, or the other
        way; true where either side is unknown."""
        origin = skill.provenance.get("features") or {}
        return not (
            "compute_bound" in origin
            and "compute_bound" in self.context
            and origin["compute_bound"] != self.context["compute_bound"]
        )

    def _configs_fit(self, skill: Skill, source: str, kernel: str) -> bool:
        """Whether an expert's autotune configs are evidence for this kernel's launch: measured on the same element
        size, in the same roofline regime, and (where they carry tiles) tiling the same dimensions."""
        here = _tile_dims({t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == kernel})
        dims = [_tile_dims(t) for t in _config_tiles(skill)]
        return self._transfers(skill) and self._same_regime(skill) and (not dims or here in dims)

    def _transfers(self, skill: Skill) -> bool:
        """False for a launch configuration measured on another element size than this workload's (see
        LAUNCH_FAMILIES); true where either side's element size is unknown."""
        if skill.transform["id"] not in LAUNCH_FAMILIES:
            return True
        mine, theirs = _element_bytes(self.context), _element_bytes(skill.provenance.get("features") or {})
        return mine is None or theirs is None or mine == theirs

    def propose(self, program: Program) -> list[Candidate]:
        self.context = features(program, self.workload)
        self._warps_keys = {
            (module, t.key): (module, t.kernel, launch_config.elements_per_program(source, t.kernel), t.value)
            for module, source in program.module_sources()
            for t in launch_config.tunables(source)
            if t.keyword == "num_warps"
        }
        out: list[Candidate] = []
        sites: dict[str, list] = {}  # many skills share a family: list its sites once
        for skill in self.skills:
            transform = self.transforms.get(skill.transform["id"])
            if transform is None:
                continue
            if transform.id not in sites:
                sites[transform.id] = list(_sites(transform, program))
            for module, source, site in sites[transform.id]:
                out.extend(self._for_site(skill, transform, program, module, source, site))
        out.extend(self._expert_tiles(program))
        return _ordered(out)

    def _for_site(self, skill, transform, program, module, source, site) -> list[Candidate]:
        if not _same_construct(skill.location.get("before", ""), site.before):
            return []  # a hint learned on a load is not evidence for a store
        if transform.id == "launch_knobs" and skill.provenance.get("lineage", skill.id) in self._with_configs:
            return []  # carried inside the lineage's configs, with the tiles they were measured with
        kernel = _kernel_of(site, source)
        if transform.id == "alignment_hints" and (why := _unfounded_hint(skill, source, site)):
            self._refuse(Refusal(skill.id, transform.id, site.function, "divisible_by_block", why))
            return []
        if transform.id == "wrapped_indices" and kernel is not None and (op := _reduces_1d(source, kernel)):
            self._refuse(
                Refusal(
                    skill.id,
                    transform.id,
                    site.function,
                    "divisible_by_block",
                    f"the kernel reduces its lanes ({op}): a wrapped lane would count twice wherever a "
                    "size is not a multiple of the block; a GEMM's rows and columns are independent, "
                    "these are not",
                )
            )
            return []
        found = screen(skill, self.workload, source, kernel, self.device, self.settings.target)
        if found.refusal is not None:
            self._refuse(Refusal(skill.id, transform.id, site.function, *found.refusal))
            return []
        if transform.id == "rows_per_program" and (why := self._twin_not_timed(program, source, site)):
            self._refuse(Refusal(skill.id, transform.id, site.function, "timed_case", why))
            return []
        guard, decided_by = found.guard, found.decided_by
        if guard is not None and kernel is not None and f"def {kernel}_when_{guard.predicate}(" in source:
            return []  # already applied behind this guard: the original kernel is the fallback path
        expected = self.expected(skill)
        if transform.id == "autotune_single_config" and self._configs_fit(skill, source, site.function):
            # the expert's configs, renamed onto this kernel's launch
            carried = autotune_params(source, site.function, expert_tiles(skill.transform.get("params") or {}))
            variants = [carried] if carried else []
        elif transform.id == "autotune_single_config":
            # the skill's conditions still decide whether autotune is safe here, but its configs were measured on
            # another loop nest, element size or regime: the matmul expert's warps and stages on layer norm's
            # 256-element block ran at x1.22 where the block doubled and 8 warps ran at x1.43 (H200, run 6)
            carried = blind_params(transform, source, site)
            variants = [carried] if carried else []
        else:
            carried = adapt(
                skill.transform.get("params") or {},
                visible_code(source, site.function),
                transform_defaults(transform),
                transform.label_params,
            )
            variants = numeric_neighbours(carried or transform_defaults(transform))[:3]
            if transform.id == "launch_knobs" and kernel is not None:
                variants = _warps_for_tile(variants, source, kernel, self.launched.get(program.hash))
        if guard is not None and kernel is None:
            self._refuse(
                Refusal(
                    skill.id,
                    transform.id,
                    site.function,
                    guard.predicate,
                    f"holds on part of the domain ({guard.reason}); the site is in no kernel a launch "
                    "could dispatch on",
                )
            )
            return []
        out = []
        for params in variants:
            label = f"{transform.id} at {site.function}:{site.line}" + (
                f" guarded by {guard.predicate}" if guard else ""
            )
            if params != carried:
                label += " (" + ", ".join(f"{k}={v}" for k, v in params.items() if k != "decorator")[:60] + ")"
            make = _rewrite(program, module, transform, source, site, params)
            if guard is not None:
                make = functools.partial(self._guarded, make, program, module, source, kernel, guard, skill, site)
            out.append(
                Candidate(
                    label,
                    skill.id,
                    transform.id,
                    module,
                    site.function,
                    params,
                    _variant_expected(expected, params, carried, transform.id, source, kernel),
                    guard.predicate if guard else "",
                    decided_by,
                    make,
                    site.before,
                )
            )
            if transform.id == "launch_knobs" and kernel is not None and guard is None:
                self._knobs[out[-1].key] = _KnobSite(
                    program, module, transform, source, site, kernel, _present_warps(source, kernel)
                )
        return out

    def _twin_not_timed(self, program: Program, source: str, site: Site) -> str:
        """Why the rows twin would change nothing timed: its dispatch takes it only where the row tile is at most
        ROW_TILE_CAP wide, and the bench case's launches (as the check saw them) asked for a wider one; '' when
        they did not, or are unknown. The naive softmax's 8192-wide rows would have spent an evaluation on it."""
        kernel = site.params.get("kernel")
        elements = launch_config.launched_elements(source, kernel, self.launched.get(program.hash)) if kernel else None
        if elements is None or elements <= ROW_TILE_CAP:
            return ""
        return (
            f"the bench case launches {kernel} with a {elements}-element row tile; the twin's dispatch takes only "
            f"tiles of at most {ROW_TILE_CAP}, so the timed case would run the present kernel"
        )

    def _warps_move(self, candidate: Candidate) -> tuple[tuple, int, int] | None:
        """Where a candidate changes a launch's warps: ((module, kernel, elements per program), present, new); None
        for any other candidate. Launch knobs name their site; the launch-configuration search names the launch's
        `num_warps` by its key."""
        if (at := self._knobs.get(candidate.key)) is not None:
            warps = _literal_int(candidate.params.get("num_warps"))
            elements = launch_config.elements_per_program(at.source, at.kernel)
            return None if warps is None else ((at.module, at.kernel, elements), at.present, warps)
        if candidate.transform != "launch_config" or len(candidate.params) != 1:
            return None
        ((key, value),) = candidate.params.items()
        found = self._warps_keys.get((candidate.module, key))
        warps = _literal_int(value)
        if found is None or warps is None:
            return None
        module, kernel, elements, present = found
        return (module, kernel, elements), present, warps

    def worth(self, candidate: Candidate) -> bool:
        """Not warps this run already measured slower at the same launch and tile, nor further in that direction:
        more warps than a count measured too many, fewer than one measured too few (rope's 8 warps ran at x0.51 on
        the H200 and its 16 warps were then tried at x0.25, run 5; after 2 warps beat 4 on rope and on the masked
        softmax, the search went back to 4, the start's launch, x0.80 and x0.93, run 6). The order is kept per
        tile: a kept block change moves where the warps pay."""
        if (why := self._spent.get(_spent_key(candidate))) is not None:
            self._refuse(Refusal(candidate.origin, candidate.transform, candidate.function, "measured_here", why))
            return False
        move = self._warps_move(candidate)
        if move is None:
            return True
        where, _, warps = move
        for slower, faster, why in self._warps_order.get(where, []):
            if (slower > faster and warps >= slower) or (slower < faster and warps <= slower):
                self._refuse(Refusal(candidate.origin, candidate.transform, candidate.function, "measured_here", why))
                return False
        return True

    def observe(self, attempt, evaluations_left: int) -> Candidate | None:
        """Records which of two warp counts measured faster at a launch, beyond both spreads (a kept change, or a
        clear slowdown), for `worth`. After the next count up from the present warps measured a clear slowdown, the
        launch is over-threaded for its tile: half the present warps are gated next, once per launch (a search of
        the carried parameter's neighbourhood that its measurement points)."""
        cand, effect = attempt.candidate, attempt.effect
        if cand.transform != "launch_config" and attempt.outcome in ("not_faster", "failed_gate"):
            # the same rewrite at the same site, offered again once another change was kept: whole_row_tile on
            # MSE's small final reduction ran at x1.000 three times in one run of 6 evaluations (H200, run 8)
            ran = (
                f"ran at x{effect['speedup']:.3f}"
                if attempt.outcome == "not_faster" and effect.get("speedup")
                else attempt.outcome.replace("_", " ")
            )
            self._spent[_spent_key(cand)] = f"the same rewrite here {ran} at evaluation {attempt.evaluation}"
        if (ladder := self._ladder_follow(attempt, evaluations_left)) is not None:
            return ladder
        if (onward := self._same_way(attempt, evaluations_left)) is not None:
            return onward
        move = self._warps_move(cand)
        if move is None or not effect.get("measured") or attempt.outcome not in ("kept", "not_faster"):
            return None
        where, present, warps = move
        (module, kernel, _), speedup = where, effect["speedup"]
        if attempt.kept:
            self._warps_order.setdefault(where, []).append(
                (
                    present,
                    warps,
                    f"{present} warps at {kernel}'s launch ran at x{1 / speedup:.2f} of {warps} in "
                    f"this run (evaluation {attempt.evaluation})",
                )
            )
            return None
        noise = max(effect.get("current_spread", 0.0) + effect.get("candidate_spread", 0.0), 0.01)
        if speedup >= 1 / (1 + noise):
            return None  # within the noise: the two counts are not ordered
        self._warps_order.setdefault(where, []).append(
            (
                warps,
                present,
                f"{warps} warps at {kernel}'s launch ran at x{speedup:.2f} of {present} in this run "
                f"(evaluation {attempt.evaluation})",
            )
        )
        at = self._knobs.get(cand.key)
        # only the next count up says the present one is already too many: 16 warps slower than 4, with 8 even,
        # pointed nowhere below 4 (the naive RMSNorm's 2 warps ran at x0.996, an evaluation spent; run 6)
        if (
            at is None
            or not present < warps <= 2 * present
            or where in self._fewer_tried
            or present < 2
            or evaluations_left < 1
        ):
            return None
        self._fewer_tried.add(where)
        fewer = {"num_warps": str(present // 2)}
        follow = Candidate(
            f"launch_knobs at {at.site.function}:{at.site.line} (num_warps={present // 2}: "
            f"{warps} ran at x{speedup:.2f})",
            cand.origin,
            "launch_knobs",
            module,
            at.site.function,
            fewer,
            PRIOR_SPEEDUP,
            "",
            cand.decided_by,
            _rewrite(at.program, at.module, at.transform, at.source, at.site, fewer),
        )
        self._knobs[follow.key] = at  # so that its own measurement is recorded too
        return follow

    def _ladder_follow(self, attempt, evaluations_left: int) -> Candidate | None:
        """The warps of a kept one-tile twin, one rung of its ladder at a time: they are computed at launch from the
        row's tile, so the launch-configuration search has no literal to change, and after the twin the layer norms,
        log-softmax and row argmax had stopped with budget left (H200, run 9). Halved first; kept, halved again;
        the first halving slower, doubled once instead."""
        cand = attempt.candidate
        if evaluations_left < 1:
            return None
        if cand.transform == "whole_row_tile" and attempt.kept:
            return self._ladder_step(cand, cand.program, 0.5, 1, None)
        if (state := self._ladders.get(cand.key)) is None:
            return None
        module, kernel, factor, base, steps = state
        if attempt.kept:
            return self._ladder_step(cand, cand.program, factor, steps + 1, kernel)
        if steps == 1 and factor < 1 and attempt.outcome == "not_faster":
            return self._ladder_step(cand, base, 2.0, 1, kernel)
        return None

    def _ladder_step(
        self, cand: Candidate, program: Program | None, factor: float, steps: int, kernel: str | None
    ) -> Candidate | None:
        for module, source in program.module_sources() if program is not None else []:
            names = [kernel] if kernel else [k for k in twin_ladders(source) if (module, k) not in self._laddered]
            for name in names:
                new = scaled_ladder(source, name, factor)
                if new is None:
                    continue
                self._laddered.add((module, name))
                label = f"{name}{TWIN} warps x{factor:g} (its ladder, one rung {'down' if factor < 1 else 'up'})"
                follow = Candidate(
                    label,
                    cand.origin,
                    "launch_config",
                    module,
                    cand.function,
                    {f"{name}{TWIN}.{WARPS_NAME}": f"x{factor:g}"},
                    PRIOR_SPEEDUP,
                    "",
                    cand.decided_by,
                    program.with_source(module, new),
                )
                self._ladders[follow.key] = (module, name, factor, program, steps)
                return follow
        return None

    def _guarded(self, make, program, module, source, kernel, guard, skill, site) -> Program | None:
        """The rewrite behind a launch-time guard on `guard`'s predicate; refused when it cannot be isolated."""
        rewritten = make()
        if rewritten is None:
            return None
        new = guarded(source, dict(rewritten.module_sources())[module], kernel, guard.predicate)
        if new is None:
            self._refuse(
                Refusal(
                    skill.id,
                    skill.transform["id"],
                    site.function,
                    guard.predicate,
                    f"holds on part of the domain ({guard.reason}); the change could not be isolated "
                    "behind a launch-time guard",
                )
            )
            return None
        return program.with_source(module, new)

    def _expert_tiles(self, program: Program) -> list[Candidate]:
        """The launch configurations experts chose (autotune configs, launch knobs), set on this program's launch
        parameters of the same names; then the neighbourhood of each.

        An expert's configuration travels whole: its warps and stages were measured with its tiles, so where the
        same lineage has both an autotune config list and launch knobs, the knobs are carried only inside the
        configs (8 warps on a naive 32x32 matmul tile ran at 0.76x on the H200, the same warps with the expert's
        128x256 tile are what its 4.76x launch-knobs step measured). A configuration is expected to do what the
        best evidence of its lineage's launch steps says, and on a compute-bound program at least what the best of
        the lineage's other steps says: they were all timed at that configuration (`_measured_at_configuration`)."""
        launch = [s for s in self.skills if s.transform["id"] in ("autotune_single_config", "launch_knobs")]
        by_lineage: dict[str, list[Skill]] = {}
        for skill in launch:
            by_lineage.setdefault(skill.provenance.get("lineage", skill.id), []).append(skill)
        out: list[Candidate] = []
        guesses: list[Candidate] = []  # another loop nest's tiles: no evidence here
        for lineage, skills in by_lineage.items():
            has_configs = lineage in self._with_configs
            carried = [s for s in skills if not (has_configs and s.transform["id"] == "launch_knobs")]
            tiles = [t for s in carried for t in expert_tiles(s.transform.get("params") or {})]
            # once the program runs one of the lineage's configurations its evidence is spent: the others are
            # alternatives to try, not further gains to expect
            if _runs_one_of(program, tiles):
                expected = 1.0
            else:
                expected = max(*(self.expected(s) for s in skills), self._measured_at_configuration(lineage, tiles))
            for skill in carried:
                for tile in expert_tiles(skill.transform.get("params") or {}):
                    for module, source in program.module_sources():
                        tunables = launch_config.tunables(source)
                        values = _tile_assignment(tunables, tile)
                        # a tiling means something for the loop nest it tiles: the expert's evidence goes with it
                        # only onto a kernel tiled along the same dimensions (a matmul's BLOCK_M/N/K onto an
                        # attention kernel's BLOCK_M/N is a guess to try, not a measured gain)
                        dims = _tile_dims(tile)  # none: warps and stages alone, the lineage's own knobs
                        same = self._transfers(skill) and (
                            not dims or dims == _tile_dims({t.keyword: t.value for t in tunables})
                        )
                        # the configuration's warps and stages go with its tile, onto launches that pass none
                        knobs = _missing_knobs(tunables, tile) if dims and same else {}
                        if not values and not knobs:
                            continue
                        label = launch_config.describe({**values, **knobs})
                        (out if same else guesses).append(
                            Candidate(
                                f"expert tile {label}",
                                skill.id,
                                "launch_config",
                                module,
                                tunables[0].function,
                                {**values, **knobs},
                                expected if same else PRIOR_SPEEDUP,
                                "",
                                (),
                                functools.partial(_retuned, program, module, source, values, knobs),
                            )
                        )
        if self.device == "cuda":  # the neighbourhood is only worth searching where speed is measured
            out.extend(self.launch_candidates(program, "launch_config", 1.0))
        return out + guesses  # after the neighbourhood: one step from a working config fails less often

    def _measured_at_configuration(self, lineage: str, tiles: list[dict]) -> float:
        """What a compute-bound lineage's steps are expected to bring where the program does not run the lineage's
        configuration yet: every step was timed at that configuration, and only there is its effect evidence. So the
        configuration is ranked as the best of them and comes first. On the H200 (session 20) the attention
        expert's exp2 fold, x1.39 at its 128x128 tile, ran at x1.013 on the naive attention's 32x32 tile and x1.31
        at 128x64; ranked above the tile it spent the budget's evaluations before the tile was tried. 1.0 for a
        memory-bound program (a tile there is not what the steps' effects hinge on) or a lineage with no tiles."""
        if not self.context.get("compute_bound") or not tiles:
            return 1.0
        steps = [self.expected(s) for s in self.skills if s.provenance.get("lineage", s.id) == lineage]
        return max(steps, default=1.0)

    def after_refusal(self, candidate: Candidate, predicate: str) -> Candidate | None:
        """A candidate refused because its kernel needs more shared memory than the device has, written again with
        the construct of a guard skill that says it avoids exactly that: removing it from its expert failed to
        compile for shared memory. The attention expert's `p.to(v.dtype)` before P @ V is one (its fp32 operands
        need 263184 bytes at the 128x128 tile and 3 stages, 232448 fit): the expert's tile carried onto the naive
        attention asks for 262144 bytes and is refused; with P and V in half it needs 229376 and compiles. Once
        per refused candidate (a rewrite refused again is not rewritten again)."""
        rewritten = {g.id for g in self.shared_memory_guards}  # a candidate this method already wrote
        if predicate != "shared_memory_fits" or candidate.origin in rewritten or candidate.program is None:
            return None
        for guard in self.shared_memory_guards:
            transform = self.transforms.get(guard.transform["id"])
            for module, source in candidate.program.module_sources() if transform is not None else ():
                sites = transform.optimize_sites(source)
                if not sites:
                    continue
                site = sites[0]
                params = adapt(
                    guard.transform.get("params") or {},
                    visible_code(source, site.function),
                    transform_defaults(transform),
                    transform.label_params,
                )
                label = f"{candidate.label}, with {transform.id} at {site.function}:{site.line} (guard {guard.id})"
                return Candidate(
                    label,
                    guard.id,
                    transform.id,
                    module,
                    site.function,
                    params,
                    candidate.expected,
                    "",
                    (*candidate.decided_by, f"shared_memory_fits: refused, then {guard.id}"),
                    _rewrite(candidate.program, module, transform, source, site, params),
                    site.before,
                )
        return None

    def refuse_candidate(self, candidate: Candidate, predicate: str, reason: str) -> None:
        """A candidate refused after it was written (a condition decided on its program): one line each."""
        self.refusals.append(
            Refusal(
                candidate.origin, candidate.transform, candidate.function, predicate, f"{candidate.label}: {reason}"
            )
        )

    def _refuse(self, refusal: Refusal) -> None:
        key = (refusal.transform, refusal.function, refusal.predicate)  # one line per family, not per skill
        if key not in self._refused:
            self._refused.add(key)
            self.refusals.append(refusal)


@dataclass(frozen=True)
class _KnobSite:
    """Where a launch-knob candidate changes warps: enough to write its neighbour on the other side."""

    program: Program
    module: str
    transform: Transform
    source: str
    site: Site
    kernel: str
    present: int  # the warps the launch has now


@dataclass(frozen=True)
class Screening:
    """A skill's conditions decided for one program: why it is refused, or the guard it needs (if any)."""

    decided_by: tuple[str, ...]  # "predicate: verdict" for each condition decided
    refusal: tuple[str, str] | None = None  # (deciding predicate, reason)
    guard: Decision | None = None


def screen(skill: Skill, workload: Workload, source: str, kernel: str | None, device: str, target: str) -> Screening:
    """Decide a skill's conditions on the workload's domain and the program's code: the conditions probing backed or
    could not test, plus the family's properties of the target's own code; a robustness family's own predicate says
    where it is needed (never a guard: that would run the int64 kernel only where int32 would do)."""
    tid = skill.transform["id"]
    own = ROBUSTNESS.get(tid)
    predicates = [c["predicate"] for c in skill.conditions if c.get("status") in CHECKED and c["predicate"] != own]
    family = TRANSFORMS[tid].conditions if tid in TRANSFORMS else ()
    predicates += [p for p in family if p in TARGET_PROPERTIES and p not in predicates]
    decisions = [decide(p, workload, source, kernel, device, target) for p in predicates]
    decided_by = tuple(f"{d.predicate}: {d.verdict}" for d in decisions)
    violated = [d for d in decisions if d.verdict == VIOLATED]
    partial = [d for d in decisions if d.verdict == PARTIAL]
    if violated or any(not d.guardable for d in partial) or len(partial) > 1:
        d = (violated or [p for p in partial if not p.guardable] or partial)[0]
        why = (
            d.reason
            if d in violated
            else f"holds on part of the domain only ({d.reason}); "
            + ("no run-time guard exists for this predicate" if not d.guardable else "more than one guard needed")
        )
        return Screening(decided_by, (d.predicate, why))
    if own is not None:
        need = decide(own, workload, source, kernel, device, target)
        if need.verdict in (HOLDS, GATED):
            return Screening(decided_by, (own, f"a robustness skill, not needed here: {need.reason}"))
        decided_by += (f"{need.predicate}: {need.verdict} ({need.reason})",)
    return Screening(decided_by, None, partial[0] if partial else None)


def _saves_shared_memory(skill: Skill) -> bool:
    """A guard whose construct's removal failed its expert's compile gate for shared memory."""
    return any(f.get("gate") == "compile" and "shared memory" in f.get("detail", "") for f in skill.failures)


def transform_defaults(transform: Transform) -> dict:
    return transform.default_params() if hasattr(transform, "default_params") else {}


def blind_params(transform: Transform, source: str, site: Site) -> dict | None:
    """What a method without expert parameters applies: the family's defaults; for autotune, the current config
    plus every tile doubled and 8 warps."""
    if transform.id != "autotune_single_config":
        return transform_defaults(transform)
    current = {t.keyword: t.value for t in launch_config.tunables(source) if t.kernel == site.function}
    doubled = {k: v * 2 for k, v in current.items() if k not in launch_config.KNOBS}
    return autotune_params(source, site.function, [doubled, {"num_warps": 8}, {**doubled, "num_warps": 8}])


# Tie-break when the evidence does not separate candidates (unmeasured, or within the noise): changes to the work
# decomposition (tiles, warps, stages, program order) before code-level rewrites, hints last. The backward walk's
# `cost` orders the other way on purpose: it undoes the cheapest, least entangled families first. rows_per_program
# comes right after the launch configuration's own numbers: its twin runs only where a program's row tile is at
# most 256 elements wide, under-filled by construction (held-out RoPE, 64 elements a program, ended at 0.20 of the
# roofline in run 9 while the skill, measured where Liger's dispatch kept one row per program, carried no effect to
# rank it by). It waits for the launch configuration's own numbers: ranked ahead of MSE's block doublings, the
# twin was kept (x1.55) and the single final program still summed one partial per 256 elements: 0.37 of the
# roofline where blind's doublings reached 0.86 (H200, run 10).
FORWARD_RANK = {
    "launch_config": 0,
    "rows_per_program": 0.5,
    "autotune_single_config": 1,
    "launch_knobs": 1,
    "grouped_ordering": 2,
    "pipelining": 2,
    "block_cap_dispatch": 2,
    "whole_row_tile": 2,
    "divisibility_fast_path": 3,
    "wrapped_indices": 3,
    "work_skipping": 3,
    "fast_math": 3,
    "static_range": 3,
    "dot_precision": 3,
    "merged_reductions": 3,
    "constexpr_flags": 4,
    "specialization": 4,
    "scalar_dtype_pin": 4,
    "inplace_aliasing": 4,
}


def _ordered(candidates: list[Candidate]) -> list[Candidate]:
    """Best expected effect first (to 1%: closer is noise), then FORWARD_RANK, then proposal order (an expert's
    config list is in its order of preference); one candidate per proposal (the walk also skips programs it saw)."""
    seen, out = set(), []
    for c in sorted(candidates, key=lambda c: (-round(c.expected, 2), FORWARD_RANK.get(c.transform, 5))):
        if c.key not in seen:
            seen.add(c.key)
            out.append(c)
    return out


class BlindProposer(Proposer):
    """The transform catalog in its fixed order with default parameters: no conditions, no effects."""

    method = "blind"

    def __init__(self, workload, settings, device):
        super().__init__(workload, settings, device)
        self.transforms = _transforms()

    def propose(self, program: Program) -> list[Candidate]:
        out = []
        for transform in self.transforms.values():
            for module, source, site in _sites(transform, program):
                params = blind_params(transform, source, site)
                if params is not None:
                    label = f"{transform.id} at {site.function}:{site.line}"
                    out.append(
                        Candidate(
                            label,
                            "catalog",
                            transform.id,
                            module,
                            site.function,
                            params,
                            1.0,
                            "",
                            (),
                            _rewrite(program, module, transform, source, site, params),
                            site.before,
                        )
                    )
        out.extend(self.launch_candidates(program, "launch_config", 1.0))
        return _ordered(out)


class AutotuneProposer(Proposer):
    """Launch configuration only: tile sizes, warps, stages (adding the knobs where a launch has none)."""

    method = "autotune"

    def propose(self, program: Program) -> list[Candidate]:
        out = list(self.launch_candidates(program, "launch_config", 1.0))
        knobs = _transforms()["launch_knobs"]
        for module, source, site in _sites(knobs, program):
            for warps in ("2", "8", "16"):
                params = {"num_warps": warps}
                out.append(
                    Candidate(
                        f"num_warps={warps} at {site.function}",
                        "launch_config",
                        "launch_knobs",
                        module,
                        site.function,
                        params,
                        1.0,
                        "",
                        (),
                        _rewrite(program, module, knobs, source, site, params),
                        site.before,
                    )
                )
        return _ordered(out)


# --- the memory baseline's knowledge base -------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEntry:
    features: dict
    transform: str
    params: dict
    speedup: float | None  # observed; None where nothing was timed
    passed: bool
    source: str  # which run it came from


def memory_path(settings: Settings) -> Path:
    return settings.data_dir / "memory.json"


def load_memory(path: Path) -> list[MemoryEntry]:
    if not path.is_file():
        return []
    return [MemoryEntry(**e) for e in json.loads(path.read_text())]


def _remembered(program, module, transform, source, site, params) -> Program | None:
    """The remembered parameters, else the family's defaults where those do not fit this program."""
    fallback = blind_params(transform, source, site)
    new = _apply(transform, source, site, params) or (
        _apply(transform, source, site, fallback) if fallback is not None else None
    )
    return program.with_source(module, new) if new is not None else None


class MemoryProposer(Proposer):
    """Past outcomes retrieved by feature similarity: transforms that helped similar programs, with the parameters
    that helped, ranked by similarity x observed speedup. No conditions are consulted."""

    method = "memory"

    def __init__(self, workload, settings, device, memory: list[MemoryEntry]):
        super().__init__(workload, settings, device)
        self.memory = memory
        self.transforms = _transforms()

    def propose(self, program: Program) -> list[Candidate]:
        here = features(program, self.workload)
        # log-speedup plus a small bonus for a pass: a slowdown or a failure scores below zero and is not proposed
        ranked = sorted(
            (
                (
                    similarity(here, e.features) * (math.log(max(e.speedup or 1.0, 1e-3)) + (0.01 if e.passed else -1)),
                    i,
                    e,
                )
                for i, e in enumerate(self.memory)
            ),
            key=lambda t: -t[0],
        )
        out = []
        for score, i, entry in ranked:
            if score <= 0:
                continue
            expected = math.exp(score)
            if entry.transform == "launch_config":
                for module, source in program.module_sources():
                    tunables = launch_config.tunables(source)
                    names = {t.keyword: t for t in tunables}
                    values = {
                        names[k.split(".")[-1]].key: v
                        for k, v in entry.params.items()
                        if k.split(".")[-1] in names and names[k.split(".")[-1]].value != v
                    }
                    if values:
                        out.append(
                            Candidate(
                                f"remembered {launch_config.describe(values)}",
                                f"memory:{i}",
                                "launch_config",
                                module,
                                tunables[0].function,
                                values,
                                expected,
                                "",
                                (),
                                functools.partial(_retuned, program, module, source, values),
                            )
                        )
                continue
            transform = self.transforms.get(entry.transform)
            if transform is None:
                continue
            for module, source, site in _sites(transform, program):
                out.append(
                    Candidate(
                        f"remembered {transform.id} at {site.function}:{site.line}",
                        f"memory:{i}",
                        transform.id,
                        module,
                        site.function,
                        entry.params,
                        expected,
                        "",
                        (),
                        functools.partial(_remembered, program, module, transform, source, site, entry.params),
                        site.before,
                    )
                )
        return _ordered(out)
