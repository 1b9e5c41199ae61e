"""Why a wild instance did not start, classified: a bug in the kernel, or a limit of ours.

The rule, written down before the first run (docs/RESULTS.md, "The wild suite"): a rejection is a **kernel bug**
when the program as written, checked against PyTorch's own op on the same inputs (the suite's `pytorch.py`), fails
the correctness gate on the values it returns: a code of VALUE_CODES (wrong, NaN where PyTorch has none, a wrong
shape, different on a second run, an input it should not write, an output it never wrote). Everything else is **our
limit**: the program does not import where we import it, times out under the interpreter, returns an output that a
host copy made (provenance), raises in a harness we wrote, or passes against PyTorch's op (then our self-reference
refused a correct kernel). A rejection with no PyTorch check (an instance outside the wild suite) is unclassified."""

from __future__ import annotations

import re

from klineage.config import Settings, clip
from klineage.sandbox import Sandbox

VALUE_CODES = frozenset(
    {
        "mismatch",
        "nan_mismatch",
        "shape_mismatch",
        "nondeterministic",
        "input_mutated",
        "unwritten_output",
        "stale_output",
    }
)
KERNEL_BUG, OUR_LIMIT, UNCLASSIFIED = "kernel bug", "our limit", "unclassified"
_GATE_CODE = re.compile(r"fails its (\w+) gate \((\w+):")


def against_pytorch(inst, settings: Settings, device: str, sandbox: Sandbox) -> dict | None:
    """The instance's start checked (correctness only) against PyTorch's own op: status, code, reason; None where
    the instance names no PyTorch workload."""
    from klineage.check import check
    from klineage.workload import UserError, load_workload

    path = inst.origin.get("pytorch")
    if not path:
        return None
    try:
        report = check(load_workload(path), inst.start, settings, device, ("correctness",), sandbox)
    except UserError as e:
        return {"status": "error", "code": "workload_error", "reason": clip(str(e), 500)}
    verdict = report.verdict("correctness") or report.verdicts[0]  # a static refusal is the only verdict
    return {
        "status": verdict.status,
        "code": verdict.code,
        "reason": clip(verdict.reason, 500),
        "seconds": round(verdict.seconds, 1),
    }


def classify(stage: str, why: str, checked: dict | None) -> dict:
    """A rejection at `stage` ("load" or "start") with its message `why`, classified by the rule above from the
    PyTorch check (`against_pytorch`'s record)."""
    found = _GATE_CODE.search(why)
    gate, code = (found.group(1), found.group(2)) if found else (None, "import_error" if stage == "load" else None)
    if checked is None:
        verdict = UNCLASSIFIED
    elif checked["status"] == "fail" and checked["code"] in VALUE_CODES:
        verdict = KERNEL_BUG
    else:
        verdict = OUR_LIMIT
    return {
        "stage": stage,
        "gate": gate,
        "code": code,
        "class": verdict,
        "against_pytorch": None if checked is None else f"{checked['status']} {checked.get('code') or ''}".strip(),
        "why": clip(why, 500),
    }
