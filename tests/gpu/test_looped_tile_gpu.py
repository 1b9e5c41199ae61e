"""looped_tile on a GPU: the group norm of test_looped_tile at FlagGems's bench shape (a group of 32 channels x 4096
positions), where the dispatch takes the looped twin, computes what torch's group norm does, and so does the twin
forced to sweep narrow tiles on an odd size."""

import importlib.util

import pytest
import torch

from klineage.transforms.looped_tile import LoopedTile
from tests.transforms.test_looped_tile import SIMPLE

pytestmark = pytest.mark.gpu


def _module(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}.py"  # a file: triton.jit reads its kernel's source
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape", [(4, 128, 4096), (3, 96, 4999)], ids=["bench", "odd"])
def test_the_looped_group_norm_matches_torch(shape, tmp_path):
    t = LoopedTile()
    source = t.optimize(SIMPLE, t.optimize_sites(SIMPLE)[0], {})
    module = _module(tmp_path, source, f"group_looped_{shape[2]}")
    x = torch.randn(*shape, device="cuda")
    groups = 4
    y, mean = module.group(x, groups)
    torch.cuda.synchronize()
    ref = torch.nn.functional.group_norm(x, groups, eps=1e-5)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean, x.view(shape[0] * groups, -1).mean(dim=1), rtol=1e-4, atol=1e-5)
