"""Transforms: reversible rewrites of one optimization family, on program source, with libcst.

A transform knows the expert form of its family and the simple form. `sites` lists where the expert form is present
(where the backward walk may simplify); `simplify` undoes it at one site and records the parameters the expert used
(`Site.params`); `optimize_sites` lists where the simple form is present; `optimize` redoes it there with given
parameters. Round trip: optimize(simplify(p, s), matching site, s.params) == p, normalized.

Most families rewrite one kind of node. `NodeTransform` does the bookkeeping for those: subclasses say which node
type they look at and give four small functions (match/rewrite in each direction). Sites are numbered in source
order, so a walk over them is deterministic. Families live in `klineage.transforms.<family>`, one module each,
registered with `@register`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

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
    """Base class. Subclasses set the class attributes and implement the four methods."""

    id: ClassVar[str]
    family: ClassVar[int]  # number in optimization-catalog.md
    tag: ClassVar[str]  # "M" (mechanical both ways) or "S" (needs a predicate or a host change to redo)
    cost: ClassVar[int]  # the walk undoes cheaper families first: hints 1, launch knobs 2, specialization 3, ...
    conditions: ClassVar[tuple[str, ...]]  # condition vocabulary worth probing (see CONDITIONS)
    intent: ClassVar[str]  # one line: what the optimization buys
    # parameters that name one of the family's own choices (a form, an operand order), not code of the expert's:
    # carried to another program as they are, never checked against its names (proposers.adapt)
    label_params: ClassVar[tuple[str, ...]] = ()

    def sites(self, source: str) -> list[Site]:
        raise NotImplementedError

    def simplify(self, source: str, site: Site) -> str:
        raise NotImplementedError

    def optimize_sites(self, source: str) -> list[Site]:
        raise NotImplementedError

    def optimize(self, source: str, site: Site, params: dict) -> str:
        raise NotImplementedError


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
    """Names the function binds exactly once at its top level, to an integer literal: `A = 32`, a chain
    `A = B = 32`, or element-wise `A, B = 512, 128`. A name an augmented assignment (`A *= 2`) also binds is not
    one (its value at a later launch is not the literal), nor an annotated one (launch_config rewrites plain
    assignments only)."""
    counts: dict[str, int] = {}
    values: dict[str, int] = {}
    for stmt in function.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                pairs = [p for target in small.targets for p in _literal_pairs(target.target, small.value)]
            elif isinstance(small, cst.AnnAssign | cst.AugAssign) and isinstance(small.target, cst.Name):
                pairs = [(small.target.value, None)]
            else:
                continue
            for name, value in pairs:
                counts[name] = counts.get(name, 0) + 1
                if value is not None:
                    values[name] = value
    return {k: v for k, v in values.items() if counts[k] == 1}


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


class _Rewriter(cst.CSTTransformer):
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


def _run(source: str, node_type, match: Match, rewrite: Rewrite | None, target: int | None, transform: str):
    wrapper = MetadataWrapper(cst.parse_module(source))
    rewriter = _Rewriter(node_type, match, rewrite, target, transform)
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

    def default_params(self) -> dict:
        """Parameters used to preview an optimize site when no expert's are at hand."""
        return {}


def matching_optimize_site(transform: Transform, simplified_source: str, site: Site) -> Site | None:
    """In the simplified program, the optimize site that `site` became: same function, and its code is what the
    simplification wrote."""
    for candidate in transform.optimize_sites(simplified_source):
        if candidate.function == site.function and candidate.before == site.after:
            return candidate
    return None


def load_families() -> dict[str, type[Transform]]:
    """Import every family module (each registers itself) and return the registry."""
    import importlib
    import pkgutil

    import klineage.transforms as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"klineage.transforms.{info.name}")
    return TRANSFORMS
