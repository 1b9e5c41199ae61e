"""Where a bench run's time went: per method, the attempts, the wall seconds each took (gates and timing, waits
for a shared GPU included), how many effects were reused from another method of the same instance, and the runs'
total seconds. Reads one or more bench.json reports (a shard's folder or the file). A report, not a test.

    python benchmarks/bench_costs.py REPORT [REPORT ...]"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def costs(results: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for result in results:
        for key, t in result["trajectories"].items():
            m = out.setdefault(key.rsplit("/", 1)[1], {"runs": 0, "seconds": 0.0, "attempts": [], "reused": 0})
            m["runs"] += 1
            m["seconds"] += t.get("seconds") or 0.0
            for a in t["attempts"]:
                if "seconds" in a:
                    m["attempts"].append(a["seconds"])
                m["reused"] += bool(a["effect"].get("reused"))
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    paths = [Path(p) / "bench.json" if Path(p).is_dir() else Path(p) for p in sys.argv[1:]]
    if not paths:
        raise SystemExit(__doc__)
    results = [json.loads(p.read_text()) for p in paths]
    print("| method | runs | run seconds (total) | attempts with seconds | s per attempt, median | p80 | "
          "reused effects |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for method, m in costs(results).items():
        a = m["attempts"]
        median = f"{statistics.median(a):.1f}" if a else "n/a"  # reports before attempts had seconds: n/a
        p80 = f"{_quantile(a, 0.8):.1f}" if a else "n/a"
        print(f"| {method} | {m['runs']} | {m['seconds']:.0f} | {len(a)} | {median} | {p80} | {m['reused']} |")


if __name__ == "__main__":
    main()
