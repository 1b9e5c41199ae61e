"""config_knobs on a GPU: the autotuner over a config list built at run time launches its pick at the warps the
rewrite set, and the rows' maxima are what they were."""

import importlib.util

import pytest
import torch

from klineage.transforms.config_knobs import ConfigKnobs
from tests.interpreter.test_config_knobs_gates import _run_time_list

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("warps", ["8", "16"])
def test_the_autotuners_pick_runs_at_the_warps_set(warps, tmp_path):
    start = _run_time_list()
    t = ConfigKnobs()
    (site,) = t.optimize_sites(start.source)
    path = tmp_path / f"rowmax_w{warps}.py"  # a file: triton.jit reads its kernel's source
    path.write_text(t.optimize(start.source, site, {"num_warps": warps}))
    spec = importlib.util.spec_from_file_location(f"rowmax_w{warps}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(512, 3000, device="cuda")
    y = module.ModelNew()(x)
    torch.cuda.synchronize()
    assert torch.equal(y, x.amax(dim=1))
    assert module.rowmax_kernel.best_config.num_warps == int(warps)
    assert {c.num_warps for c in module.rowmax_kernel.configs} == {int(warps)}
