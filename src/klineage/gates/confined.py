"""The reference of a self-reference workload, computed in a confined process of its own.

A self-reference workload's reference is an existing program (klineage.reference): someone else's code, such as
FlagGems, which asks the CUDA driver at import. It must not run in the judge, which holds the verdict cache and the
data directory, and the judge of a CPU check has no CUDA to give it. So the judge forks a *reference process*: a
candidate process (gates.candidate: the same confinement, CUDA mapped to the CPU on the CPU) serving the original
program with `reference` requests only, a plain forward with no guards, since it is not what is judged. The judge
sends it the inputs it made and receives its outputs and in-place results as values: nothing it returns is executed
or unpickled. It shares nothing writable with the candidate (its own private directory, a private Triton cache), so
the candidate cannot influence the reference; a reference that fails is `reference_error`, never a candidate's
code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from klineage.gates.candidate import (
    Candidate,
    CandidateGone,
    Spec,
    hidden_paths,
    package_root,
    start,
)
from klineage.isolation import site_dirs
from klineage.wire import WireError, pack_values, tensor

REFERENCE_ERROR = "reference_error"


class ReferenceUnavailable(RuntimeError):
    """The reference process could not be started (its program is gone, did not import, or never said hello)."""


def declared_reference(workload: Path) -> str | None:
    """The original program a self-reference workload names (`REFERENCE_PROGRAM`, a literal path: klineage.reference
    writes it), read from its text as gates.candidate.declared_reads reads READS: the judge forks the reference
    process before it imports the workload. None for any other workload."""
    import ast

    try:
        tree = ast.parse(Path(workload).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "REFERENCE_PROGRAM" for t in node.targets
        ):
            value = node.value.value if isinstance(node.value, ast.Constant) else None
            return value if isinstance(value, str) else None
    return None


def reference_spec(request) -> Spec | None:
    """The Spec of the reference process for a gate request whose workload names an original program
    (REFERENCE_PROGRAM, read from the workload's text); None for any other workload. No kernel cache shared with
    anyone (a candidate's cache could hold a cubin it planted), nothing of the data directory or home readable."""
    from klineage.program import load_program

    path = declared_reference(Path(request.workload_path))
    if path is None:
        return None
    program = load_program(path)
    return Spec(
        program,
        request.device,
        request.settings.guard_bytes,
        hidden=hidden_paths(request.settings),
        needs=(package_root(), *site_dirs(imported_packages(program.source))),
        kernel_cache=None,
        device_memory=request.settings.candidate_device_memory,
        reference=True,
        turns=request.settings.gpu_turns,
    )


def imported_packages(source: str) -> set[str]:
    """The top-level packages a program's source imports (absolute imports, anywhere in the file): the reference
    process may read the site directories that hold them, by the one rule (isolation.site_dirs), though one holds
    no dist-info (a package on PYTHONPATH, as a test's tiny one under /tmp)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def fork_reference(request) -> Candidate | ReferenceUnavailable | None:
    """The reference process for `request`, forked and not yet greeted (`reference_ready` waits for it): the
    correctness and profile gates fork it while their candidate imports its program (gates.candidate.judged).
    None where the workload has no original program; where the original cannot be read, why, as a value (the
    gate fails as `reference_error` once its candidate is up)."""
    from klineage.workload import UserError

    try:
        spec = reference_spec(request)
    except (UserError, OSError) as e:
        return ReferenceUnavailable(f"the reference program cannot be read: {e}")
    if spec is None:
        return None
    return start(spec, greet=False)


def reference_ready(forked: Candidate | ReferenceUnavailable | None) -> Candidate | None:
    """The forked reference process once it said hello (None: no reference). Raises ReferenceUnavailable with one
    line where it did not start: the caller fails the gate as `reference_error`; whoever forked it ends it."""
    if forked is None:
        return None
    if isinstance(forked, ReferenceUnavailable):
        raise forked
    try:
        hello = forked.greet()
    except CandidateGone as e:
        raise ReferenceUnavailable(f"the reference process ended before it started: {e.detail}") from None
    if hello.get("import_error"):
        raise ReferenceUnavailable(f"the original program {forked.program_path}: {hello['import_error']}")
    return forked


@dataclass(frozen=True)
class ConfinedModel:
    """The reference built for one case in the reference process. Called as a model is: the inputs go there, its
    outputs come back as fresh tensors on `device`, and its in-place results are copied into the inputs given
    (gates.correctness compares a mutated input with the reference's)."""

    process: Candidate
    case: str
    device: str

    def __call__(self, *inputs) -> list:
        import torch

        tensors, described = pack_values(list(inputs), "in")
        frame = _asked(self.process, {"op": "reference", "case": self.case, "inputs": described}, tensors)
        try:
            outputs = [_value(frame, item, self.device) for item in frame.meta["outputs"]]
            after = [
                tensor(frame, f"in{i}", str(x.dtype).removeprefix("torch."), tuple(x.shape), self.device)
                if isinstance(x, torch.Tensor)
                else x
                for i, x in enumerate(inputs)
            ]
        except (WireError, KeyError, TypeError, ValueError) as e:
            raise CandidateGone(REFERENCE_ERROR, f"the reference's answer does not hold what was asked: {e}") from None
        for x, y in zip(inputs, after):
            if isinstance(x, torch.Tensor):
                x.copy_(y)
        return outputs

    def to(self, device) -> ConfinedModel:  # built on the check's device already, in the reference process
        return self

    def cuda(self) -> ConfinedModel:
        return self


def confined_model(process: Candidate, case: str, init: list, device: str) -> ConfinedModel:
    """The reference for `case`, built from its init inputs in the reference process (as `build` builds one)."""
    tensors, described = pack_values(init, "init")
    _asked(process, {"op": "init", "case": case, "init": described}, tensors, body_limit=0)
    return ConfinedModel(process, case, device)


def _asked(process: Candidate, meta: dict, tensors: dict, body_limit: int = 2**34):
    """One request to the reference process; whatever goes wrong there is the reference's, said as such."""
    try:
        return process.request(meta, tensors, body_limit=body_limit)
    except CandidateGone as e:
        raise CandidateGone(REFERENCE_ERROR, f"the reference (the original program): {e.code}: {e.detail}") from None


def _value(frame, item: dict, device: str):
    """One output as pack_values described it: a tensor built from the frame's bytes, a JSON value, or a stand-in
    of the type named (compared, it fails as not a tensor)."""
    if "tensor" in item:
        return tensor(frame, str(item["tensor"]), device=device)
    if "value" in item:
        return item["value"]
    return type(str(item.get("type", "object"))[:64], (), {})()
