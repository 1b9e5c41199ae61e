"""The files a workload declares it reads (`READS`), found in its text without importing it: the self-reference
workload's original program and inputs file become readable to a confined candidate that imports the workload."""

from pathlib import Path

from klineage.gates.candidate import declared_reads
from klineage.program import load_program
from klineage.reference import self_reference_workload


def test_a_self_reference_workload_declares_its_program_and_inputs(tmp_path):
    program = tmp_path / "mine.py"
    source = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    program.write_text(source)
    inputs = tmp_path / "inputs.py"
    inputs.write_text("import torch\n\ndef get_inputs():\n    return [torch.ones(4)]\n")
    path = self_reference_workload(inputs, load_program(program), tmp_path / "data")
    assert declared_reads(path) == [str(program.resolve()), str(inputs.resolve())]


def test_only_a_literal_list_of_paths_counts(tmp_path):
    computed = tmp_path / "computed.py"
    computed.write_text("import os\nREADS = [os.environ['HOME']]\n")
    broken = tmp_path / "broken.py"
    broken.write_text("READS = [\n")
    plain = tmp_path / "plain.py"
    plain.write_text("READS = ['/etc/hostname', 3]\n")
    assert declared_reads(computed) == []
    assert declared_reads(broken) == []
    assert declared_reads(Path(plain)) == [str(Path("/etc/hostname").resolve())]
