"""Shrinking: a small case for the CPU interpreter, derived from a KernelBench-style file whose only case is full
size. Such a file names its sizes as module-level integers (`batch_size = 4096; dim = 393216`) that `get_inputs()`
and `get_init_inputs()` read; its one case makes 4-8 GiB of inputs, out of the memory or the time of a CPU check.

The derived case rebinds those integers to small values that keep each size's character: a power of two stays one,
the remainder modulo 16 is kept (odd stays odd, a multiple of 16 stays one, a non-multiple stays one), and modulo
a larger power of two (up to 1024) where the element budget allows; a multiple that is no power of two stays
neither; two names of the same value keep one value, and a smaller size never shrinks past a larger one. Sizes of
at most FLOOR (a kernel width, a reduced dim's index, a small batch) are kept. Names computed from the sizes at
module level (`hidden = 4 * dim`, `shape = (batch, dim)`) are computed again from the new values.

The footprint (input elements and the reference's parameters) is counted on PyTorch's meta device, where
nothing is allocated; a file whose inputs cannot be made there is counted on the CPU, from the smallest sizes up.
"""

from __future__ import annotations

import ast
import contextlib
import math
import types
from dataclasses import dataclass, field
from pathlib import Path

FLOOR = 16  # sizes at or under this are kept as they are
# elements (inputs and parameters) a derived case may hold: KernelBench-style swish (64 x 768 here), matmul and
# sum-over-a-dim files check on the CPU in 23-32 s on 2 idle cores, the interpreter's share 7-11 s (tests/fixtures/
# kernelbench; docs/formats.md, "Shrinking"). A self-reference workload gets a quarter (workload.py): its reference is
# interpreted too, and a 128 x 488 ReLU with 128-element blocks took 68 s to check that way on 2 loaded cores
ELEMENT_BUDGET = 2**16
MODULI = (1024, 256, 64, 16)  # remainders kept, the largest that fits the budget first
RESERVED = frozenset({"dtype", "device", "layout"})  # case keys with a meaning of their own
PLAN_KEY = "__klineage_sizes__"  # where a module's plan is kept, in the namespace it rebinds


@dataclass(frozen=True)
class SizePlan:
    """A module's size names: `roots` (assigned a literal integer, or a tuple or list of them, at module level) with
    their values as imported, and `derived` (module-level assignments computed from them), in source order."""

    namespace: dict = field(repr=False, compare=False)
    roots: dict[str, int | tuple[int, ...]]
    derived: tuple[ast.stmt, ...] = field(repr=False, default=())
    filename: str = "<workload>"

    def apply(self, sizes: dict) -> None:
        """Rebind the roots named in `sizes` (the others keep their imported value) and compute the derived names
        again."""
        for name, value in self.roots.items():
            new = sizes.get(name, value)
            self.namespace[name] = (
                tuple(new) if isinstance(value, tuple) else list(new) if isinstance(value, list) else new
            )
        for stmt in self.derived:
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), self.filename, "exec"), self.namespace)


@dataclass(frozen=True)
class Shrunk:
    """A derived case: the sizes rebound (name -> (full, small)), the elements it holds, and the budget."""

    sizes: dict[str, tuple]
    elements: int | None
    budget: int = ELEMENT_BUDGET
    full_elements: int | None = None

    def small(self) -> dict:
        return {name: _jsonable(small) for name, (_, small) in self.sizes.items()}

    def full(self) -> dict:
        return {name: _jsonable(full) for name, (full, _) in self.sizes.items()}

    def line(self) -> str:
        return Shrunk.line_of(self.as_dict())

    @staticmethod
    def line_of(shrunk: dict) -> str:
        """One line: which sizes the derived case uses (from `as_dict`'s record)."""
        full, small = shrunk["full"], shrunk["sizes"]
        changed = ", ".join(f"{n}={_show(small[n])} (full {_show(full[n])})" for n in small if small[n] != full[n])
        count, budget = shrunk.get("elements"), shrunk.get("budget", ELEMENT_BUDGET)
        held = f"{count:,} elements" if count is not None else "elements not counted"
        over = f", over the budget of {budget:,}" if count is not None and count > budget else ""
        return f"case tiny, derived from the full-size get_inputs(): {changed} ({held}{over}); bench stays full size"

    def as_dict(self) -> dict:
        return {
            "case": "tiny",
            "sizes": self.small(),
            "full": self.full(),
            "elements": self.elements,
            "full_elements": self.full_elements,
            "budget": self.budget,
        }


def _jsonable(value):
    return list(value) if isinstance(value, (tuple, list)) else value


def _show(value) -> str:
    return "x".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


# --- finding the sizes --------------------------------------------------------------------------------------------


def size_plan(module: types.ModuleType) -> SizePlan | None:
    """The size names that `get_inputs` (and `get_init_inputs`) of `module` read, in the namespace they read them
    from (for a self-reference workload, the user's inputs file); None when there is no source to read."""
    fn = getattr(module, "get_inputs", None)
    namespace = getattr(fn, "__globals__", None)
    if namespace is None:
        return None
    if isinstance(namespace.get(PLAN_KEY), SizePlan):
        return namespace[PLAN_KEY]
    filename = namespace.get("__file__")
    try:
        tree = ast.parse(Path(filename).read_text())
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    assigns = [s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None]
    roots, derived, derived_names = {}, [], set()
    for stmt in assigns:
        names = _targets(stmt)
        if not names:
            continue
        loads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        if not loads:
            for name in names:
                value = namespace.get(name)
                if _is_size_value(value) and name not in RESERVED:
                    roots[name] = value
                else:
                    roots.pop(name, None)  # rebound to something else later in the file
        elif loads & (set(roots) | derived_names):
            derived.append(stmt)
            derived_names.update(names)
            for name in names:
                roots.pop(name, None)
    used = _names_read(tree, ("get_inputs", "get_init_inputs"))
    for stmt in reversed(derived):  # a derived name that the functions read makes its own inputs read
        if set(_targets(stmt)) & used:
            used |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
    roots = {name: value for name, value in roots.items() if name in used and _shrinkable(value)}
    plan = SizePlan(namespace, roots, tuple(derived), str(filename))
    namespace[PLAN_KEY] = plan
    return plan


def _targets(stmt: ast.stmt) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return names if len(names) == len(targets) else []


def _names_read(tree: ast.Module, functions: tuple[str, ...]) -> set[str]:
    read = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            read |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return read


def _is_size_value(value) -> bool:
    if type(value) is int:
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(type(v) is int for v in value)


def _shrinkable(value) -> bool:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return any(v > FLOOR for v in values)


# --- shrinking one value --------------------------------------------------------------------------------------------


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def shrink_value(v: int, scale: float, modulus: int) -> int:
    """`v` divided by about `scale`, keeping its character (module docstring); at most `v`."""
    if v <= FLOOR:
        return v
    target = v / scale
    if _pow2(v):
        lowest = max(FLOOR, modulus) if v >= modulus else v
        exp = round(math.log2(max(target, 1)))
        return 2 ** min(max(exp, int(math.log2(lowest))), int(math.log2(v)))
    rest = v % modulus
    if rest == 0:  # a multiple of the modulus that is no power of two: k stays no power of two
        k = min(max(round(target / modulus), 3), v // modulus)
        while _pow2(k) and k < v // modulus:
            k += 1
        return modulus * k
    k = min(max(round((target - rest) / modulus), 0 if rest > FLOOR else 1), (v - rest) // modulus)
    new = rest + modulus * k
    return new + modulus if _pow2(new) and new + modulus <= v else new


def _value_map(values: list[int], scale: float, modulus: int) -> dict[int, int]:
    """Each distinct value's small one; ordered as the values are (a larger value never maps below a smaller's)."""
    out, floor = {}, 0
    for v in sorted(set(values)):
        new = shrink_value(v, scale, modulus)
        if new < floor:  # bump it up to the smallest of its character at or above the previous one
            new = min((c for c in _same_character(v, modulus) if c >= floor), default=v)
        out[v], floor = new, max(floor, new)
    return out


def _same_character(v: int, modulus: int):
    if v <= FLOOR:
        yield v
        return
    step = modulus if not _pow2(v) else None
    if step is None:
        e = 0
        while 2**e <= v:
            if 2**e >= min(v, max(FLOOR, modulus)):
                yield 2**e
            e += 1
        return
    rest = v % step
    for k in range(0, v // step + 1):
        c = rest + step * k
        if c > FLOOR and not _pow2(c) and (rest or k >= 3):
            yield c


def _scaled(plan: SizePlan, scale: float, modulus: int) -> dict:
    ints = [v for value in plan.roots.values() for v in (value if isinstance(value, (tuple, list)) else (value,))]
    mapping = _value_map(ints, scale, modulus)
    return {
        name: tuple(mapping[v] for v in value) if isinstance(value, (tuple, list)) else mapping[value]
        for name, value in plan.roots.items()
    }


# --- counting --------------------------------------------------------------------------------------------------------


def footprint(module: types.ModuleType, plan: SizePlan | None, sizes: dict | None, meta: bool = True) -> int | None:
    """Elements the case with `sizes` holds: its inputs and the reference's parameters (not its outputs: the first
    operator run on the meta device costs seconds of imports, in every sandboxed evaluation). None where the inputs
    cannot be made this way."""
    import torch

    try:
        if plan is not None:
            plan.apply(sizes or {})
        with torch.device("meta") if meta else contextlib.nullcontext(), torch.random.fork_rng(devices=[]):
            inputs = list(module.get_inputs())
            init = list(module.get_init_inputs()) if callable(getattr(module, "get_init_inputs", None)) else []
            if meta and any(isinstance(x, torch.Tensor) and x.device.type != "meta" for x in inputs):
                return None  # made on a device of its own choosing: the meta count is not the truth
            total = _elements(inputs)
            try:
                model = module.Model(*init)
                total += sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
            except Exception:
                pass  # a reference that cannot be built this way: its inputs only
        return total
    except Exception:
        return None
    finally:
        if plan is not None:
            plan.apply({})


def _elements(value) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return sum(_elements(v) for v in value)
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values())
    return 0


# --- the derived case ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShrinkResult:
    """What shrinking found for a plain file: a derived case, or why there is none (`note`: a line for the user,
    "" where the full case is small enough as it is)."""

    shrunk: Shrunk | None
    note: str = ""
    full_elements: int | None = None


def derive(module: types.ModuleType, budget: int = ELEMENT_BUDGET) -> ShrinkResult:
    """The derived small case of a plain file (only `get_inputs`), when its full case holds more than `budget`
    elements. The largest modulus whose smallest sizes fit the budget wins; within it, the largest sizes that
    fit. Sizes are tried from the smallest up, so a file counted on the CPU never makes its full-size inputs."""
    plan = size_plan(module)
    full = footprint(module, plan, {})
    if full is not None and full <= budget:
        return ShrinkResult(None, "", full)
    if plan is None or not plan.roots:
        held = f"makes {full:,} elements" if full is not None else "could not be counted on the meta device"
        return ShrinkResult(
            None,
            f"get_inputs() {held} and the file has no module-level integer sizes to shrink: a CPU check runs "
            "it at full size (name its sizes at module level, or give it CASES with a tiny case)",
            full,
        )
    meta = full is not None
    biggest = max(v for value in plan.roots.values() for v in (value if isinstance(value, (tuple, list)) else (value,)))
    scales = [2.0**e for e in range(int(math.log2(biggest)) + 2, -1, -1)]  # smallest sizes first
    chosen = None
    for modulus in MODULI:
        best = None
        for scale in scales:
            sizes = _scaled(plan, scale, modulus)
            count = footprint(module, plan, sizes, meta)
            if count is None or count > budget:
                break
            best = (sizes, count)
        if best is not None:
            chosen = best
            break
    if chosen is None:  # even the smallest sizes are over the budget: take them, and say so
        sizes = _scaled(plan, scales[0], MODULI[-1])
        chosen = (sizes, footprint(module, plan, sizes, meta))
    sizes, count = chosen
    if all(sizes[n] == v for n, v in plan.roots.items()):
        return ShrinkResult(None, "", full)
    pairs = {name: (plan.roots[name], sizes[name]) for name in plan.roots}
    return ShrinkResult(Shrunk(pairs, count, budget, full), "", full)


def rebind(module: types.ModuleType, case: dict) -> None:
    """Give `module`'s size names the values `case` holds for them (a case without sizes: as imported)."""
    plan = size_plan(module)
    if plan is not None and plan.roots and any(k in plan.roots for k in case):
        plan.apply({k: v for k, v in case.items() if k in plan.roots})
