"""Program and workload features: a small fixed vector describing what a program's kernels do (dots, reductions,
exponentials, atomics, loops, masks) and what the workload asks (dtype, compute- or memory-bound bench case). The
memory baseline retrieves past outcomes by it; KLineage reads a kernel's context off it (klineage.likeness) and
discounts a skill's measured effect by how unlike the skill's own context the target is. The roofline regime
(`compute_bound`) is left out where the workload has no roofline extensions: unknown, not memory-bound."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

from klineage.program import Program
from klineage.workload import Workload

FEATURES = {
    "dot": r"tl\.dot\(",
    "reduction": r"tl\.(sum|max|min|argmax|argmin|reduce|cumsum)\(",
    "exp": r"tl\.(exp|exp2|log|log2)\(|libdevice\.",
    "atomic": r"tl\.atomic_",
    "loop": r"\n\s+for .* in (range|tl\.range|tl\.static_range)\(",
    "mask": r"mask=",
    "where": r"tl\.where\(",
    "fp32_cast": r"\.to\(tl\.float32\)",
    "rsqrt": r"rsqrt\(",
    "two_d": r"\[:, None\]",
}


def features(program: Program, workload: Workload | None = None) -> dict[str, float]:
    """A small fixed vector: which constructs the program's kernels use, and the workload's arithmetic intensity."""
    text = "\n".join([program.source, *program.modules.values()])
    out = {name: 1.0 if re.search(pattern, text) else 0.0 for name, pattern in FEATURES.items()}
    if workload is not None:
        case = workload.cases.get(workload.bench_case(), {})
        dtype = case.get("dtype", "")
        out.update({f"dtype_{d}": 1.0 if dtype == d else 0.0 for d in ("float32", "float16", "bfloat16")})
        intensity = _intensity(workload)
        if intensity is not None:  # without the roofline extensions the regime is unknown, not memory-bound
            out["compute_bound"] = 1.0 if intensity > 50 else 0.0
    return out


def _intensity(workload: Workload) -> float | None:
    return _intensity_of(str(workload.path), workload.hash, workload.bench_case())


@functools.lru_cache(maxsize=64)
def _intensity_of(path: str, _hash: str, case_name: str) -> float | None:
    """Flops per byte of the bench case (None without the roofline extensions); the hash keys the cache."""
    from klineage.workload import case_roofline, import_file

    try:
        module = import_file(Path(path), f"_klineage_features_{_hash}")
        found = case_roofline(module, dict(module.CASES[case_name]) if hasattr(module, "CASES") else {})
    except Exception:
        return None
    if not found or not found[1]:
        return None
    return found[0] / found[1]


def similarity(a: dict[str, float], b: dict[str, float]) -> float:
    keys = set(a) | set(b)
    dot = sum(a.get(k, 0.0) * b.get(k, 0.0) for k in keys)
    na = math.sqrt(sum(a.get(k, 0.0) ** 2 for k in keys))
    nb = math.sqrt(sum(b.get(k, 0.0) ** 2 for k in keys))
    return dot / (na * nb) if na and nb else 0.0
