"""Family 16 (skipping work): a loop over key blocks cut at the causal diagonal.

Under a causal mask (key column <= query row) the key blocks that start past a query block's last row are masked
in full: every score is -inf and the block changes nothing. The expert form stops the loop there,
`hi = tl.minimum(q_start + BLOCK_M, N_CTX)` (FlashAttention's `end_n = min((start_m + 1) * BLOCK_M, seqlen_k)`,
Triton tutorial 06's stage bounds); the simple form visits every key block and lets the mask remove them. For a
causal square attention that is about half of all the blocks."""

from __future__ import annotations

import libcst as cst

from klineage.transform import constexpr_params, dotted, is_jit, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module, nodes_under
from klineage.transforms._kernel_exprs import LOOP_RANGES, call_with

MINIMUM = ("tl.minimum", "min")
_ROW, _COL = "[:,None]", "[None,:]"


def _squeezed(node: cst.CSTNode) -> str:
    return "".join(node_code(node).split())


def _arange_offset(value: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(start, width) of `start + tl.arange(0, width)` (either order); None otherwise."""
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
        return None
    for start, arange in ((value.left, value.right), (value.right, value.left)):
        if (
            isinstance(arange, cst.Call)
            and dotted(arange.func) == "tl.arange"
            and len(arange.args) == 2
            and node_code(arange.args[0].value) == "0"
        ):
            return start, arange.args[1].value
    return None


def _assignments(fn: cst.FunctionDef) -> dict[str, list[cst.Assign]]:
    """Plain `name = value` assignments in a function, by name, in source order (nested blocks included)."""
    found: dict[str, list[cst.Assign]] = {}
    for node in nodes_under(fn, cst.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            found.setdefault(node.targets[0].target.value, []).append(node)
    return found


def _diagonal(rows: cst.BaseExpression) -> str:
    """Code of the first row past a query block `start + tl.arange(0, width)`: `start + width`."""
    start, width = _arange_offset(rows)
    loose = isinstance(start, cst.IfExp | cst.BooleanOperation | cst.Comparison | cst.Lambda)
    start_code = f"({node_code(start)})" if loose else node_code(start)
    return f"{start_code} + {node_code(width)}"


class _Loop:
    """A key-block loop of a kernel under a causal mask: the loop, its upper bound, the row tensor's first row past
    the block (`diagonal`) and the constexpr flag the mask sits under (None: always masked)."""

    def __init__(self, loop: cst.For, call: cst.Call, bound: cst.Arg, diagonal: str, flag: str | None):
        self.loop, self.call, self.bound, self.diagonal, self.flag = loop, call, bound, diagonal, flag


def _causal_flag(module: Module, node: cst.CSTNode, loop: cst.For, flags: set[str]) -> str | None | bool:
    """The constexpr flag whose `if` holds `node` inside `loop` (None: no `if` between them); False when an `if`
    of another kind (a runtime test, an else branch) holds it, which is no site."""
    flag = None
    child, parent = node, module.parents.get(node)
    while parent is not None and parent is not loop:
        if isinstance(parent, cst.If):
            if child is parent.orelse or not (isinstance(parent.test, cst.Name) and parent.test.value in flags):
                return False
            if flag is not None and flag != parent.test.value:
                return False
            flag = parent.test.value
        child, parent = parent, module.parents.get(parent)
    return flag


def _causal_loops(module: Module, fn: cst.FunctionDef) -> list[_Loop]:
    """Loops `for i in range(lo, hi[, step])` in kernel `fn` whose body keeps `cols[None, :] <= rows[:, None]`
    (or `rows[:, None] >= cols[None, :]`, strict or not), with `cols = i + ...` assigned in the loop and
    `rows = start + tl.arange(0, width)` assigned once in the kernel."""
    assigned = _assignments(fn)
    rows_of = {name: a[0].value for name, a in assigned.items() if len(a) == 1 and _arange_offset(a[0].value)}
    flags = constexpr_params(fn)
    found = []
    for loop in [n for n in module.positions if isinstance(n, cst.For) and module.enclosing(n) is fn]:
        call = loop.iter
        if not (isinstance(call, cst.Call) and dotted(call.func) in LOOP_RANGES and isinstance(loop.target, cst.Name)):
            continue
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args) or not 1 <= len(positional) <= 3:
            continue
        bound = positional[1] if len(positional) >= 2 else positional[0]
        index = loop.target.value
        cols = {
            t.target.value
            for a in nodes_under(loop.body, cst.Assign)
            for t in a.targets
            if isinstance(t.target, cst.Name)
            and isinstance(a.value, cst.BinaryOperation)
            and isinstance(a.value.operator, cst.Add)
            and index in (node_code(a.value.left), node_code(a.value.right))
        }
        for cmp in nodes_under(loop.body, cst.Comparison):
            rows = _causal_rows(cmp, cols, set(rows_of))
            flag = _causal_flag(module, cmp, loop, flags) if rows else False
            if rows and flag is not False:
                found.append(_Loop(loop, call, bound, _diagonal(rows_of[rows]), flag))
                break
    return found


def _causal_rows(cmp: cst.Comparison, cols: set[str], rows: set[str]) -> str | None:
    """The row tensor's name in `cols[None, :] <= rows[:, None]` (`<` too) or `rows[:, None] >= cols[None, :]`
    (`>` too); None for any other comparison (the anti-causal direction included)."""
    if len(cmp.comparisons) != 1:
        return None
    left, op, right = cmp.left, cmp.comparisons[0].operator, cmp.comparisons[0].comparator

    def named(node, names, index):
        ok = isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value in names
        return node.value.value if ok and _squeezed(node)[len(node.value.value) :] == index else None

    if isinstance(op, cst.LessThanEqual | cst.LessThan) and named(left, cols, _COL):
        return named(right, rows, _ROW)
    if isinstance(op, cst.GreaterThanEqual | cst.GreaterThan) and named(right, cols, _COL):
        return named(left, rows, _ROW)
    return None


def _is_cut(node: cst.BaseExpression, diagonal: str) -> str | None:
    """`tl.minimum(diagonal, end)` or `tl.minimum(end, diagonal)` (or `min`): which order; None for anything
    else."""
    if not (isinstance(node, cst.Call) and dotted(node.func) in MINIMUM and len(node.args) == 2):
        return None
    codes = [_squeezed(a.value) for a in node.args]
    target = "".join(diagonal.split())
    return "diagonal_first" if codes[0] == target else "end_first" if codes[1] == target else None


def _in_flag_branch(module: Module, node: cst.CSTNode, flag: str) -> bool:
    """`node` sits in the body (not the else) of an `if <flag>:`."""
    child, parent = node, module.parents.get(node)
    while parent is not None and not isinstance(parent, cst.FunctionDef):
        if isinstance(parent, cst.If) and child is parent.body and node_code(parent.test) == flag:
            return True
        child, parent = parent, module.parents.get(parent)
    return False


def _bound_value(module: Module, fn: cst.FunctionDef, site: _Loop) -> cst.BaseExpression:
    """Where the loop's upper bound is decided: the bound itself, or, for a name assigned in the kernel, the value
    of its one assignment (no flag) or of its assignment under the mask's flag. A name with no such assignment
    (a parameter, a name assigned in both branches without the flag) is decided at the bound itself."""
    bound = site.bound.value
    if not isinstance(bound, cst.Name):
        return bound
    assigns = _assignments(fn).get(bound.value, [])
    if site.flag is not None:
        flagged = [a for a in assigns if _in_flag_branch(module, a, site.flag)]
        return flagged[0].value if len(flagged) == 1 else bound
    return assigns[0].value if len(assigns) == 1 else bound


def _sites(module: Module) -> list[tuple[_Loop, cst.BaseExpression]]:
    out = []
    for fn in module.kernels().values():
        if is_jit(fn):
            out.extend((loop, _bound_value(module, fn, loop)) for loop in _causal_loops(module, fn))
    return out


@register
class CausalBound(AnchoredTransform):
    """Intent: under a causal mask, stop a query block's loop over key blocks at the diagonal, skipping the key
    blocks the mask removes in full (about half of them for a square causal attention).

    Sites: a `for i in range(lo, hi, step)` in a @triton.jit function whose body keeps `cols[None, :] <=
    rows[:, None]` (`cols = i + ...` assigned in the loop, `rows = start + tl.arange(0, width)` once in the
    kernel), directly or under `if FLAG:` for a constexpr FLAG. Expert form: the bound (or the value the bound's
    name takes under FLAG) is `tl.minimum(start + width, end)`, inline as `tl.minimum(...) if FLAG else end` too.
    Simplify: `end`. Params: `order` (which argument of the minimum is the diagonal), `fn` (`tl.minimum` or
    `min`). Optimize: a bound without the cut becomes `tl.minimum(end, start + width)`, written `... if FLAG else
    end` where the bound sits outside FLAG's branch.

    Conditions: the skipped blocks change nothing. With an online softmax that holds when every row has met a
    finite score before them (key 0 is in the first block), which the correctness gate checks; a mask in the other
    direction is no site.

    Failure: a loop whose skipped blocks still write or count something (a kernel that stores per key block)
    loses that work; the correctness gate fails it."""

    id = "causal_bound"
    family = 16
    tag = "S"
    cost = 3
    conditions = ("fully_masked_rows",)
    intent = "stop a causal loop over key blocks at the diagonal instead of masking the blocks past it"
    label_params = ("order", "fn")

    def expert_anchors(self, module: Module):
        found = []
        for site, value in _sites(module):
            if (
                isinstance(value, cst.IfExp)
                and node_code(value.test) == (site.flag or "")
                and (order := _is_cut(value.body, site.diagonal))
            ):
                found.append((value, {"order": order, "fn": dotted(value.body.func), "inline": True}))
            elif order := _is_cut(value, site.diagonal):
                found.append((value, {"order": order, "fn": dotted(value.func)}))
        return found

    def simple(self, node: cst.BaseExpression, params: dict) -> cst.BaseExpression:
        if params.get("inline"):
            return node.orelse.with_changes(lpar=node.lpar, rpar=node.rpar)
        end = node.args[1 if params["order"] == "diagonal_first" else 0].value
        return end.with_changes(lpar=node.lpar, rpar=node.rpar) if hasattr(end, "lpar") else end

    def plain_anchors(self, module: Module):
        found = []
        for site, value in _sites(module):
            if _is_cut(value, site.diagonal) or (isinstance(value, cst.IfExp) and _is_cut(value.body, site.diagonal)):
                continue
            # outside FLAG's branch the cut is written `... if FLAG else end`; inside it (or with no flag), bare
            wrap = site.flag if site.flag is not None and not _in_flag_branch(module, value, site.flag) else ""
            found.append((value, {"diagonal": site.diagonal, "flag": wrap}))
        return found

    def optimized(self, node: cst.BaseExpression, params: dict) -> cst.BaseExpression:
        order, fn = params["order"], params.get("fn", MINIMUM[0])
        if order not in ("diagonal_first", "end_first") or fn not in MINIMUM:
            raise ValueError(f"causal_bound: unknown order {order!r} or minimum {fn!r}")
        end = node.with_changes(lpar=(), rpar=()) if getattr(node, "lpar", None) else node
        diagonal = cst.parse_expression(params["diagonal"])
        cut = call_with(fn, *((diagonal, end) if order == "diagonal_first" else (end, diagonal)))
        if not params.get("flag"):
            return cut
        return cst.IfExp(
            test=cst.Name(params["flag"]),
            body=cut,
            orelse=end,
            whitespace_before_if=cst.SimpleWhitespace(" "),
            whitespace_after_if=cst.SimpleWhitespace(" "),
            whitespace_before_else=cst.SimpleWhitespace(" "),
            whitespace_after_else=cst.SimpleWhitespace(" "),
        )

    def default_params(self) -> dict:
        return {"order": "end_first", "fn": MINIMUM[0]}
