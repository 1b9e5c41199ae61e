"""Two programs in one process, each with its copy of a module that registers `torch.library` operators (the profile
gate times a parent and a child side by side): the second copy registers its operators under namespaces of its own,
so it neither fails (torchao's `torchao::int_matmul`, registered twice, failed every candidate's timing on the H100:
RESULTS.md#wild-quant) nor has its calls dispatched to the first copy's implementation."""

import subprocess
import sys
import textwrap
from pathlib import Path

from klineage.program import own_operator_namespaces

COPY = textwrap.dedent("""
    import torch

    SCALE = {scale}

    @torch.library.custom_op("kltest::scaled", mutates_args=())
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * SCALE

    lib = torch.library.Library("kltest", "FRAGMENT")
    lib.define("shifted(Tensor x) -> Tensor")
    lib.impl("shifted", lambda x: x + SCALE, "CompositeExplicitAutograd")

    def both(x):
        # an operator of its own by name, and one it only uses (aten's)
        return torch.ops.kltest.shifted(scaled(x)), torch.ops.aten.add.Tensor(x, x)
""")

PROGRAM = textwrap.dedent("""
    import torch.nn as nn

    from kltestpkg.ops import both


    class ModelNew(nn.Module):
        def forward(self, x):
            return both(x)
""")


def test_the_operators_a_copy_defines_move_and_the_ones_it_uses_stay():
    renamed = own_operator_namespaces(COPY.format(scale=2), "abc")
    assert '"kltest_kabc::scaled"' in renamed and 'Library("kltest_kabc", "FRAGMENT")' in renamed
    assert "torch.ops.kltest_kabc.shifted(" in renamed and "torch.ops.aten.add.Tensor" in renamed
    assert own_operator_namespaces("import torch\n\ndef f(x):\n    return torch.ops.aten.add(x, x)\n", "abc") == (
        "import torch\n\ndef f(x):\n    return torch.ops.aten.add(x, x)\n"
    )


def test_two_programs_with_copies_of_one_registering_module_run_side_by_side(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from klineage.program import Program, install

        programs = [
            Program(name=f"p{{s}}", source={PROGRAM!r}, modules={{"kltestpkg.ops": {COPY!r}.format(scale=s)}})
            for s in (2, 3)
        ]
        first = install(programs[0]).ModelNew()
        second = install(programs[1]).ModelNew()  # raised: kltest::scaled registered twice
        again = install(programs[1]).ModelNew()  # the same program a second time, in the same process
        x = torch.ones(4)
        print(first(x)[0].tolist(), second(x)[0].tolist(), first(x)[1].tolist(), again(x)[0].tolist())
    """)
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": str(src)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # each program's calls reach its own copy: (1 * 2) + 2 and (1 * 3) + 3; aten's add is aten's
    assert done.stdout.split("\n")[0] == (
        "[4.0, 4.0, 4.0, 4.0] [6.0, 6.0, 6.0, 6.0] [2.0, 2.0, 2.0, 2.0] [6.0, 6.0, 6.0, 6.0]"
    )
