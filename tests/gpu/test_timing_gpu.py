"""The timer on a real GPU: a call whose host path takes longer to queue than the L2 flush runs gets a device-side
wait in front of it, so the idle time before its launch is not timed (timing._time_calls)."""

import time

import pytest

from klineage import timing

pytestmark = pytest.mark.gpu


def test_a_call_slow_to_queue_is_timed_for_its_kernel_not_its_host_path():
    import torch

    x = torch.ones(1 << 16, device="cuda")

    def slow_to_queue():  # a wrapper that spends 0.5 ms on the host before its one small kernel
        until = time.perf_counter() + 0.5e-3
        while time.perf_counter() < until:
            pass
        x.add_(1.0)

    def quick():
        x.add_(1.0)

    slow, fast = timing._time_calls([slow_to_queue, quick], warmup_ms=20.0, rep_ms=50.0, min_reps=30)
    assert slow.host_launch_ms >= 0.45 and fast.host_launch_ms < 0.45
    # without the wait the GPU sat idle after `begin` for the host's 0.5 ms less the flush's ~0.13 ms
    assert slow.median_ms < 0.2, slow
    assert slow.median_ms < 3 * fast.median_ms + 0.02, (slow, fast)
    assert slow.launch_bound < 0.5, slow
