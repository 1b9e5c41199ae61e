"""Shrinking (issue 31): a KernelBench-style file whose only case is full size gets a small case for the CPU, its
module-level sizes rebound with their character kept; the bench case stays full size."""

import pytest

from klineage.shrink import ELEMENT_BUDGET, FLOOR, MODULI, _pow2, shrink_value
from klineage.workload import load_workload, make_case_init_inputs, make_case_inputs
from tests.conftest import FIXTURES

KB = FIXTURES / "kernelbench"


@pytest.mark.parametrize("modulus", MODULI)
def test_a_shrunk_size_keeps_its_character(modulus):
    values = [17, 31, 48, 96, 100, 255, 256, 1000, 1023, 1025, 4095, 4096, 8195, 6144, 393216, 2**20, 3 * 2**20 + 7]
    for v in values:
        for scale in (1, 2, 7, 64, 1000, 2**20, 2**40):
            new = shrink_value(v, scale, modulus)
            assert FLOOR <= new <= v and (_pow2(v) or new > FLOOR)
            assert _pow2(new) == _pow2(v), (v, scale, modulus, new)
            assert new % 2 == v % 2 and (new % 16 == 0) == (v % 16 == 0), (v, scale, modulus, new)
            if not _pow2(v):
                assert new % modulus == v % modulus, (v, scale, modulus, new)
    assert shrink_value(7, 1000, 16) == 7 and shrink_value(16, 1000, 16) == 16  # small sizes are kept


def test_kernelbench_style_files_get_a_small_case_and_keep_the_full_one():
    swish = load_workload(KB / "swish.py")
    assert swish.cases["bench"] == {"batch_size": 4096, "dim": 393216, "device": "cuda"}
    tiny = swish.cases["tiny"]
    assert tiny["batch_size"] * tiny["dim"] <= ELEMENT_BUDGET and tiny["dim"] % 16 == 0 and _pow2(tiny["batch_size"])
    assert swish.check_cases("cpu") == ["tiny"] and swish.check_cases("cuda") == ["tiny", "bench"]
    assert swish.seed_case("cpu") == "tiny" and swish.bench_case() == "bench"
    assert "dim=" in swish.shrunk_line() and "(full 393216)" in swish.shrunk_line()
    matmul = load_workload(KB / "matmul.py")  # sizes written as expressions (1024 * 8) count too
    small = matmul.cases["tiny"]
    assert small["K"] % 2 == 1 and small["N"] % 16 == 0 and not _pow2(small["N"]) and _pow2(small["M"])
    assert small["M"] * small["K"] + small["K"] * small["N"] <= ELEMENT_BUDGET
    reduction = load_workload(KB / "sum_dim.py")
    assert "reduce_dim" not in reduction.cases["tiny"]  # 1 is no size to shrink, and get_init_inputs reads it
    assert reduction.cases["tiny"]["dim2"] % 2 == 1 and reduction.cases["tiny"]["dim1"] % 16 == 0


def test_the_small_case_makes_small_inputs_and_the_reference_sees_its_sizes(tmp_path):
    import torch

    path = tmp_path / "layer.py"
    path.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.ones(n))\n"
        "    def forward(self, x):\n"
        "        return x[:, :hidden] * self.w[:hidden]\n"  # the forward reads a module-level size too
        "batch = 8192\n"
        "width = 8192\n"  # the same value as batch: they stay equal
        "hidden = width // 2\n"  # computed from a size: computed again
        "shape = (batch, width)\n"
        "def get_inputs():\n"
        "    return [torch.randn(*shape)]\n"
        "def get_init_inputs():\n"
        "    return [width]\n"
    )
    wl = load_workload(path)
    tiny = wl.cases["tiny"]
    assert tiny["batch"] == tiny["width"] < 8192
    module = __import__("klineage.workload", fromlist=["import_file"]).import_file(path, "shrunk_layer")
    (x,) = make_case_inputs(module, tiny, 0)
    assert tuple(x.shape) == (tiny["batch"], tiny["width"])
    (n,) = make_case_init_inputs(module, tiny)
    model = module.Model(n)
    assert model(x).shape == (tiny["batch"], tiny["width"] // 2) and module.hidden == tiny["width"] // 2
    with torch.device("meta"):  # the bench case rebinds the full sizes (on meta: nothing is allocated)
        assert tuple(make_case_inputs(module, wl.cases["bench"], 0)[0].shape) == (8192, 8192)
    assert module.hidden == 4096


def test_a_small_file_keeps_its_one_case_and_a_file_without_sizes_says_so(tmp_path):
    small = tmp_path / "small.py"
    small.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "n = 1000\ndef get_inputs():\n    return [torch.randn(16, n)]\n"
    )
    wl = load_workload(small)
    assert wl.cases == {"default": {}} and wl.shrunk is None and wl.shrunk_line() == ""
    fixed = tmp_path / "fixed.py"
    fixed.write_text(small.read_text().replace("torch.randn(16, n)", "torch.randn(4096, 4096)"))
    wl = load_workload(fixed)
    assert wl.cases == {"default": {}}
    line = wl.shrunk_line()
    assert "16,777,216 elements" in line and "no module-level integer sizes to shrink" in line and "\n" not in line


def test_get_init_inputs_is_optional(tmp_path):
    path = tmp_path / "inputs.py"
    path.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(4)]\n"
    )
    wl = load_workload(path)
    module = __import__("klineage.workload", fromlist=["import_file"]).import_file(path, "no_init")
    assert wl.cases == {"default": {}} and make_case_init_inputs(module, {}) == []


def test_check_shows_the_sizes_it_ran_and_says_so_at_once(monkeypatch):
    """The CLI's part, without running a program: the derived case's line comes before the gates run (progress) and
    again under the verdicts."""
    from click.testing import CliRunner

    import klineage.check
    from klineage.check import CheckReport
    from klineage.cli import main
    from klineage.gates import Verdict

    def fake_check(workload, program, settings, device, gates, on_gate=None, inform=False):
        for gate in gates:
            on_gate(gate)
        verdicts = (Verdict("correctness", "pass"),)
        return CheckReport(workload.name, program.name, program.hash, device, "cpu", "sm_90", verdicts, (False,),
                           derived_case=workload.shrunk)  # fmt: skip

    monkeypatch.setattr(klineage.check, "check", fake_check)
    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "1")
    args = ["check", str(KB / "swish.py"), str(KB / "swish_triton.py"), "--device", "cpu", "--gates", "correctness"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = next(i for i, line in enumerate(lines) if "case tiny, derived" in line)
    gate = next(i for i, line in enumerate(lines) if "correctness gate: case tiny (batch_size=" in line)
    assert lines[0].endswith("checking swish_triton on cpu against swish") and first < gate
    assert "(full 393216)" in lines[-2] or any("(full 393216)" in line for line in lines[gate + 1 :])
