"""`klineage check --sanitize`: the candidate once on its tiny case under compute-sanitizer's memcheck, on a GPU.

A separate step after the gates, kept out of the verdict cache: on the GPU the guard regions see a stray store only
within their 64 KiB of poison (no page protection on device memory), memcheck sees any access outside an allocation
the CUDA driver knows. It does not see a store that stays inside the caching allocator's rounding, which the poison
does: the two complement each other.

The candidate runs in a fresh Python under compute-sanitizer (`python -m klineage.sanitize WORKLOAD PROGRAM_DIR`),
confined like a gate's candidate except for the network and PID namespaces: compute-sanitizer talks to the process
it watches over loopback TCP (its `--port`) and follows it by pid.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from klineage.config import clip
from klineage.program import Program

SANITIZER_ERROR = "sanitizer_error"
# memcheck's own exit on an error found (--error-exitcode): distinct from a Python error in the candidate (1)
ERROR_EXIT = 86


@dataclass(frozen=True)
class SanitizeResult:
    status: str  # "pass", "fail" (memcheck found errors), "skip" (no GPU or no compute-sanitizer), "error"
    code: str  # "", SANITIZER_ERROR, "no_gpu", "no_sanitizer", "sanitizer_failed"
    detail: str  # one line
    log: str = ""  # memcheck's report, its tail

    @property
    def passed(self) -> bool:
        return self.status in ("pass", "skip")

    def line(self) -> str:
        return f"sanitize: {self.status}" + (f" ({self.code})" if self.code else "") + f": {self.detail}"


def find_sanitizer() -> str | None:
    """compute-sanitizer from PATH, the CUDA toolkit, or the NVIDIA pip wheel (nvidia-cuda-sanitizer-api)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda", "/opt/cuda"]
    candidates = [f"{r}/bin/compute-sanitizer" for r in roots if r] + [
        f"{r}/compute-sanitizer/compute-sanitizer" for r in roots if r
    ]
    candidates += sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"), reverse=True)
    for site in sys.path:
        candidates += glob.glob(f"{site}/nvidia/*/bin/compute-sanitizer")  # 13.x: nvidia/cu13/bin
        candidates += glob.glob(f"{site}/nvidia/cuda_sanitizer_api/compute-sanitizer/compute-sanitizer")  # 12.x
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def sanitize(workload_path: Path, program: Program, gpu: bool, timeout_s: float = 600) -> SanitizeResult:
    """Run `program` once on the workload's tiny case under memcheck. Never raises."""
    if not gpu:
        return SanitizeResult("skip", "no_gpu", "no CUDA GPU here: compute-sanitizer needs one")
    tool = find_sanitizer()
    if tool is None:
        return SanitizeResult(
            "skip", "no_sanitizer", "compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda, nvidia pip wheels)"
        )
    with tempfile.TemporaryDirectory(prefix="klineage-sanitize-") as scratch:
        program.write(Path(scratch) / "program")
        command = [
            tool,
            "--tool",
            "memcheck",
            "--error-exitcode",
            str(ERROR_EXIT),
            "--print-limit",
            "20",
            sys.executable,
            "-m",
            "klineage.sanitize",
            str(Path(workload_path).resolve()),
            str(Path(scratch) / "program"),
        ]
        try:
            # every tensor its own cudaMalloc: within one of the caching allocator's 2 MiB segments a stray store
            # lands in memory the driver counts as allocated, and memcheck does not see it (a store 96 KiB past a
            # 4 KB output: tests/adversarial/programs/stray_store_far.py)
            env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=scratch, env=env)
        except subprocess.TimeoutExpired:
            return SanitizeResult("error", "sanitizer_failed", f"no result within {timeout_s:.0f} s")
        except OSError as e:
            return SanitizeResult("error", "sanitizer_failed", f"{tool}: {e}")
    return result_of(run.returncode, run.stdout + run.stderr)


def result_of(returncode: int, output: str) -> SanitizeResult:
    """Read memcheck's exit and report: errors found, a clean run, or a run that never got to the end."""
    tail = "\n".join(output.splitlines()[-60:])
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output)
    errors = int(summary.group(1)) if summary else None
    if returncode == ERROR_EXIT or (errors or 0) > 0:
        first = re.search(r"=+ (Invalid [^\n]*|Program hit [^\n]*|[^\n]*out of bounds[^\n]*)", output)
        what = first.group(1).strip() if first else "see the log"
        return SanitizeResult("fail", SANITIZER_ERROR, f"memcheck found {errors or 'some'} errors; first: {what}", tail)
    if returncode == 0 and errors == 0:
        return SanitizeResult("pass", "", "memcheck: 0 errors on the tiny case", tail)
    last = output.strip().splitlines()[-1] if output.strip() else "no output"
    return SanitizeResult("error", "sanitizer_failed", f"exit {returncode}: {clip(last, 2000)}", tail)


def _run_candidate(workload_path: str, program_dir: str) -> None:
    """The watched process: confined, then the program's forward once on the tiny case (seed 0) on the GPU."""
    import torch

    from klineage.isolation import Confinement, confine, make_private_dir
    from klineage.program import install, load_program
    from klineage.workload import import_file, make_case_init_inputs, make_case_inputs, on_device, workload_from_module

    path = Path(workload_path)
    wl_module = import_file(path, "klineage_workload")
    workload = workload_from_module(path, path.read_text(), wl_module)
    program = load_program(Path(program_dir))
    private = make_private_dir()
    report = confine(Confinement(str(private), device="cuda", network_namespace=False, pid_namespace=False))
    print(report.describe(), file=sys.stderr)
    case = workload.cases["tiny" if "tiny" in workload.cases else next(iter(workload.cases))]
    module = install(program, private / "program")
    torch.manual_seed(42)
    model = module.ModelNew(*make_case_init_inputs(wl_module, case)).cuda()
    inputs = [on_device(x, "cuda") for x in make_case_inputs(wl_module, case, 0)]
    with torch.no_grad():
        model(*inputs)
    torch.cuda.synchronize()


if __name__ == "__main__":
    _run_candidate(sys.argv[1], sys.argv[2])
