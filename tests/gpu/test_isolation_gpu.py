"""The candidate's confinement and `--sanitize` on a real GPU: CUDA and Triton work in a confined child (RLIMIT_DATA,
uid nobody, mount/net/PID namespaces), host memory past the limit is refused, and memcheck catches a far store."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.isolation import Confinement, IsolationReport, confine, make_private_dir, remove_private_dir
from klineage.program import load_program
from klineage.sanitize import SANITIZER_ERROR, find_sanitizer, sanitize
from tests.adversarial.manifest import ROOT

pytestmark = pytest.mark.gpu

SCALE_ADD = ROOT / "workloads" / "scale_add.py"


def _in_confined_child(private: Path) -> tuple[IsolationReport, dict]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x, y, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)

    def kernel() -> float:
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        add_one[(4,)](x, y, 1000, BLOCK=256)
        return float((y - x).mean())

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            report = confine(Confinement(str(private), device="cuda", memory_bytes=4 << 30, keep_fds=(2, write)))
            got = {}
            for name, action in {
                "kernel": kernel,
                "device_8g": lambda: torch.empty(8 << 30, dtype=torch.uint8, device="cuda").numel(),
                "host_8g": lambda: torch.empty(8 << 30, dtype=torch.uint8).numel(),
            }.items():
                try:
                    got[name] = ["ok", action()]
                except BaseException as e:  # noqa: BLE001
                    got[name] = ["error", f"{type(e).__name__}: {e}"]
            os.write(write, json.dumps({"report": report.to_json(), "got": got}).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    answer = json.loads(data)
    return IsolationReport.from_json(answer["report"]), answer["got"]


def _probe() -> None:
    """Run in a fresh interpreter (pytest's has initialized CUDA, which a forked child could then not use)."""
    private = make_private_dir()
    try:
        report, got = _in_confined_child(private)
    finally:
        remove_private_dir(private)
    print(json.dumps({"report": report.to_json(), "got": got}))


def test_cuda_and_triton_work_confined_and_host_memory_is_bounded():
    code = "from tests.gpu.test_isolation_gpu import _probe; _probe()"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    answer = json.loads(run.stdout.strip().splitlines()[-1])
    report, got = IsolationReport.from_json(answer["report"]), answer["got"]
    assert got["kernel"] == ["ok", 1.0], (report.describe(), got)
    assert got["device_8g"][0] == "ok", got  # RLIMIT_DATA leaves device memory alone
    assert got["host_8g"][0] == "error" and "can't allocate memory" in got["host_8g"][1], got
    assert all(m.applied for m in report.mechanisms if m.name in ("uid", "mountns", "netns", "pidns")), report


FAR_STORE = """
import torch
import triton
import triton.language as tl


@triton.jit
def _far(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
    tl.store(out_ptr + offs + (1 << 24), 1.0, mask=m)  # 64 MiB past the output: outside any allocation


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        _far[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
        return out
"""


@pytest.mark.skipif(find_sanitizer() is None, reason="compute-sanitizer not found")
def test_sanitize_fails_a_far_store_and_passes_the_control(tmp_path):
    far = tmp_path / "far_store.py"
    far.write_text(FAR_STORE)
    bad = sanitize(SCALE_ADD, load_program(far), gpu=True)
    assert (bad.status, bad.code) == ("fail", SANITIZER_ERROR), bad.line()
    good = sanitize(SCALE_ADD, load_program(ROOT / "controls" / "scale_add_ok.py"), gpu=True)
    assert good.status == "pass", good.line() + "\n" + good.log
