"""benchmarks/h200_wild.sh's queue closer (`CLOSE_MIN`; its `close DELAY_S`): every instance of INSTANCES no shard
has claimed is claimed in the bench queue's own format, so a shard's Queue takes none of them, and a claim a shard
holds stays as it was."""

import os
import subprocess
from pathlib import Path

from klineage.bench.run import Queue

ROOT = Path(__file__).resolve().parents[2]


def test_closing_the_queue_leaves_the_shards_nothing_to_take(tmp_path):
    results = tmp_path / "results"
    (results / "queue").mkdir(parents=True)
    held = results / "queue" / "gems_sort.claim"
    held.write_text("gems_sort pid 7 (a shard's)\n")
    env = {
        **os.environ,
        "RESULTS": str(results),
        "OUT": str(tmp_path / "out"),
        "INSTANCES": "gems_sort,gems_tril,tk_add_vectors",
    }
    done = subprocess.run(
        ["bash", "benchmarks/h200_wild.sh", "close", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert held.read_text() == "gems_sort pid 7 (a shard's)\n"
    assert "queue closed, 2 not started: gems_tril,tk_add_vectors" in (results / "stages.txt").read_text()
    queue = Queue(results / "queue")
    assert [queue.claim(n) for n in ("gems_sort", "gems_tril", "tk_add_vectors")] == [False, False, False]
    assert queue.claim("gems_flip")  # not among INSTANCES: still open
