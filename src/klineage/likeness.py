"""Likeness: how alike the kernel a skill was measured on (its expert's context) is to the kernel it is applied to.

A skill's measured effect is evidence about its expert's kernel. How far it carries to another kernel depends on how
alike the two are, so KLineage's proposer discounts the effect by the likeness (klineage.proposers.skill) and the
optimize report says where a skill crossed from one operator to another. On 17 third-party programs on the H200 most
kept changes were launch knobs copied from unrelated experts (a warp count of the cross-entropy lineage applied to a
matmul), and KLineage barely beat blind search there (geomean 1.21 against 1.16; issue 31).

A context is what is known of one side: the operator class, the roofline regime, the element type, the tile rank and
the constructs its kernels use. The source's comes from the skill's provenance (`features`, recorded by the mining
walk, and `tile_rank`, recorded since this module); a field a skill file lacks is unknown, never taken as alike.

    likeness = operator x constructs x bound x dtype x tile

each factor in (0, 1], 1 where the two sides agree:

- operator: the operator class (`operator_class`: matmul, attention, reduction, elementwise). Another class 0.25:
  its loop nest, and so the reason the expert's change paid, may not exist here.
- constructs: 0.5 + 0.5 x the cosine of the construct flags (klineage.features.FEATURES: dots, reductions,
  exponentials, masks, loops, ...); 1 for the same operator written alike, 0.5 with nothing in common.
- bound: the roofline regime of the bench case (compute or memory bound). The other one 0.5.
- dtype: the element type of the bench case. The same element size of another type (float16 and bfloat16) 0.9:
  the same bytes, registers and shared memory per tile; another element size 0.5.
- tile: the tile rank, the most tile sizes one kernel takes, by name (launch_config.TILE_NAME: BLOCK_M,
  BLOCK_SIZE, ...) or, in a kernel with none by name, by role (`launch_config.tiles_by_role`: bitsandbytes's
  SPLIT_SIZE spans `tl.arange(0, SPLIT_SIZE)`); 1 for a row kernel, 2 for a 2-D tile, 3 for a matmul's M/N/K.
  Another rank 0.5. Skills mined before the role was read recorded the rank by name alone (0 for such a kernel).

A factor whose field either side lacks is halfway between alike and unlike (operator 0.625, the others 0.75): no
evidence either way. The values are priors, not measurements: one unlike factor halves a skill's log-gain, another
operator class quarters it, and a skill whose source context is wholly unknown keeps a fifth of it (0.198).

A family whose parameters are numbers tuned to the kernel they were measured on (Transform.tuned_to_kernel: warps,
stages, tiles, a config list) needs more than a discount: its effect counts only on a like kernel (`Likeness.like`,
the same operator class, known on both sides); elsewhere it is no evidence at all."""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field

from klineage.features import FEATURES
from klineage.launch_config import TILE_NAME, tiles_by_role
from klineage.program import Program

OPERATOR_CLASSES = ("matmul", "attention", "reduction", "elementwise")
UNLIKE = {"operator": 0.25, "constructs": 0.5, "bound": 0.5, "dtype": 0.5, "tile": 0.5}
SAME_ELEMENT_SIZE = 0.9  # float16 against bfloat16: the dtype factor
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
NO_LIKE_KERNEL = "no evidence from a like kernel"


@dataclass(frozen=True)
class Context:
    """What is known of the kernel one side of a transfer ran: None (or no constructs) where it is not known."""

    operator: str | None  # one of OPERATOR_CLASSES
    bound: str | None  # "compute" | "memory"
    dtype: str | None  # "float32", "float16", "bfloat16"
    tile_rank: int | None
    constructs: dict[str, float] = field(default_factory=dict)  # klineage.features' construct flags
    name: str = ""  # the workload (the operator) it ran, where known

    def as_dict(self) -> dict:
        return {"operator": self.operator, "bound": self.bound, "dtype": self.dtype, "tile_rank": self.tile_rank}


@dataclass(frozen=True)
class Likeness:
    """How alike a source context is to a target: the product `value` of the `factors` (see the module)."""

    value: float
    factors: dict[str, float]
    source: Context
    target: Context

    @property
    def like(self) -> bool:
        """A like kernel: the same operator class, known on both sides (what a tuned_to_kernel family needs)."""
        return self.source.operator is not None and self.source.operator == self.target.operator

    @property
    def another_operator(self) -> bool:
        """Whether the skill was mined on another operator than the target's (another workload, or another class
        where a side's workload is not known)."""
        if self.source.name and self.target.name:
            return self.source.name != self.target.name
        return not self.like

    def phrase(self, who: str) -> str:
        """`from <who> (<class>) to <class>, likeness 0.42`, or `likeness 0.42` on the same operator."""
        value = f"likeness {self.value:.2f}"
        if not self.another_operator:
            return value
        source, target = self.source.operator or "unknown class", self.target.operator or "unknown class"
        return f"from {who} ({source}) to {target}, {value}"

    def as_dict(self) -> dict:
        return {
            "likeness": round(self.value, 4),
            "factors": {k: round(v, 4) for k, v in self.factors.items()},
            "source": self.source.as_dict(),
            "target": self.target.as_dict(),
            "like_kernel": self.like,
            "another_operator": self.another_operator,
        }


def operator_class(feats: dict[str, float]) -> str | None:
    """The operator class a program's construct flags name: a dot with exponentials and a reduction is attention
    (softmax between two dots), a dot alone a matmul, a reduction (or atomics, a reduction across programs) without a
    dot a reduction (norms, softmax, cross-entropy, scans), neither an elementwise kernel; None without any construct
    flag (klineage.features writes them all: a flag left out of a vector that has others is not set)."""
    if not any(k in feats for k in FEATURES):
        return None
    if feats.get("dot"):
        return "attention" if feats.get("exp") and feats.get("reduction") else "matmul"
    if feats.get("reduction") or feats.get("atomic"):
        return "reduction"
    return "elementwise"


def context_of(feats: dict[str, float] | None, tile_rank: int | None = None, name: str = "") -> Context:
    """A side's context from its features (klineage.features.features) and tile rank."""
    feats = feats or {}
    bound = None
    if "compute_bound" in feats:
        bound = "compute" if feats["compute_bound"] else "memory"
    dtype = next((d for d in DTYPES if feats.get(f"dtype_{d}")), None)
    constructs = {k: float(feats[k]) for k in FEATURES if k in feats}
    return Context(operator_class(feats), bound, dtype, tile_rank, constructs, name)


def skill_context(provenance: dict) -> Context:
    """The context a skill was measured in, from its provenance (`features`, `tile_rank`, `workload`)."""
    rank = provenance.get("tile_rank")
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else None
    return context_of(provenance.get("features"), rank, provenance.get("workload", ""))


def tile_rank(program: Program) -> int | None:
    """The most tile sizes one Triton kernel of the program takes as parameters (None: no kernel found)."""
    ranks = [_tile_rank(text) for text in (program.source, *program.modules.values())]
    found = [r for r in ranks if r is not None]
    return max(found) if found else None


@functools.lru_cache(maxsize=64)
def _tile_rank(source: str) -> int | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    ranks = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_kernel_decorator(d) for d in node.decorator_list):
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            # by role only where no parameter is a tile by name: attention's HEAD_DIM spans a tl.arange too, but
            # it is the data's dimension beside BLOCK_M and BLOCK_N, not a third tile
            tiles = {n for n in names if TILE_NAME.match(n)} or tiles_by_role(source, node.name) & set(names)
            ranks.append(len(tiles))
    return max(ranks) if ranks else None


def _is_kernel_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("jit", "autotune", "heuristics")


def likeness(source: Context, target: Context) -> Likeness:
    """How alike `source` (where a skill was measured) is to `target` (where it is applied): see the module."""
    factors = {
        "operator": _factor(source.operator, target.operator, UNLIKE["operator"]),
        "constructs": _constructs(source.constructs, target.constructs),
        "bound": _factor(source.bound, target.bound, UNLIKE["bound"]),
        "dtype": _dtype(source.dtype, target.dtype),
        "tile": _factor(source.tile_rank, target.tile_rank, UNLIKE["tile"]),
    }
    return Likeness(math.prod(factors.values()), factors, source, target)


def _unknown(unlike: float) -> float:
    """A field either side lacks: halfway between alike (1) and unlike."""
    return (1 + unlike) / 2


def _factor(a, b, unlike: float) -> float:
    if a is None or b is None:
        return _unknown(unlike)
    return 1.0 if a == b else unlike


def _dtype(a: str | None, b: str | None) -> float:
    if a is None or b is None:
        return _unknown(UNLIKE["dtype"])
    if a == b:
        return 1.0
    return SAME_ELEMENT_SIZE if DTYPES.get(a) == DTYPES.get(b) else UNLIKE["dtype"]


def _constructs(a: dict[str, float], b: dict[str, float]) -> float:
    if not a or not b:
        return _unknown(UNLIKE["constructs"])
    if a == b:
        return 1.0  # the same flags, none set included (a kernel of plain loads and stores)
    keys = set(a) | set(b)
    dot = sum(a.get(k, 0.0) * b.get(k, 0.0) for k in keys)
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    cosine = dot / (na * nb) if na and nb else 0.0
    return UNLIKE["constructs"] + (1 - UNLIKE["constructs"]) * cosine
