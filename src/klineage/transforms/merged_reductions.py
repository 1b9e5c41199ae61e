"""Family 19 (closest: hoisting, caching and rematerialization): a maximum and its index from one reduction.

`v = tl.max(x, axis=A)` followed in the same block by `... tl.argmax(x, axis=A) ...` reduces x twice; Triton
gives both from one reduction, `v, i = tl.max(x, axis=A, return_indices=True)`. Measured on an NVIDIA H200
(torch 2.11, Triton 3.6.0): the held-out row_argmax whole-row twin (4096 x 32000 bf16) ran at 0.0816 ms with the
two reductions and at 0.0734 ms with one merged reduction, 0.76 -> 0.84 of the copy roofline
(`python benchmarks/roofline_gaps.py argmax`, 2026-12-01).

Why the merge is exact, read in the installed Triton 3.6.0 (triton/language/standard.py):
`argmax(input, axis, tie_break_left=True, keep_dims=False)` is
`max(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left, keep_dims=keep_dims)[1]`, so
the index is the very same reduction with the same combine function. The value differs only in how it is reduced:
without indices `max` promotes 8/16-bit inputs (fp16 to fp32, int8/int16 to int32) and folds with
`core.maximum`; with indices it promotes bf16 only and folds with `_argmax_combine` (`value1 > value2`, or equal
with the lower index when tie_break_left). For inputs without NaN the two give the same number; with NaN (or
-0.0 against +0.0) they may differ, and for fp16/int8/int16 inputs the merged value keeps the input's dtype where
`tl.max` alone gave fp32/int32, which changes the precision of later arithmetic on it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import libcst as cst

from klineage.transform import Site, Transform, dotted, node_code, register, with_kwargs, without_kwargs
from klineage.transforms._anchored import (
    Module,
    blocks,
    bound_in,
    calls,
    fresh_name,
    is_jit,
    names_in,
    statement_code,
)

# Parameters in Triton 3.6's order: a positional argument binds to the name at its position.
MAX_PARAMS = ("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims")
ARGMAX_PARAMS = ("input", "axis", "tie_break_left", "keep_dims")
INDEX_KEYS = ("return_indices", "return_indices_tie_break_left")


@dataclass(frozen=True)
class _Key:
    """What makes a max and an argmax reduce the same thing: the input name and the axis (and keep_dims) code."""

    x: str
    axis: str
    keep_dims: str | None


@dataclass(frozen=True)
class _Pair:
    """One site: in `block`, the statement at `first` (the max, or the merged max) and, in the optimize direction,
    the later statement at `second` holding the argmax calls to replace."""

    fn: cst.FunctionDef
    block: cst.IndentedBlock
    first: int
    second: int | None = None


def _bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.Arg] | None:
    """The call's arguments by parameter name; None with a star argument, an unknown keyword or one given twice."""
    out: dict[str, cst.Arg] = {}
    for i, arg in enumerate(call.args):
        name = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) else None)
        if arg.star or name not in params or name in out:
            return None
        out[name] = arg
    return out


def _code(bound: dict[str, cst.Arg], name: str) -> str | None:
    return node_code(bound[name].value) if name in bound else None


def _key(bound: dict[str, cst.Arg] | None) -> _Key | None:
    if bound is None or "axis" not in bound or "input" not in bound or not isinstance(bound["input"].value, cst.Name):
        return None
    return _Key(bound["input"].value.value, _code(bound, "axis"), _code(bound, "keep_dims"))


def _tie_ok(node: cst.BaseExpression) -> bool:
    # a literal or a (constexpr) name: something that can be evaluated at the max's place instead of the argmax's
    return isinstance(node, cst.Name)


def _single(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def _named_assign(stmt: cst.CSTNode) -> cst.Assign | None:
    small = _single(stmt)
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
        return small
    return None


def _plain_max(stmt: cst.CSTNode) -> tuple[str, _Key] | None:
    """`v = tl.max(x, axis=A[, keep_dims=K])` as (v, key)."""
    assign = _named_assign(stmt)
    if assign is None or not isinstance(assign.targets[0].target, cst.Name) or dotted(assign.value.func) != "tl.max":
        return None
    bound = _bind(assign.value, MAX_PARAMS)
    key = _key(bound)
    if key is None or any(k in bound for k in INDEX_KEYS):
        return None
    return assign.targets[0].target.value, key


def _argmax_of(call: cst.Call, key: _Key) -> cst.BaseExpression | None:
    """The tie-break expression of `tl.argmax(x, axis=A, ...)` when it reduces what `key` names; None otherwise."""
    if dotted(call.func) != "tl.argmax":
        return None
    bound = _bind(call, ARGMAX_PARAMS)
    if _key(bound) != key:
        return None
    tie = bound["tie_break_left"].value if "tie_break_left" in bound else cst.Name("True")  # Triton's default
    return tie if _tie_ok(tie) else None


def _merged_max(stmt: cst.CSTNode) -> tuple[str, str, dict[str, cst.Arg]] | None:
    """`v, i = tl.max(x, axis=A, return_indices=True[, return_indices_tie_break_left=T][, keep_dims=K])` as
    (v, i, bound arguments), the index keywords given as keywords."""
    assign = _named_assign(stmt)
    if assign is None or dotted(assign.value.func) != "tl.max":
        return None
    target = assign.targets[0].target
    names = [e.value for e in target.elements if isinstance(e.value, cst.Name)] if isinstance(target, cst.Tuple) else []
    if len(names) != 2 or len(target.elements) != 2:
        return None
    v, i = (n.value for n in names)
    bound = _bind(assign.value, MAX_PARAMS)
    if _key(bound) is None or _code(bound, "return_indices") != "True":
        return None
    if any(k in bound and bound[k].keyword is None for k in INDEX_KEYS):
        return None
    tie = bound.get("return_indices_tie_break_left")
    # v is bound before the argmax runs in the simple form: the argmax must not read it
    if v == i or v in names_in(assign.value) or (tie is not None and not _tie_ok(tie.value)):
        return None
    return v, i, bound


def _argmax_calls(stmt: cst.CSTNode, key: _Key) -> tuple[list[cst.Call], cst.BaseExpression] | None:
    """The argmax calls of a one-statement line that reduce what `key` names, with their common tie break (the
    first one's; calls with another tie break stay)."""
    if _single(stmt) is None:
        return None
    found = [(c, t) for c in calls(stmt) if (t := _argmax_of(c, key)) is not None]
    if not found:
        return None
    tie = found[0][1]
    return [c for c, t in found if node_code(t) == node_code(tie)], tie


def _partner(block: cst.IndentedBlock, j: int) -> int | None:
    """The statement after `block.body[j]` (a plain max) whose argmax calls can take the max's indices: the first
    one in the same block reducing the same input along the same axis, nothing between rebinding what the merged
    call would read earlier than the argmax did."""
    v, key = _plain_max(block.body[j])
    reads = {key.x} | {n for code in (key.axis, key.keep_dims) if code for n in names_in(cst.parse_expression(code))}
    if v in reads:  # `x = tl.max(x, ...)`: the later argmax reduces another x
        return None
    rebound = {v}
    for k in range(j + 1, len(block.body)):
        stmt = block.body[k]
        found = _argmax_calls(stmt, key)
        if found is not None:
            return k if not (names_in(found[1]) & rebound) else None
        same = _plain_max(stmt)
        if same is not None and same[1] == key:
            return None  # that max pairs with the argmax, if any
        rebound |= bound_in(stmt)
        if reads & rebound:
            return None
    return None


def _fresh(fn: cst.FunctionDef, base: str) -> str:
    return fresh_name(fn, itertools.chain([f"{base}_at"], (f"{base}_at_{n}" for n in itertools.count(1))))


def _pair_tuple(v: str, i: str) -> cst.Tuple:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Tuple([cst.Element(cst.Name(v), comma=comma), cst.Element(cst.Name(i))], lpar=[], rpar=[])


def _with_indices(call: cst.Call, tie: str, params: dict) -> cst.Call:
    """`call` (a plain tl.max) asking for indices too, with the tie break written unless the expert left Triton's
    default (True) implicit; keywords in the expert's order when that order fits this call."""
    extra = {"return_indices": "True"}
    if tie != "True" or params.get("tie_break", "explicit") != "default":
        extra["return_indices_tie_break_left"] = tie
    keys = [a.keyword.value for a in call.args if a.keyword is not None] + list(extra)
    order = [k for k in str(params.get("order", "")).split(",") if k]
    if sorted(order) != sorted(keys) or order == keys:
        return with_kwargs(call, extra)
    values = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    values |= {k: cst.parse_expression(code) for k, code in extra.items()}
    equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    args = [cst.Arg(a.value) for a in call.args if a.keyword is None]
    args += [cst.Arg(values[k], keyword=cst.Name(k), equal=equal) for k in order]
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return call.with_changes(args=[a.with_changes(comma=comma) for a in args[:-1]] + args[-1:])


def _merge(pair: _Pair, params: dict) -> list[cst.BaseStatement]:
    """The block's statements with the pair merged: `v, i = tl.max(..., return_indices=True, ...)` in place of the
    max; an adjacent `i = tl.argmax(...)` (no comment of its own) goes, any other argmax becomes a fresh name."""
    body = list(pair.block.body)
    first, second = body[pair.first], body[pair.second]
    v, key = _plain_max(first)
    argmaxes, tie = _argmax_calls(second, key)
    assign, later = _named_assign(first), _named_assign(second)
    merged = _with_indices(assign.value, node_code(tie), params)
    direct = (
        pair.second == pair.first + 1
        and later is not None
        and later.value is argmaxes[0]
        and isinstance(later.targets[0].target, cst.Name)
        and later.targets[0].target.value != v
        and not second.leading_lines
        and second.trailing_whitespace.comment is None
    )
    index = later.targets[0].target.value if direct else _fresh(pair.fn, v)
    target = assign.targets[0].with_changes(target=_pair_tuple(v, index))
    body[pair.first] = first.with_changes(body=[assign.with_changes(targets=[target], value=merged)])
    if direct:
        del body[pair.second]
    else:
        replaced = second
        for call in argmaxes:
            replaced = replaced.deep_replace(call, cst.Name(index))
        body[pair.second] = replaced
    return body


def _split(pair: _Pair) -> list[cst.BaseStatement]:
    """The block's statements with the merged max at `first` split into a plain max and `i = tl.argmax(...)`."""
    body = list(pair.block.body)
    stmt = body[pair.first]
    v, i, bound = _merged_max(stmt)
    assign = _named_assign(stmt)
    plain = without_kwargs(assign.value, set(INDEX_KEYS))
    argmax = plain.with_changes(func=cst.parse_expression("tl.argmax"))
    if "return_indices_tie_break_left" in bound:
        argmax = with_kwargs(argmax, {"tie_break_left": _code(bound, "return_indices_tie_break_left")})
    target = assign.targets[0].with_changes(target=cst.Name(v))
    body[pair.first] = stmt.with_changes(body=[assign.with_changes(targets=[target], value=plain)])
    body.insert(pair.first + 1, cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(i))], argmax)]))
    return body


def _expert_params(bound: dict[str, cst.Arg]) -> dict:
    return {
        "tie_break": "explicit" if "return_indices_tie_break_left" in bound else "default",
        "order": ",".join(name for name, arg in bound.items() if arg.keyword is not None),
    }


def _round_trips(pair: _Pair, params: dict) -> bool:
    """Whether merging the split form with these parameters writes the merged statement back exactly: only such
    statements are sites, so optimize(simplify(p, s), ..., s.params) == p holds for every one."""
    split = _split(pair)
    block = pair.block.with_changes(body=split[pair.first : pair.first + 2])
    if _partner(block, 0) != 1:
        return False
    back = _merge(_Pair(pair.fn, block, 0, 1), params)
    return len(back) == 1 and cst.Module([back[0]]).code == cst.Module([pair.block.body[pair.first]]).code


def _block_sites(fn: cst.FunctionDef, block: cst.IndentedBlock, plain: bool) -> list[tuple[_Pair, dict]]:
    found = []
    for j, stmt in enumerate(block.body):
        if plain and _plain_max(stmt) is not None and (k := _partner(block, j)) is not None:
            found.append((_Pair(fn, block, j, k), {}))
        elif not plain and (merged := _merged_max(stmt)) is not None:
            pair, params = _Pair(fn, block, j), _expert_params(merged[2])
            if _round_trips(pair, params):
                found.append((pair, params))
    return found


@register
class MergedReductions(Transform):
    """Intent: a row's maximum and its index from one reduction: `v = tl.max(x, axis=A)` and a later
    `tl.argmax(x, axis=A, tie_break_left=T)` in the same block become `v, i = tl.max(x, axis=A, return_indices=True,
    return_indices_tie_break_left=T)`; the argmax call becomes `i` (an adjacent `i = tl.argmax(...)` is dropped,
    any other takes a fresh name, `v_at`). The argmax already reduces (value, index) pairs; the merge drops the
    separate max reduction (its shuffles and shared-memory exchange).
    Undo: the plain max followed by `i = tl.argmax(x, axis=A[, tie_break_left=T])`. Matched inside @triton.jit
    functions only, both calls on the same input name, same axis and keep_dims, no other keywords, nothing between
    rebinding the input, the axis or the tie break; a max and an argmax in different blocks (one inside an if or a
    loop) are not paired, nor is an argmax that comes first.

    Conditions: the input holds no NaN (the merged value comes from `>` comparisons, tl.max's from `maximum`); for
    fp16 inputs (dtype_fp16) the merged value stays fp16 where tl.max promoted it to fp32, so later arithmetic on
    it rounds differently (tolerance). The index is bit-identical: argmax is this very call in Triton 3.6.

    Failure: with NaN in a row the value may differ from tl.max's; with fp16 (or int8/int16) inputs, arithmetic on
    the value loses the fp32 (int32) promotion. A merge that writes another tie break than the argmax had (False
    for True) returns a later maximal index on ties, which the correctness gate catches on tied rows."""

    id = "merged_reductions"
    family = 19
    tag = "M"
    cost = 2
    conditions = ("dtype_fp16", "tolerance")
    intent = "one tl.max(..., return_indices=True) reduction gives a maximum and its index instead of two reductions"
    label_params = ("tie_break", "order")
    forward_rank = 3

    def default_params(self) -> dict:
        return {"tie_break": "explicit"}

    def _found(self, source: str, plain: bool) -> tuple[Module | None, list[tuple[_Pair, dict]]]:
        try:
            module = Module(source)
            found = [
                f
                for fn in module.functions()
                if is_jit(fn)
                for block in blocks(fn)
                for f in _block_sites(fn, block, plain)
            ]
        except (cst.ParserSyntaxError, RecursionError, ValueError, KeyError, IndexError, AttributeError, TypeError):
            return None, []  # odd code: no site
        found.sort(key=lambda f: module.line(f[0].block.body[f[0].first]))
        return module, found

    def _sites(self, source: str, plain: bool) -> list[Site]:
        module, found = self._found(source, plain)
        sites = []
        for i, (pair, params) in enumerate(found):
            if plain:
                before = [pair.block.body[pair.first], pair.block.body[pair.second]]
                body = _merge(pair, {**self.default_params(), **params})
                direct = len(body) < len(pair.block.body)
                after = [body[pair.first]] if direct else [body[pair.first], body[pair.second]]
            else:
                before, after = [pair.block.body[pair.first]], _split(pair)[pair.first : pair.first + 2]
            sites.append(
                Site(
                    self.id,
                    pair.fn.name.value,
                    i,
                    module.line(pair.block.body[pair.first]),
                    "\n".join(statement_code(s) for s in before),
                    "\n".join(statement_code(s) for s in after),
                    params,
                )
            )
        return sites

    def _apply(self, source: str, site: Site, plain: bool, params: dict) -> str:
        module, found = self._found(source, plain)
        if site.index >= len(found):
            raise ValueError(f"{self.id}: no site {site.index} in this program")
        pair, context = found[site.index]
        body = _merge(pair, {**context, **params}) if plain else _split(pair)
        return module.tree.deep_replace(pair.block, pair.block.with_changes(body=body)).code

    def sites(self, source: str) -> list[Site]:
        return self._sites(source, plain=False)

    def simplify(self, source: str, site: Site) -> str:
        return self._apply(source, site, plain=False, params={})

    def optimize_sites(self, source: str) -> list[Site]:
        return self._sites(source, plain=True)

    def optimize(self, source: str, site: Site, params: dict) -> str:
        return self._apply(source, site, plain=True, params=params)
