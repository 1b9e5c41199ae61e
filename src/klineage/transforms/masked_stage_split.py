"""Family 5: a loop over blocks split into a mask-free stage (the blocks every mask keeps whole) and a masked stage.

The attention expert sweeps the key blocks left of its query block's diagonal in a first loop with no mask of any
kind, and only the diagonal block (and a partial last block) in a second loop with the bounds and causal masks.
The naive attention masks every block. Measured on an NVIDIA H200 (torch 2.11, Triton 3.6.0): the naive attention
with the causal cut and half-precision P @ V at 128x128 tiles ran at 2.169 ms masking every block and at 1.728 ms
with the split written by hand (x1.255; `python benchmarks/attention_gap.py`, RESULTS.md#attention-gap).

The masks this family understands are comparisons of the block's indices, `cols = start + tl.arange(0, BLOCK)`:
`cols < bound` keeps a whole block while `start + BLOCK <= bound`, and `cols <= rows` with `rows = first +
tl.arange(0, ROWS)` keeps it whole while `start + BLOCK <= first + 1`. The split point is the largest multiple of
BLOCK that satisfies every mask (a mask under `if FLAG:` only when FLAG holds), so it needs no divisibility."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import libcst as cst

from klineage.transform import Site, Transform, constexpr_params, dotted, node_code, register
from klineage.transforms._anchored import Module, bound_in, bound_once, fresh_name, nodes_under
from klineage.transforms._kernel_exprs import LOOP_RANGES, NOT_VALUES, strip_parens

MEMORY = ("tl.load", "tl.store")


def _range_parts(loop: cst.For) -> tuple[cst.Call, list[cst.Arg]] | None:
    """The loop's `range(lo, hi, step, ...)` call and its three positional arguments; None for any other loop."""
    it = loop.iter
    if not isinstance(it, cst.Call) or dotted(it.func) not in LOOP_RANGES or not isinstance(loop.target, cst.Name):
        return None
    positional = [a for a in it.args if a.keyword is None and not a.star]
    if len(positional) != 3 or any(a.star for a in it.args) or positional != list(it.args[:3]):
        return None
    return it, positional


def _with_bounds(loop: cst.For, lo: cst.BaseExpression | None, hi: cst.BaseExpression | None) -> cst.For:
    it, positional = _range_parts(loop)
    args = list(it.args)
    if lo is not None:
        args[0] = args[0].with_changes(value=lo)
    if hi is not None:
        args[1] = args[1].with_changes(value=hi)
    return loop.with_changes(iter=it.with_changes(args=args))


def _masked(body: cst.CSTNode) -> bool:
    """Whether a loop body masks anything: a `tl.where`, or a load or store with `mask=`."""
    for call in nodes_under(body, cst.Call):
        name = dotted(call.func)
        if name == "tl.where" or (name in MEMORY and any(a.keyword and a.keyword.value == "mask" for a in call.args)):
            return True
    return False  # (a tensor descriptor's load takes no mask)


# -- the expert form: two consecutive loops, the first ending where the second starts ----------------------------


@dataclass(frozen=True)
class _Pair:
    block: cst.IndentedBlock
    first: int  # index of the mask-free loop in block.body
    second: int  # index of the masked loop; the statements between read nothing the first loop writes


def _reads(node: cst.CSTNode) -> set[str]:
    return {n.value for n in nodes_under(node, cst.Name)}


def _pairs(module: Module) -> list[tuple[cst.FunctionDef, _Pair]]:
    found = []
    for fn in module.kernels().values():
        for block in nodes_under(fn.body, cst.IndentedBlock):
            body = block.body
            for i, a in enumerate(body):
                pa = _range_parts(a) if isinstance(a, cst.For) and not a.orelse else None
                if pa is None or _masked(a.body):
                    continue
                written = bound_in(a.body)
                for j in range(i + 1, len(body)):
                    b = body[j]
                    pb = _range_parts(b) if isinstance(b, cst.For) and not b.orelse else None
                    if pb is not None:
                        (_, (_, hi_a, step_a)), (_, (lo_b, _, step_b)) = pa, pb
                        same = a.target.value == b.target.value and node_code(hi_a.value) == node_code(lo_b.value)
                        if same and node_code(step_a.value) == node_code(step_b.value) and _masked(b.body):
                            found.append((fn, _Pair(block, i, j)))
                        break
                    if _reads(b) & written:
                        break
    return found


# -- the plain form: one masked loop whose masks are comparisons of the block's indices --------------------------


def _arange_of(node: cst.BaseExpression, aranges: dict[str, str]) -> str | None:
    """The width of `tl.arange(0, W)` (or of a name bound once to one), as code; None otherwise."""
    if isinstance(node, cst.Name):
        return aranges.get(node.value)
    if isinstance(node, cst.Call) and dotted(node.func) == "tl.arange" and len(node.args) == 2:
        if node_code(node.args[0].value) == "0" and all(a.keyword is None for a in node.args):
            return node_code(node.args[1].value)
    return None


def _offsets(node: cst.BaseExpression, aranges: dict[str, str]) -> tuple[str, str] | None:
    """(first, width) of `first + tl.arange(0, width)` in either order; None otherwise."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) and not node.lpar:
        for first, rest in ((node.left, node.right), (node.right, node.left)):
            width = _arange_of(rest, aranges)
            if width is not None:
                return node_code(first), width
    return None


def _index(node: cst.BaseExpression) -> cst.BaseExpression:
    """`x[None, :]` or `x[:, None]` (a broadcast of a vector) as `x`; anything else as it is."""
    if isinstance(node, cst.Subscript) and not node.lpar:
        return node.value
    return strip_parens(node)


@dataclass(frozen=True)
class _Limit:
    """How far the mask-free stage may go for one mask: `bound // STEP * STEP`, under `flag` where given."""

    bound: str
    flag: str | None


class _Masks:
    """The masks of one loop body: comparisons of the block's indices (and names built from them by `&` and
    broadcasting), with the limit each puts on the mask-free stage. `ok` is False at the first mask it cannot
    read (a comparison of something else, a mask built another way): no site then."""

    def __init__(self, fn: cst.FunctionDef, loop: cst.For, step: str):
        self.var = loop.target.value
        self.step = step
        once = bound_once(fn)
        self.aranges = {n: w for n, v in once.items() if (w := _arange_of(v, {})) is not None}
        self.rows = {n: o for n, v in once.items() if (o := _offsets(v, self.aranges)) is not None}
        self.cols: set[str] = set()
        self.names: set[str] = set()
        self.limits: list[_Limit] = []
        self.ok = True
        self._read(loop.body, None, constexpr_params(fn))

    def is_cols(self, node: cst.BaseExpression) -> bool:
        node = _index(node)
        if isinstance(node, cst.Name):
            return node.value in self.cols
        found = _offsets(node, self.aranges)
        return found is not None and found[0] == self.var and found[1] == self.step

    def limit(self, node: cst.BaseExpression, flag: str | None) -> bool:
        """Record the limit of one comparison of the block's indices; False if it is not one."""
        node = strip_parens(node)
        if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and self.is_cols(node.left)):
            return False
        op, right = node.comparisons[0].operator, _index(node.comparisons[0].comparator)
        if isinstance(op, cst.LessThan):
            self.limits.append(_Limit(node_code(right), flag))  # cols < bound
            return True
        if isinstance(op, cst.LessThanEqual):
            rows = self.rows.get(right.value) if isinstance(right, cst.Name) else _offsets(right, self.aranges)
            if rows is not None:
                self.limits.append(_Limit(rows[0], flag))  # cols <= first + arange: whole while start + STEP <= first
                return True
        return False

    def is_mask(self, node: cst.BaseExpression, flag: str | None) -> bool:
        node = strip_parens(node)
        if isinstance(node, cst.Subscript):
            node = node.value
        if isinstance(node, cst.Name):
            return node.value in self.names
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitAnd):
            return self.is_mask(node.left, flag) and self.is_mask(node.right, flag)
        return self.limit(node, flag)

    def _read(self, body: cst.CSTNode, flag: str | None, constexpr: set[str]) -> None:
        for stmt in body.body:
            if isinstance(stmt, cst.If) and isinstance(stmt.test, cst.Name) and stmt.test.value in constexpr:
                if stmt.orelse is not None or flag is not None:
                    self.ok = False
                    return
                self._read(stmt.body, stmt.test.value, constexpr)
                continue
            if isinstance(stmt, cst.BaseCompoundStatement):
                self.ok = False  # a nested loop or a runtime branch: not read
                return
            for small in stmt.body:
                self._statement(small, flag)

    def _statement(self, small: cst.BaseSmallStatement, flag: str | None) -> None:
        rebound = bound_in(small) & (self.cols | {self.var})
        if rebound and not (isinstance(small, cst.Assign) and _hint_of(small.value, self.var)):
            self.ok = False  # the block's indices rebound (other than to themselves, or with a hint): not read
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            name, value = small.targets[0].target.value, small.value
            if self.is_cols(value):
                self.cols.add(name)
                return
            if name in self.names or self._mask_value(value):
                if not self.is_mask(value, flag):
                    self.ok = False
                    return
                self.names.add(name)
                return
        for call in nodes_under(small, cst.Call):
            name = dotted(call.func)
            if name in MEMORY:
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value == "mask" and not self.is_mask(arg.value, flag):
                        self.ok = False
            elif name == "tl.where" and call.args and not self.is_mask(call.args[0].value, flag):
                self.ok = False
        for comparison in nodes_under(small, cst.Comparison):
            names = {n.value for n in nodes_under(comparison, cst.Name)}
            if names & (self.cols | {self.var}) and not self._inside_mask_use(small, comparison):
                self.ok = False  # the block's indices compared outside a mask: a value, not a mask

    def _mask_value(self, value: cst.BaseExpression) -> bool:
        names = {n.value for n in nodes_under(value, cst.Name)} - NOT_VALUES
        return bool(names & (self.cols | self.names)) and not nodes_under(value, cst.Call)

    def _inside_mask_use(self, small: cst.CSTNode, comparison: cst.Comparison) -> bool:
        for call in nodes_under(small, cst.Call):
            name = dotted(call.func)
            args = [
                a.value for a in call.args if name in MEMORY and a.keyword is not None and a.keyword.value == "mask"
            ]
            if name == "tl.where" and call.args:
                args.append(call.args[0].value)
            if any(comparison in nodes_under(a, cst.Comparison) for a in args):
                return True
        return False


def _hint_of(value: cst.BaseExpression, var: str) -> bool:
    """`var`, `tl.multiple_of(var, ...)` or `tl.max_contiguous(var, ...)`: the same value (with a hint, or as an
    undone hint leaves it)."""
    if isinstance(value, cst.Name):
        return value.value == var
    return (
        isinstance(value, cst.Call)
        and dotted(value.func) in ("tl.multiple_of", "tl.max_contiguous")
        and bool(value.args)
        and isinstance(value.args[0].value, cst.Name)
        and value.args[0].value.value == var
    )


def _loops(module: Module) -> list[tuple[cst.FunctionDef, cst.For, _Masks]]:
    found = []
    paired = {id(p.block.body[k]) for _, p in _pairs(module) for k in (p.first, p.second)}
    for fn in module.kernels().values():
        for loop in nodes_under(fn.body, cst.For):
            parts = _range_parts(loop)
            if parts is None or id(loop) in paired or loop.orelse:
                continue
            _, (lo, _, step) = parts
            if node_code(lo.value) != "0" or not _masked(loop.body):
                continue
            masks = _Masks(fn, loop, node_code(step.value))
            if masks.ok and masks.limits:
                found.append((fn, loop, masks))
    return found


def _split_point(masks: _Masks) -> str | None:
    """`bound // STEP * STEP` for each mask, the smallest of them (`tl.minimum`), a flag's as a conditional form;
    None (no site) with masks under two flags, or only under a flag."""
    step = masks.step

    def whole(bound: str) -> str:
        return f"({bound}) // {step} * {step}" if not _simple(bound) else f"{bound} // {step} * {step}"

    limits = list(dict.fromkeys(masks.limits))  # a bound compared twice (a load's mask and a where's) counts once
    always = [whole(lim.bound) for lim in limits if lim.flag is None]
    flags = sorted({lim.flag for lim in limits if lim.flag is not None})
    if len(flags) > 1:
        return None

    def least(parts: list[str]) -> str:
        out = parts[0]
        for part in parts[1:]:
            out = f"tl.minimum({out}, {part})"
        return out

    if not flags:
        return least(always)
    flagged = always + [whole(lim.bound) for lim in limits if lim.flag == flags[0]]
    return f"{least(flagged)} if {flags[0]} else {least(always)}" if always else None


def _simple(code: str) -> bool:
    return code.replace("_", "a").replace(".", "a").isalnum()


class _Unmask(cst.CSTTransformer):
    """The mask-free copy of a loop body: masks dropped from loads and stores (with their `other=`), `tl.where(m,
    a, b)` read as `a`, the statements that only build masks removed, and `x = x` left by a where removed."""

    def __init__(self, masks: _Masks):
        super().__init__()
        self.masks = masks

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = dotted(updated.func)
        if name in MEMORY:
            drop = {"mask", "other"} if any(a.keyword and a.keyword.value == "mask" for a in updated.args) else set()
            args = [a for a in updated.args if a.keyword is None or a.keyword.value not in drop]
            if args and len(args) != len(updated.args):
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(args=args)
        if name == "tl.where" and len(updated.args) == 3:
            value = updated.args[1].value
            return (
                value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                if isinstance(value, cst.BinaryOperation | cst.BooleanOperation | cst.Comparison | cst.IfExp)
                else value
            )
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        kept = []
        for small in updated.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                if isinstance(target, cst.Name) and target.value in self.masks.names:
                    continue  # builds a mask
                value = small.value
                if isinstance(target, cst.Name) and isinstance(value, cst.Name) and value.value == target.value:
                    continue  # `x = x`, what `x = tl.where(mask, x, c)` became
            kept.append(small)
        return updated.with_changes(body=kept) if kept else cst.RemoveFromParent()

    def leave_If(self, original, updated):
        return updated if updated.body.body else cst.RemoveFromParent()


@register
class MaskedStageSplit(Transform):
    """Intent: split a loop over blocks into a mask-free stage, over the blocks that every mask keeps whole, and a
    masked stage for the rest (the diagonal block of a causal mask, a partial last block), so the hot loop carries
    no predicated loads, no bounds comparisons and no `tl.where`.

    Sites: in a @triton.jit kernel, two consecutive loops over the same index, `range(lo, mid, STEP)` without any
    mask followed by `range(mid, hi, STEP)` (or `tl.range`) with one. Simplify: the mask-free loop is removed and
    the masked one starts at `lo`. Params: `mid` (the expert's split point, as code). Optimize: a loop `for i in
    range(0, hi, STEP)` whose masks are all comparisons of its block's indices `cols = i + tl.arange(0, STEP)`:
    `cols < bound` and `cols <= first + tl.arange(0, ROWS)` (masks combined with `&`, broadcast with `[None, :]`,
    a mask under a constexpr `if FLAG:`). A mask-free copy of the loop runs over `range(0, mid, STEP)` with `mid =
    bound // STEP * STEP` (and `first // STEP * STEP` for the causal form; the least of them, flagged ones only
    when their flag holds); the original loop then starts at `mid`. The copy drops `mask=`/`other=` from loads and
    stores, reads `tl.where(m, a, b)` as `a` and removes the statements that only build masks.

    Conditions: divisible_by_block is not needed: the split point is a multiple of STEP at or below every bound.
    fully_masked_rows: a mask that removes a whole block's rows (a row past the end) is not of the forms read,
    so no site; what the form check cannot see (a load whose `other=` value matters inside the mask-free range,
    which it cannot, since there every lane is kept) the correctness gate checks.

    Failure: a split point past a bound would read out of bounds or keep masked scores (a wrong causal result);
    the bound arithmetic rounds down to a whole block, and the correctness gate's tiny cases (sizes not divisible
    by the block) check it. An accumulation whose order matters keeps its order: the mask-free blocks come
    first, as before."""

    id = "masked_stage_split"
    family = 5
    tag = "S"
    cost = 4
    conditions = ("divisible_by_block", "fully_masked_rows")
    intent = "sweep the blocks every mask keeps whole in a mask-free loop, the masked remainder after it"

    def sites(self, source: str) -> list[Site]:
        module = _module(source)
        if module is None:
            return []
        out = []
        for i, (fn, pair) in enumerate(_pairs(module)):
            first, masked = pair.block.body[pair.first], pair.block.body[pair.second]
            lo = _range_parts(first)[1][0].value
            mid = _range_parts(first)[1][1].value
            after = _with_bounds(masked, lo, None)
            out.append(
                Site(
                    self.id,
                    fn.name.value,
                    i,
                    module.line(masked),
                    _header(masked),
                    _header(after),
                    {"mid": node_code(mid)},
                )
            )
        return out

    def simplify(self, source: str, site: Site) -> str:
        module = _module(source)
        pairs = _pairs(module) if module is not None else []
        if site.index >= len(pairs):
            raise ValueError(f"{self.id}: no site {site.index} in this program")
        _, pair = pairs[site.index]
        first, masked = pair.block.body[pair.first], pair.block.body[pair.second]
        lo = _range_parts(first)[1][0].value
        body = list(pair.block.body)
        comments = first.leading_lines  # the stage's comment stays with the merged loop where nothing is between
        body[pair.second] = _with_bounds(masked, lo, None)
        del body[pair.first]
        if pair.second == pair.first + 1:
            body[pair.first] = body[pair.first].with_changes(leading_lines=comments)
        return module.tree.deep_replace(pair.block, pair.block.with_changes(body=body)).code

    def optimize_sites(self, source: str) -> list[Site]:
        module = _module(source)
        if module is None:
            return []
        out = []
        for i, (fn, loop, masks) in enumerate(_loops(module)):
            mid = _split_point(masks)
            if mid is None:
                continue
            out.append(Site(self.id, fn.name.value, i, module.line(loop), _header(loop), f"mid = {mid}", {}))
        return out

    def optimize(self, source: str, site: Site, params: dict) -> str:
        module = _module(source)
        loops = _loops(module) if module is not None else []
        if site.index >= len(loops):
            raise ValueError(f"{self.id}: no site {site.index} in this program")
        fn, loop, masks = loops[site.index]
        mid = _split_point(masks)
        if mid is None:
            raise ValueError(f"{self.id}: no split point for this loop")
        name = fresh_name(fn, itertools.chain(["mid"], (f"mid{k}" for k in itertools.count(2))))
        block = module.parents[loop]
        free = _with_bounds(loop, None, cst.Name(name)).with_changes(body=loop.body.visit(_Unmask(masks)))
        masked = _with_bounds(loop, cst.Name(name), None).with_changes(leading_lines=())
        assign = cst.parse_statement(f"{name} = {mid}\n").with_changes(leading_lines=loop.leading_lines)
        body = list(block.body)
        i = next(j for j, stmt in enumerate(body) if stmt is loop)
        body[i : i + 1] = [assign, free.with_changes(leading_lines=()), masked]
        return module.tree.deep_replace(block, block.with_changes(body=body)).code


def _module(source: str) -> Module | None:
    try:
        return Module(source)
    except cst.ParserSyntaxError:
        return None


def _header(loop: cst.For) -> str:
    return f"for {node_code(loop.target)} in {node_code(loop.iter)}:"
