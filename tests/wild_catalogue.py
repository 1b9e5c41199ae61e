"""What every wild catalogue's entry must be (klineage.suites.wild, klineage.suites.wild_quant): files that parse as a
program, an inputs file and a PyTorch workload, with the sizes it declares, at a bench size of at least
`min_elements`."""

import ast
import math

from klineage.suites.wild import WildKernel


def assert_wellformed(k: WildKernel, min_elements: int) -> None:
    program = ast.parse(k.program_source())
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in program.body), k.name
    inputs = ast.parse(k.inputs_source())
    sizes = {
        t.id: n.value.value
        for n in inputs.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
    }
    assert sizes == k.sizes and all(isinstance(v, int) for v in sizes.values()), k.name
    assert any(isinstance(n, ast.FunctionDef) and n.name == "get_inputs" for n in inputs.body), k.name
    # the program is a user's file of its own: it cannot read the inputs file's sizes
    names = [n for n in ast.walk(program) if isinstance(n, ast.Name)]
    read = {n.id for n in names if isinstance(n.ctx, ast.Load)} - {n.id for n in names if isinstance(n.ctx, ast.Store)}
    assert not read & set(k.sizes), k.name
    reference = ast.parse(k.pytorch_source())
    assert any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in reference.body), k.name
    # bench size: the CPU case is shrinking's to derive, so the file itself is a GPU-size case
    assert math.prod(k.sizes.values()) >= min_elements, k.name
