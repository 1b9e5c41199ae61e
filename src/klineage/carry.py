"""Carrying an expert's parameters to another program: a parameter is code (`_num_warps(BLOCK)`, `stride_am > 0`,
`num_warps=8`) written for the expert's program; here it is read for the names it needs, kept where the target
program defines them and replaced by the family's default where it does not, and its numbers varied a step either
way. The transforms' `carry` and `variants` hooks (klineage.transform) use these; so do the proposers."""

from __future__ import annotations

import ast
import builtins
import functools
import re

import libcst as cst


def literal_int(text) -> int | None:
    """The integer a parameter's text spells (`"8"`), or None (an expression, a bool, anything else)."""
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
        missing = undefined_names(_leaf_names(text), source)
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
    lives in another function, and failed its gate with a NameError on the H200 (RESULTS.md#run-5). The whole
    source when `function` is neither a top-level function nor a method of a top-level class."""
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


def undefined_names(names: set[str], source: str) -> list[str]:
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
        return code_names(value)
    if isinstance(value, dict):
        return set().union(*(_leaf_names(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(_leaf_names(v) for v in value))
    return set()


def code_names(code: str) -> set[str]:
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
        value = literal_int(text)
        if value is None or value < 2 or value & (value - 1) or key in ("decorator",):
            continue
        for other in (value * 2, value // 2):
            if 1 <= other <= 4096:
                out.append({**params, key: str(other)})
    return out
