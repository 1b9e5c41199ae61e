"""Transforms: reversible rewrites of one optimization family, on program source, with libcst.

A transform knows the expert form of its family and the simple form. `sites` lists where the expert form is present
(where the backward walk may simplify); `simplify` undoes it at one site and records the parameters the expert used
(`Site.params`); `optimize_sites` lists where the simple form is present; `optimize` redoes it there with given
parameters. Round trip: optimize(simplify(p, s), matching site, s.params) == p, normalized.

Most families rewrite one kind of node. `NodeTransform` does the bookkeeping for those: subclasses say which node
type they look at and give four small functions (match/rewrite in each direction). Sites are numbered in source
order, so a walk over them is deterministic. Families live in `klineage.transforms.<family>`, one module each,
registered with `@register`.

The forward walk asks a family what is particular to it through `Transform`'s hooks (its rank, whether its numbers
need a timer, how its parameters carry to another program, when a site refuses it, what it writes beyond its
rewrite); each family overrides them in its own module. Also here: the libcst helpers the families and the
launch-configuration search share (recognizing kernels and launches, literal bindings)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.carry import adapt, numeric_neighbours, visible_code

TRANSFORMS: dict[str, type[Transform]] = {}


def register(cls: type[Transform]) -> type[Transform]:
    """Class decorator: add a transform to the registry under its `id` (ids are unique)."""
    if cls.id in TRANSFORMS:
        raise ValueError(f"transform {cls.id!r} registered twice")
    TRANSFORMS[cls.id] = cls
    return cls


@dataclass(frozen=True)
class Site:
    """One place a transform applies: enclosing function, ordinal among that transform's sites in the source,
    line, the code before and after the rewrite, and the parameters read off the code."""

    transform: str
    function: str
    index: int
    line: int
    before: str
    after: str
    params: dict = field(default_factory=dict, hash=False, compare=False)


class Transform:
    """Base class. Subclasses set the class attributes and implement the four methods.

    The forward walk (klineage.proposers, klineage.optimize, klineage.probe) asks a family what is particular to it
    through the hooks below: class attributes and methods whose defaults are those of a family with nothing
    particular to say, overridden in the family's own module. No proposer names a family."""

    id: ClassVar[str]
    family: ClassVar[int]  # number in optimization-catalog.md
    tag: ClassVar[str]  # "M" (mechanical both ways) or "S" (needs a predicate or a host change to redo)
    cost: ClassVar[int]  # the walk undoes cheaper families first: hints 1, launch knobs 2, specialization 3, ...
    conditions: ClassVar[tuple[str, ...]]  # condition vocabulary worth probing (see CONDITIONS)
    intent: ClassVar[str]  # one line: what the optimization buys
    # parameters that name one of the family's own choices (a form, an operand order), not code of the expert's:
    # carried to another program as they are, never checked against its names (klineage.carry.adapt)
    label_params: ClassVar[tuple[str, ...]] = ()

    # --- forward hooks: attributes ---
    # Tie-break when the evidence does not separate candidates (unmeasured, or within the noise): changes to the
    # work decomposition (tiles, warps, stages, program order) before code-level rewrites, hints last; the launch
    # configuration's own numbers rank 0 (klineage.proposers). The backward walk's `cost` orders the other way on
    # purpose: it undoes the cheapest, least entangled families first.
    forward_rank: ClassVar[float] = 5
    # What part of a launch configuration the family's parameters are (WHOLE_CONFIGS or WARPS_AND_STAGES), None for
    # code. Tiles, warps and stages cost registers and shared memory in proportion to the element size, so such
    # evidence holds only for kernels of the same element size (the bf16 matmul expert's 128x256x64 tile, expected
    # x4.7, ran at x0.054 on an fp32 batched matmul; H200, RESULTS.md#run-5).
    launch_configuration: ClassVar[str | None] = None
    # Families whose expert form buys robustness, not speed (int64 offsets past 2^31, fp32 math in half-precision
    # kernels): the predicate that says where the domain needs it. Applied where it fails on part of the domain,
    # never for speed, and never behind a guard (that would run the robust kernel only where the plain one would do).
    robustness_predicate: ClassVar[str | None] = None
    # Whether it chooses numbers (tiles, warps, stages, a config list): whether the expert's numbers suit another
    # kernel is a question for a timer, so without a GPU its candidates are not kept, even from a skill.
    needs_timing: ClassVar[bool] = False
    # Whether its parameters are numbers tuned to the kernel they were measured on (warps, stages, tiles, a config
    # list, a loop's pipeline depth): its measured effect is then evidence only on a like kernel, of the same
    # operator class (klineage.likeness), and elsewhere its candidates rank as uninformed, as blind's catalog does.
    # On 17 third-party programs on the H200 most kept changes were launch knobs copied from unrelated experts (a
    # warp count of the cross-entropy lineage on a matmul; issue 31).
    tuned_to_kernel: ClassVar[bool] = False
    # The suffix of the twin kernel the family writes beside the original (`k` + suffix), dispatched to where it
    # fits: the original then runs only where the twin cannot, and a change to it, or to its launch, leaves the
    # timed case as it was (klineage.proposers spends no evaluation there).
    twin_suffix: ClassVar[str] = ""
    # Whether the family writes num_warps / num_stages onto a launch that passes none: its candidates change a
    # launch's warps (measured, ordered, and stepped the other way by the skill proposer), and the launch knobs an
    # expert's tile or the autotune baseline needs are written through it.
    sets_launch_knobs: ClassVar[bool] = False
    # Why the Triton interpreter cannot tell the expert form from the simple form ("" where it can): on the CPU
    # parent and child then compute identically, so a probe there would pass both vacuously (klineage.probe).
    interpreter_blind: ClassVar[str] = ""

    def sites(self, source: str) -> list[Site]:
        raise NotImplementedError

    def simplify(self, source: str, site: Site) -> str:
        raise NotImplementedError

    def optimize_sites(self, source: str) -> list[Site]:
        raise NotImplementedError

    def optimize(self, source: str, site: Site, params: dict) -> str:
        raise NotImplementedError

    def default_params(self) -> dict:
        """Parameters used where no expert's are at hand (a preview, the blind catalog, a name that did not carry)."""
        return {}

    # --- forward hooks: methods ---

    def carry(self, expert: dict, source: str, site: Site) -> dict | None:
        """An expert's parameters for this site: the expert's code where this program can evaluate it, else the
        family's defaults (klineage.carry.adapt); None where they cannot be carried at all."""
        return adapt(expert, visible_code(source, site.function), self.default_params(), self.label_params)

    def blind_params(self, source: str, site: Site) -> dict | None:
        """What a method without an expert's parameters applies here: the family's defaults."""
        return self.default_params()

    def variants(self, carried: dict, source: str, kernel: str | None, launches: list[dict] | None) -> list[dict]:
        """The parameter sets to try at a site of `kernel` (None: the site is in no kernel), the carried ones first:
        a small neighbourhood, each integer literal doubled or halved. `launches`: what the program's launches asked
        for on the bench case, where a check saw them (klineage.optimize.bench_launches)."""
        return numeric_neighbours(carried or self.default_params())[:3]

    def variant_expected(self, expected: float, params: dict, carried: dict, source: str, kernel: str | None) -> float:
        """What a variant is expected to bring, given the skill's `expected` for the carried parameters: the skill's
        own for them, a neighbour's discounted (the square root)."""
        return expected if params == carried else expected**0.5

    def misfit(self, expert: dict, source: str, site: Site, kernel: str | None) -> tuple[str, str] | None:
        """Why the expert's rewrite would be wrong at this site whatever the domain holds, as (the predicate it
        would break, the reason); None where nothing here speaks against it. Decided before the conditions."""
        return None

    def untimed(self, source: str, site: Site, launches: list[dict] | None) -> str:
        """Why the bench case would not run the rewritten code ("" where it would, or where it is not known):
        decided after the conditions, from what the program's launches asked for (`launches`)."""
        return ""

    def host_side(self, before: str, after: str, site: Site) -> str:
        """`after` (what `optimize` wrote from `before`) with what the forward direction needs beyond the round trip
        on another program's host code; as it is by default."""
        return after

    # the factor of a ladder's first rung (see `ladders`); the first rung slower, the other way once
    ladder_first = 0.5

    def ladders(self, source: str) -> dict[str, tuple[str, str]]:
        """Kernels whose twin this family launches with a launch value it computes from the tile (whole_row_tile's
        warps by tile width, looped_tile's swept values a thread), each with (the twin, the name of that value): the
        launch-configuration search has no literal to change there, so a kept candidate is followed by the value
        scaled one rung by `ladder_first`, then on the same way while that is kept."""
        return {}

    def scaled_ladder(self, source: str, kernel: str, factor: float) -> str | None:
        """`source` with `kernel`'s ladder (see `ladders`) scaled by `factor`; None where nothing moves."""
        return None


# What part of a launch configuration a family's parameters are (Transform.launch_configuration)
WHOLE_CONFIGS = "whole configurations"  # tiles with the warps and stages they were measured with (a config list)
WARPS_AND_STAGES = "warps and stages"  # at a launch, apart from any tile


CONDITIONS = {
    "divisible_by_block": "every size the kernel tiles is a multiple of its block",
    "offsets_below_2_31": "the largest element offset fits in int32",
    "contiguous": "inputs are contiguous (unit stride in the last dimension)",
    "aligned_16": "base pointers and strides are 16-byte aligned",
    "dtype_fp32": "inputs are float32",
    "dtype_fp16": "inputs are float16",
    "dtype_bf16": "inputs are bfloat16",
    "fully_masked_rows": "some rows or tiles are entirely masked",
    "arch_sm90": "the device is sm_90 or newer",
    "tolerance": "the approximation error fits the workload's tolerance",
    "no_aliasing": "no output aliases an input",
    "idempotent_launch": "launching twice on the same buffers gives the same result",
    "torch_compile_launch": "the kernel is also launched from inside torch.compile",
    "shared_memory_fits": "stages x tile bytes fit in shared memory",
    "loop_index_not_constexpr": "the loop index is never used where a compile-time constant is required",
    "flag_not_shape": "the flag never decides a tensor's shape or dtype (a runtime branch can hold both sides)",
    "cross_program_handoff": "no program reads what another program of the same launch wrote (no stream-K handoff)",
}


def node_code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def dotted(node: cst.BaseExpression) -> str:
    """`tl.load` for Attribute(Name(tl), load); "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


# Decorators that make a function a Triton kernel (bare names cover `from triton import jit`).
KERNEL_DECORATORS = frozenset({"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics"})


def decorator_name(decorator: cst.Decorator) -> str:
    expr = decorator.decorator
    return dotted(expr.func if isinstance(expr, cst.Call) else expr)


def is_kernel(fn: cst.FunctionDef) -> bool:
    return any(decorator_name(d) in KERNEL_DECORATORS for d in fn.decorators)


def is_jit(fn: cst.FunctionDef) -> bool:
    """Whether `@triton.jit` (or `@jit`, called or not) decorates `fn`, under any other decorators."""
    return any(decorator_name(d) in ("triton.jit", "jit") for d in fn.decorators)


def constexpr_params(fn: cst.FunctionDef) -> set[str]:
    """Parameters annotated as compile-time constants (`BLOCK: tl.constexpr`), read off the annotation's text."""
    return {
        p.name.value
        for p in fn.params.params
        if p.annotation is not None and "constexpr" in node_code(p.annotation.annotation)
    }


def is_autotuned(fn: cst.FunctionDef) -> bool:
    """Triton's autotuner, or a library's own that takes `configs=` as it does (FlagGems's `@libtuner(configs=...,
    key=...)` on 24 of its ops): its configs set the launch's knobs, and a launch passing one again raises
    "got multiple values for keyword argument 'num_warps'" (every launch_knobs candidate on FlagGems's max_dim, amax
    and min_dim failed so on the H100, RESULTS.md#wild-h100)."""
    return any(decorator_name(d) in ("triton.autotune", "autotune") or _takes_configs(d) for d in fn.decorators)


def _takes_configs(decorator: cst.Decorator) -> bool:
    call = decorator.decorator
    return isinstance(call, cst.Call) and any(a.keyword is not None and a.keyword.value == "configs" for a in call.args)


def kernel_names(module: cst.Module) -> set[str]:
    """Module-level Triton kernels. Launches of kernels imported from elsewhere are not recognized: their
    decorators (autotune, defaults) are not visible here."""
    return {s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and is_kernel(s)}


def launched_kernel(call: cst.Call, kernels: set[str]) -> str | None:
    """`kernel[grid](...)` -> "kernel" when `kernel` is one of `kernels`."""
    if isinstance(call.func, cst.Subscript):
        name = dotted(call.func.value)
        if name in kernels:
            return name
    return None


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def without_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    args = [a for a in call.args if a.keyword is None or a.keyword.value not in names]
    if args:  # the new last argument loses a trailing comma left from a deleted one
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def with_kwargs(call: cst.Call, values: dict[str, str]) -> cst.Call:
    """Append keyword arguments given as source text."""
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    for i, (name, code) in enumerate(values.items()):
        comma = (
            cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(values) - 1 else cst.MaybeSentinel.DEFAULT
        )
        equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        args.append(cst.Arg(value=cst.parse_expression(code), keyword=cst.Name(name), equal=equal, comma=comma))
    return call.with_changes(args=args)


def literal_bindings(function: cst.FunctionDef) -> dict[str, int]:
    """Names the function binds exactly once, at its top level, to an integer literal: `A = 32`, a chain
    `A = B = 32`, or element-wise `A, B = 512, 128`. A name bound anywhere else too (an augmented assignment
    `A *= 2`, a loop target, a second assignment in a nested block) is not one: its value at a later launch need not
    be the literal. For the binding one launch reads, see `Bindings.reaching`."""
    bindings = Bindings(function)
    out = {}
    for b in bindings.found:
        if b.value is not None and len(b.blocks) == 1 and bindings.count(b.name) == 1:
            out[b.name] = b.value
    return out


@dataclass(frozen=True)
class Binding:
    """One binding of a name in a function: the integer literal a plain assignment binds (`A = 32`, a chain, an
    element of a tuple of literals), None for any other binding (a computed value, an augmented or annotated
    assignment, a loop or `with` target); the statement, or the loop, that binds it; its place in source order; the
    ids of the blocks and loops around it, outermost first."""

    name: str
    value: int | None
    statement: cst.CSTNode
    order: float
    blocks: tuple[int, ...]
    loops: tuple[int, ...]


class Bindings(cst.CSTVisitor):
    """Every statement and every binding of a name in one function, in source order, not inside the functions,
    classes and lambdas it defines: which binding a launch reads (`reaching`). FlagGems's radix sort binds
    `TILE_N = 1024` for its histogram kernel and, in a nested block below, `TILE_N = 2048` for its sweep kernel; the
    launch-configuration search had read both launches' TILE_N as 1024 and rewritten both bindings together."""

    def __init__(self, function: cst.FunctionDef):
        self.root = function
        self._blocks: list[int] = []
        self._loops: list[int] = []
        self.statements: dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        self.found: list[Binding] = []
        function.visit(self)

    def count(self, name: str) -> int:
        return sum(b.name == name for b in self.found)

    def numbered(self, name: str, binding: int) -> Binding | None:
        """The binding `reaching` numbers `binding` for `name` (0: the name's only binding), or None."""
        named = [b for b in self.found if b.name == name]
        if binding:
            return named[binding - 1] if binding <= len(named) else None
        return named[0] if len(named) == 1 else None

    def reaching(self, statement: cst.CSTNode, name: str) -> tuple[int, int] | None:
        """(the literal, which binding of the name it is: 1, 2, ... in source order, 0 where the function binds
        the name once) a launch in `statement` reads for `name`; None unless one literal binding reaches it on every
        path: the last binding before the statement, in a block around it, and no other binding of the name in a
        loop around it."""
        where = self.statements.get(id(statement))
        named = [b for b in self.found if b.name == name]
        before = [b for b in named if where is not None and b.order < where[0]]
        if not before or before[-1].value is None:
            return None
        last, (_, blocks, loops) = before[-1], where
        if last.blocks != blocks[: len(last.blocks)]:
            return None  # in a branch or a block the launch is not inside
        if any(b is not last and set(b.loops) & set(loops) for b in named):
            return None  # bound again in a loop around the launch: a later pass reads another value
        return last.value, 0 if len(named) == 1 else named.index(last) + 1

    def _bind(self, name: str, value: int | None, node: cst.CSTNode, order: float) -> None:
        self.found.append(Binding(name, value, node, order, tuple(self._blocks), tuple(self._loops)))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(id(node))

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(id(node))
        for name in _target_names(node.target):
            self._bind(name, None, node, len(self.statements) - 0.5)

    def leave_For(self, node: cst.For) -> None:
        self._loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self._loops.append(id(node))

    def leave_While(self, node: cst.While) -> None:
        self._loops.pop()

    def visit_WithItem(self, node: cst.WithItem) -> None:
        for name in _target_names(node.asname.name) if node.asname is not None else []:
            self._bind(name, None, node, len(self.statements) - 0.5)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        for name in _target_names(node.target):
            self._bind(name, None, node, len(self.statements) - 0.5)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        order = len(self.statements)
        self.statements[id(node)] = (order, tuple(self._blocks), tuple(self._loops))
        for small in node.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    pairs = _literal_pairs(target.target, small.value)
                    named = {n for n, _ in pairs}
                    pairs += [(n, None) for n in _target_names(target.target) if n not in named]
                    for name, value in pairs:
                        self._bind(name, value, node, order)
            elif isinstance(small, cst.AnnAssign | cst.AugAssign):
                for name in _target_names(small.target):
                    self._bind(name, None, node, order)


def _target_names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment target binds (`a`, `a, (b, c)`, `*rest`); not attributes or subscripts."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Tuple | cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def int_literal(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (`32`, `0x20`); None for anything else."""
    return int(node.value, 0) if isinstance(node, cst.Integer) else None


def _literal_pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[str, int | None]]:
    """(name, integer literal or None) pairs an assignment binds: `A = 32`, and `A, B = 512, 128` element-wise."""
    if isinstance(target, cst.Name):
        return [(target.value, int_literal(value))]
    if isinstance(target, cst.Tuple):
        names = [e.value for e in target.elements]
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [None] * len(names)
        if len(values) != len(names):
            values = [None] * len(names)
        return [(n.value, int_literal(v)) for n, v in zip(names, values) if isinstance(n, cst.Name)]
    return []


def broadcasts(code: str) -> bool:
    """Whether kernel code indexes with `[:, None]` / `[None, :]`: a 2-D kernel, whose lanes span rows and columns."""
    return re.search(r"\[\s*None\s*,|,\s*None\s*\]", code) is not None


Match = Callable[[cst.CSTNode], dict | None]
Rewrite = Callable[[cst.CSTNode, dict], cst.CSTNode]


class NodeRewriter(cst.CSTTransformer):
    """Numbers the nodes of one type that `match` accepts, in post-order, and rewrites the one at `target`
    (or, with target None, only collects them)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, node_type: type, match: Match, rewrite: Rewrite | None, target: int | None, transform: str):
        super().__init__()
        self.node_type, self.match, self.rewrite, self.target, self.transform = (
            node_type,
            match,
            rewrite,
            target,
            transform,
        )
        self.functions: list[str] = []
        self.found: list[Site] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node.name.value)

    def leave_FunctionDef(self, original_node, updated_node):
        self.functions.pop()
        return updated_node

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        if not isinstance(original_node, self.node_type):
            return updated
        params = self.match(original_node)
        if params is None:
            return updated
        index = len(self.found)
        after = self.rewrite(updated, params) if self.rewrite is not None else updated
        line = self.get_metadata(PositionProvider, original_node).start.line
        function = self.functions[-1] if self.functions else "<module>"
        self.found.append(
            Site(self.transform, function, index, line, node_code(original_node), node_code(after), params)
        )
        return after if index == self.target else updated


# programs parsed once with their metadata, for every family that searches them (`wrapped`)
PARSES_KEPT = 8


@functools.lru_cache(maxsize=PARSES_KEPT)
def wrapped(source: str) -> MetadataWrapper:
    """`source` parsed once, in a wrapper that resolves each kind of metadata (positions, parents) once: every
    family a proposal round asks for its sites searches the same program, and each parsed and resolved it again.
    Since KLineage also lists the catalog's families (1cc0a20), a test of ten proposals on small fixtures took
    28.0 s on this 2-core machine, most of it in 151 parses and resolves of a few programs (`cProfile`); with the
    parse and the anchored families' `Module` shared, 10.1 s (tests/optimize/test_optimize.py::
    test_a_tile_computed_at_launch_caps_carried_warps_by_the_size_the_bench_case_launched).
    libcst trees are immutable (a rewrite makes a new tree), so sharing one is safe; the wrapper's defensive deep
    copy is skipped, as nothing else holds the tree. A program that does not parse raises each time."""
    return MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)


def _run(source: str, node_type, match: Match, rewrite: Rewrite | None, target: int | None, transform: str):
    wrapper = wrapped(source)
    rewriter = NodeRewriter(node_type, match, rewrite, target, transform)
    module = wrapper.visit(rewriter)
    return module.code, rewriter.found


class NodeTransform(Transform):
    """A transform that rewrites single nodes of `node_type`. Subclasses implement:
    `expert(node) -> params | None` (the optimized form is here; params are what the expert chose),
    `simple(node, params) -> node` (its simplified replacement),
    `plain(node) -> context | None` (the simple form is here, so the optimization could be applied),
    `optimized(node, params) -> node` (apply it with `params`)."""

    node_type: ClassVar[type] = cst.Call

    def expert(self, node) -> dict | None:
        raise NotImplementedError

    def simple(self, node, params: dict):
        raise NotImplementedError

    def plain(self, node) -> dict | None:
        raise NotImplementedError

    def optimized(self, node, params: dict):
        raise NotImplementedError

    def sites(self, source: str) -> list[Site]:
        return _run(source, self.node_type, self.expert, self.simple, None, self.id)[1]

    def simplify(self, source: str, site: Site) -> str:
        return _run(source, self.node_type, self.expert, self.simple, site.index, self.id)[0]

    def optimize_sites(self, source: str) -> list[Site]:
        return _run(source, self.node_type, self.plain, self._optimized_default, None, self.id)[1]

    def optimize(self, source: str, site: Site, params: dict) -> str:
        return _run(
            source, self.node_type, self.plain, lambda n, ctx: self.optimized(n, {**ctx, **params}), site.index, self.id
        )[0]

    def _optimized_default(self, node, context: dict):
        try:  # a preview for the site's `after`; without parameters some families cannot show one
            return self.optimized(node, {**self.default_params(), **context})
        except (KeyError, ValueError):
            return node


def matching_optimize_site(transform: Transform, simplified_source: str, site: Site) -> Site | None:
    """In the simplified program, the optimize site that `site` became: same function, and its code is what the
    simplification wrote."""
    for candidate in transform.optimize_sites(simplified_source):
        if candidate.function == site.function and candidate.before == site.after:
            return candidate
    return None


def load_families() -> dict[str, type[Transform]]:
    """Import every family module (each registers itself) and return the registry."""
    _import_families()
    return TRANSFORMS


@functools.cache  # the forward walk asks per candidate (`family`): the modules are imported once
def _import_families() -> None:
    import importlib
    import pkgutil

    import klineage.transforms as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"klineage.transforms.{info.name}")


def family(transform_id: str) -> type[Transform] | None:
    """The registered family of that id (every family module imported first), or None: the forward walk names
    candidates by transform id, and asks the family's hooks through this."""
    return load_families().get(transform_id)
