"""Family 11: work per program (several rows per program, chosen by a host dispatch)."""

from __future__ import annotations

import libcst as cst

from klineage import launch_config
from klineage.transform import (
    broadcasts,
    constexpr_params,
    dotted,
    int_literal,
    kwarg,
    literal_bindings,
    node_code,
    register,
    with_kwargs,
)
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    calls,
    calls_to,
    imported_modules,
    launch_statement,
    launches,
    leading_comments,
    names_in,
    statement_code,
)

# The generated dispatch, after Liger's RMSNorm (`_block_rms_norm_forward_kernel`, catalog family 11): a block of
# BLOCK_ROW = 16 rows per program when the row tile is at most 256 wide. On the H200, held-out RoPE (a 64-wide half
# per program, 2**20 programs) went from 0.79 ms to 0.135 ms with 16 rows per program, 0.94 of the copy roofline
# (written by hand: 8 rows 0.85, 32 rows 0.91; RESULTS.md#run-10). Liger also asks for 4096 * 8 rows; the generated
# dispatch does not, so that the twin runs on a workload's small cases too, where the correctness gate sees it
# (its last block partly past the end included), instead of only on the large ones.
ROWS, ROW_TILE_CAP = 16, 256
TWIN = "_rows"
ROWS_NAME, LIVE, COUNT = "BLOCK_ROW", "row_live", "n_programs"  # names the twin adds
# Triton calls a row kernel may make and the twin can still make on a (rows x tile) block: elementwise math, loads
# and stores (masked to the live rows), and the 1-D reductions (rewritten per row).
ELEMENTWISE = frozenset(
    {
        "load",
        "store",
        "arange",
        "program_id",
        "where",
        "maximum",
        "minimum",
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "sqrt_rn",
        "rsqrt",
        "sigmoid",
        "abs",
        "fma",
        "erf",
        "sin",
        "cos",
        "fdiv",
        "div_rn",
        "clamp",
        "umulhi",
        "cdiv",
        "floor",
        "ceil",
        "multiple_of",
        "max_contiguous",
        "max_constancy",
        "sum",
        "max",
        "min",
        "argmax",
        "argmin",
        "atomic_add",
        "atomic_max",
        "atomic_min",
        "atomic_and",
        "atomic_or",
        "atomic_xor",
        "atomic_xchg",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint32",
        "uint64",
        "int1",
        "constexpr",
        "math",
    }
)
PYTHON_CALLS = frozenset({"float", "int"})  # `-float("inf")` and the like, on constants
REDUCTIONS = ("tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin")
MEMORY = ("tl.load", "tl.store", "tl.atomic_")


def _one_row_launch(stmt: cst.CSTNode) -> cst.Call | None:
    """`kernel[(n,)](...)` as a statement of its own: one program per row."""
    call = launch_statement(stmt)
    if call is None or len(call.func.slice) != 1:
        return None
    index = call.func.slice[0].slice
    grid = index.value if isinstance(index, cst.Index) else None
    if isinstance(grid, cst.Tuple) and len(grid.elements) == 1 and isinstance(grid.elements[0], cst.Element):
        return call
    return None


def _rows_of(call: cst.Call) -> str | None:
    """For `kernel[(cdiv(n, R), ...)](...)`: the code of n (the rows are tiled by R per program)."""
    index = call.func.slice[0].slice if len(call.func.slice) == 1 else None
    grid = index.value if isinstance(index, cst.Index) else None
    if not isinstance(grid, cst.Tuple) or not grid.elements:
        return None
    first = grid.elements[0].value
    if isinstance(first, cst.Call) and dotted(first.func) in ("triton.cdiv", "cdiv") and len(first.args) == 2:
        return node_code(first.args[0].value)
    return None


def _dispatch(node: cst.If) -> tuple[str, cst.SimpleStatementLine] | None:
    """("body" or "orelse", the one-row launch) for `if cond: <one row> else: <rows per program>`."""
    if not isinstance(node.orelse, cst.Else) or not isinstance(node.body, cst.IndentedBlock):
        return None
    for side, mine, other in (("body", node.body, node.orelse.body), ("orelse", node.orelse.body, node.body)):
        if not isinstance(mine, cst.IndentedBlock) or len(mine.body) != 1:
            continue
        call = _one_row_launch(mine.body[0])
        if call is None:
            continue
        rows = _one_row_grid(call)
        tiled = [c for c in launches(other) if _rows_of(c) == rows and c.func.value.value != call.func.value.value]
        if tiled:
            return side, mine.body[0]
    return None


def _one_row_grid(call: cst.Call) -> str:
    return node_code(call.func.slice[0].slice.value.elements[0].value)


def _program_id(call: cst.Call) -> bool:
    """`tl.program_id(0)` or `tl.program_id(axis=0)`."""
    return (
        dotted(call.func) == "tl.program_id"
        and len(call.args) == 1
        and isinstance(call.args[0].value, cst.Integer)
        and call.args[0].value.value == "0"
    )


def _is_to(call: cst.Call) -> bool:
    """A `.to(...)` conversion of any value."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "to"


def _axis(call: cst.Call) -> cst.BaseExpression | None:
    """A reduction's axis argument (positional second, or `axis=`), None when absent."""
    if (arg := kwarg(call, "axis")) is not None:
        return arg.value
    positional = [a for a in call.args if a.keyword is None]
    return positional[1].value if len(positional) > 1 else None


def rows_kernel(kernel: cst.FunctionDef) -> str | None:
    """For a loop-free 1-D kernel whose program handles one row (or one block) chosen by `tl.program_id(0)`: the
    name that statement binds; None for any other kernel. Every statement is a plain one (no branch, loop or
    return), the program id is read once, on axis 0, into a name, every Triton call is elementwise, a load, a store,
    an atomic or a 1-D reduction, and the twin's names are free."""
    code = node_code(kernel)
    if broadcasts(code) or any(p.default is not None or p.star for p in kernel.params.params):
        return None
    if {ROWS_NAME, LIVE, COUNT} & (names_in(kernel) | {p.name.value for p in kernel.params.params}):
        return None
    pid = None
    for stmt in kernel.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        for small in stmt.body:
            if isinstance(small, cst.Return | cst.Global | cst.Nonlocal | cst.Del):
                return None
            ids = [c for c in calls(small) if dotted(c.func) in ("tl.program_id", "tl.num_programs")]
            if not ids:
                continue
            if pid is not None or len(ids) != 1 or not _program_id(ids[0]) or not isinstance(small, cst.Assign):
                return None
            value = small.value  # `pid = tl.program_id(0)`, or with `.to(...)` on it
            while isinstance(value, cst.Call) and _is_to(value):
                value = value.func.value
            if value is not ids[0] or len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                return None
            pid = small.targets[0].target.value
    if pid is None:
        return None
    for call in calls(kernel.body):
        name = dotted(call.func)
        if name.startswith("tl.math."):
            continue
        if name.startswith("tl."):
            if name.split(".")[1] not in ELEMENTWISE:
                return None
            if name in REDUCTIONS and (
                kwarg(call, "keep_dims")
                or kwarg(call, "return_indices")
                or not (_axis(call) is None or node_code(_axis(call)) == "0")
            ):
                return None
        elif name not in PYTHON_CALLS and not _is_to(call):
            return None  # another function (a @triton.jit helper could reduce over axis 0), or a method
    return pid


def _tainted(kernel: cst.FunctionDef, pid: str) -> set[str]:
    """The names whose values depend on the program id (straight-line code: one pass in order)."""
    tainted = {pid}
    for stmt in kernel.body.body:
        for small in stmt.body:
            if isinstance(small, cst.Assign | cst.AugAssign | cst.AnnAssign) and small.value is not None:
                if names_in(small.value) & tainted or (
                    isinstance(small, cst.AugAssign) and names_in(small.target) & tainted
                ):
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    for target in targets:
                        tainted |= names_in(target)
    return tainted


MASK_POSITION = {"tl.load": 1, "tl.store": 2}  # the atomics take (pointer, value, mask) like tl.store


def _with_live_mask(call: cst.Call) -> cst.Call:
    """A load, store or atomic masked to the live rows as well."""
    position = MASK_POSITION.get(dotted(call.func), 2)
    args = list(call.args)
    positional = [i for i, a in enumerate(args) if a.keyword is None]
    if (arg := kwarg(call, "mask")) is not None or len(positional) > position:
        i = args.index(arg) if arg is not None else positional[position]
        mask = cst.parse_expression(f"({node_code(args[i].value)}) & {LIVE}")
        args[i] = args[i].with_changes(value=mask)
        return call.with_changes(args=args)
    return with_kwargs(call, {"mask": LIVE})


def rows_twin(kernel: cst.FunctionDef, pid: str) -> cst.FunctionDef:
    """The kernel on a block of BLOCK_ROW rows: the program id becomes a column of BLOCK_ROW consecutive ids, every
    `tl.arange` a row vector, each 1-D reduction one per row (`axis=1, keep_dims=True`: a column, as the scalar it
    was broadcasts), and every load, store or atomic whose address or value depends on the id masked to the live
    rows (`id < n_programs`: the last block may run past the end)."""
    tainted = _tainted(kernel, pid)

    class Twin(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call):
            name = dotted(original.func)
            if _program_id(original):
                return cst.parse_expression(f"(tl.program_id(0) * {ROWS_NAME} + tl.arange(0, {ROWS_NAME})[:, None])")
            if name == "tl.arange":
                return cst.parse_expression(f"{node_code(updated)}[None, :]")
            if name in REDUCTIONS:
                kept = [a for a in updated.args if a.keyword is None][:1] + [
                    a for a in updated.args if a.keyword is not None and a.keyword.value != "axis"
                ]
                return with_kwargs(updated.with_changes(args=kept), {"axis": "1", "keep_dims": "True"})
            if name.startswith(MEMORY) and names_in(original) & tainted:
                return _with_live_mask(updated)
            return updated

    body = kernel.body.visit(Twin())
    statements = list(body.body)
    at = next(i for i, s in enumerate(kernel.body.body) if any(_program_id(c) for c in calls(s)))  # binds the id
    statements.insert(at + 1, cst.parse_statement(f"{LIVE} = {pid} < {COUNT}"))
    params = list(kernel.params.params)
    last_comma = params[-1].comma
    params[-1] = params[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    annotation = cst.Annotation(cst.parse_expression("tl.constexpr"))
    params += [
        cst.Param(cst.Name(COUNT), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        cst.Param(cst.Name(ROWS_NAME), annotation=annotation, comma=last_comma),
    ]
    lines = (
        cst.EmptyLine(),
        cst.EmptyLine(),
        cst.EmptyLine(
            comment=cst.Comment(
                f"# {kernel.name.value} on {ROWS_NAME} consecutive rows per program (launched for narrow rows):"
            )
        ),
        cst.EmptyLine(
            comment=cst.Comment(
                "# fewer, fuller programs; a load that does not depend on the row is made once per program."
            )
        ),
    )
    return kernel.with_changes(
        name=cst.Name(kernel.name.value + TWIN),
        body=body.with_changes(body=statements),
        params=kernel.params.with_changes(params=params),
        leading_lines=lines,
    )


def _row_launch(module: Module, call: cst.Call) -> dict | None:
    """For a one-row launch of a `rows_kernel` of this module that passes its one tile by keyword: the kernel, the
    program count (the grid's code) and the tile (the keyword's code)."""
    kernel = module.kernels().get(call.func.value.value)
    if kernel is None or rows_kernel(kernel) is None:
        return None
    constexprs = constexpr_params(kernel)
    tiles = {node_code(c.args[1].value) for c in calls_to(kernel.body, "tl.arange") if len(c.args) == 2}
    if len(tiles) != 1 or not tiles <= constexprs or (tile := kwarg(call, next(iter(tiles)))) is None:
        return None
    if isinstance(call.func.slice[0].slice.value.elements[0].value, cst.Integer):
        return None  # a fixed number of programs (`(1,)`): not rows
    known = _known_int(tile.value, module.enclosing(call))
    if known is not None and known > ROW_TILE_CAP:
        return None  # the dispatch would never take the twin
    return {"kernel": kernel.name.value, "count": _one_row_grid(call), "tile": node_code(tile.value)}


def _known_int(value: cst.BaseExpression, function: cst.FunctionDef | None) -> int | None:
    """An integer literal, or a name the launching function binds once, at its top level, to one."""
    if (literal := int_literal(value)) is not None:
        return literal
    if not isinstance(value, cst.Name) or function is None:
        return None
    return literal_bindings(function).get(value.value)


def _grouped(code: str) -> str:
    """`code` in parentheses where an operator could bind into it (`a * b`, `x if c else y`)."""
    atom = isinstance(cst.parse_expression(code), cst.Name | cst.Attribute | cst.Call | cst.Subscript | cst.Integer)
    return code if atom else f"({code})"


@register
class RowsPerProgram(AnchoredTransform):
    """Intent: for narrow rows and many of them, one program handles a BLOCK_ROW x BLOCK tile of rows instead of a
    single row (Liger `_block_rms_norm_*` when BLOCK_SIZE <= 256 and n_rows >= 32768): fewer, fuller programs,
    and the shared operand (the weight row) is loaded once per tile. The host dispatches between the one-row
    kernel and the rows-per-program kernel.

    Conditions: the rows kernel masks its rows (the last tile is partial when n_rows is not a multiple of
    BLOCK_ROW, and tiles past the end are entirely masked), and its per-row results do not mix rows.

    Failure: a rows kernel without a row mask, or one that reduces over the whole tile instead of per row, reads
    and writes past the last row (out of bounds) or mixes rows of a partial tile into each other's statistics;
    the error shows only when n_rows is not a multiple of BLOCK_ROW. The simplified program (always one row per
    program) is correct for every shape.

    Sites: a host `if cond: kernel_one_row[(n_rows,)](...) else: ... kernel_rows[(triton.cdiv(n_rows, R),)](...)`
    (either order), where the one-row branch is that single launch. Simplify: the one-row launch takes the if's
    place (the dispatch is constant-folded). Params: `condition`, `one_row` (which branch), `rows_branch` (its
    code), `dispatch` (the whole statement) and `leading` (comment lines above it). Optimize: a launch statement
    with a one-element grid `(n,)`; with the expert's `dispatch` (in the expert's own program) that statement;
    elsewhere, for a loop-free 1-D kernel whose program handles the row `tl.program_id(0)` names (`rows_kernel`),
    a generated twin on BLOCK_ROW rows per program (`rows_twin`: the id a column of consecutive ids, each
    `tl.arange` a row vector, each reduction per row, every access the id reaches masked to the live rows),
    launched when the row tile is at most 256 wide, with BLOCK_ROW = 16 and a grid that reads BLOCK_ROW from the
    launch (so the launch-configuration search can change it alone); the original launch otherwise."""

    id = "rows_per_program"
    family = 11
    tag = "S"
    cost = 4
    conditions = ("fully_masked_rows", "divisible_by_block")  # a row count that BLOCK_ROW does not divide
    intent = "process a tile of narrow rows per program instead of one row"
    # Right after the launch configuration's own numbers: the twin runs only where a program's row tile is at most
    # 256 elements wide, under-filled by construction (held-out RoPE, 64 elements a program, ended at 0.20 of the
    # roofline, RESULTS.md#run-9, while the skill, measured where Liger's dispatch kept one row per program, carried
    # no effect to rank it by). It waits for the launch configuration's own numbers: ranked ahead of MSE's block
    # doublings, the twin was kept (x1.55) and the single final program still summed one partial per 256 elements:
    # 0.37 of the roofline where blind's doublings reached 0.86 (H200, RESULTS.md#run-10).
    forward_rank = 0.5
    twin_suffix = TWIN

    def untimed(self, source: str, site, launches: list[dict] | None) -> str:
        """Why the rows twin would change nothing timed: its dispatch takes it only where the row tile is at most
        ROW_TILE_CAP wide, and the bench case's launches (as the check saw them) asked for a wider one; '' when
        they did not, or are unknown. The naive softmax's 8192-wide rows would have spent an evaluation on it."""
        kernel = site.params.get("kernel")
        elements = launch_config.launched_elements(source, kernel, launches) if kernel else None
        if elements is None or elements <= ROW_TILE_CAP:
            return ""
        return (
            f"the bench case launches {kernel} with a {elements}-element row tile; the twin's dispatch takes only "
            f"tiles of at most {ROW_TILE_CAP}, so the timed case would run the present kernel"
        )

    def expert_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if isinstance(node, cst.If) and module.enclosing(node) is not None:
                hit = _dispatch(node)
                if hit is not None:
                    side, _ = hit
                    rows = node.orelse.body if side == "body" else node.body
                    found.append(
                        (
                            node,
                            {
                                "condition": node_code(node.test),
                                "one_row": side,
                                "rows_branch": "\n".join(node_code(s) for s in rows.body),
                                "dispatch": statement_code(node),
                                "leading": leading_comments(node),
                            },
                        )
                    )
        return found

    def simple(self, node, params):
        _, stmt = _dispatch(node)
        return stmt.with_changes(leading_lines=(*node.leading_lines, *stmt.leading_lines))

    def plain_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if not isinstance(node, cst.SimpleStatementLine) or (call := _one_row_launch(node)) is None:
                continue
            seen = _row_launch(module, call) if "triton" in imported_modules(module.tree) else None
            if seen is not None and seen["kernel"] + TWIN in module.kernels():
                continue  # applied already: this is the fallback launch
            found.append((node, seen or {}))
        return found

    def optimized(self, node, params):
        if params.get("dispatch") or not params.get("kernel"):
            return self._experts(node, params)
        call = launch_statement(node)
        grid = f'lambda META: (triton.cdiv({params["count"]}, META["{ROWS_NAME}"]),)'
        grid = cst.parse_expression(f"{params['kernel']}{TWIN}[{grid}]")
        twin = with_kwargs(call.with_changes(func=grid), {COUNT: params["count"], ROWS_NAME: str(ROWS)})
        code = (
            f"if {_grouped(params['tile'])} <= {ROW_TILE_CAP}:\n"
            f"    # Narrow rows: the twin takes {ROWS_NAME} of them per program.\n"
            f"    {node_code(twin)}\n"
            f"else:\n"
            f"    {statement_code(node)}\n"
        )
        return cst.parse_statement(code).with_changes(leading_lines=node.leading_lines)

    def _experts(self, node, params):
        """The expert's own dispatch, with this launch as its one-row branch."""
        dispatch = cst.parse_statement(params["dispatch"])
        if not isinstance(dispatch, cst.If) or _dispatch(dispatch) is None:
            raise ValueError("rows_per_program: `dispatch` is not a one-row / rows-per-program dispatch")
        side, _ = _dispatch(dispatch)
        n_lead = len(params.get("leading", []))
        stmt = node.with_changes(leading_lines=node.leading_lines[n_lead:])
        if side == "body":
            dispatch = dispatch.with_changes(body=dispatch.body.with_changes(body=[stmt]))
        else:
            orelse = dispatch.orelse
            dispatch = dispatch.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(body=[stmt])))
        return dispatch.with_changes(leading_lines=node.leading_lines[:n_lead])

    def _apply(self, source: str, site, plain: bool, params: dict | None) -> str:
        out = super()._apply(source, site, plain, params)
        if not plain or (params or {}).get("dispatch") or not site.params.get("kernel"):
            return out
        # the generated dispatch launches a twin that does not exist yet: write it after the kernel
        module = Module(out)
        kernel = module.kernels().get(site.params["kernel"])
        if kernel is None or kernel not in module.tree.body:
            raise ValueError(f"rows_per_program: {site.params['kernel']} is not a module-level kernel")
        body = list(module.tree.body)
        body.insert(body.index(kernel) + 1, rows_twin(kernel, rows_kernel(kernel)))
        return module.tree.with_changes(body=body).code
