"""KLineage's first candidates on every bench instance, from a run's libraries, without a GPU: what a change to the
library or to the proposer's ranking changes before any evaluation is spent.

    python benchmarks/first_candidates.py .state/run26prior [--without exp2_folded_scale,masked_stage_split] \
        [--top 4] [--json OUT] [--suite naive,experts,heldout | wild] [--library DIR]

PRIOR holds the experts' data directories (home-*/library, home-*/lineages), as the H200 pipeline keeps them.
`--library DIR`: one merged library instead (a wild run's `home/library`); PRIOR then only gives the experts suite
its lineages, and may be any folder. `--suite wild` ranks on the wild suite (FlagGems installed, `GEMS_VENDOR` set).
`--without` leaves skills of those transforms out (the library before they were mined). The proposer ranks as on
the CPU: launch-configuration neighbourhoods, which only a GPU run searches, are not listed. Compare two outputs
with `diff`."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from klineage.bench.suites import suite
from klineage.config import Settings
from klineage.library import Library
from klineage.proposers import SkillProposer
from klineage.workload import load_workload


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prior", type=Path)
    parser.add_argument("--without", default="", help="comma-separated transform ids whose skills are left out")
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--suite", default="naive,experts,heldout")
    parser.add_argument("--library", type=Path, default=None, help="a merged library instead of PRIOR's")
    args = parser.parse_args()
    homes = sorted(args.prior.glob("home-*"))
    if not homes and args.library is None:
        print(f"first_candidates: no home-* data directory in {args.prior}", file=sys.stderr)
        return 2
    left_out = {t for t in args.without.split(",") if t}
    skills = []
    with tempfile.TemporaryDirectory() as tmp:
        lineages = Path(tmp) / "lineages"  # the experts suite reads the lineages' simplest forms from here
        lineages.mkdir()
        for home in homes:
            if (home / "lineages").is_dir():
                shutil.copytree(home / "lineages", lineages, dirs_exist_ok=True)
        for folder in [args.library] if args.library is not None else [home / "library" for home in homes]:
            with Library(folder) as library:
                skills += [s for s in library.list() if s.transform["id"] not in left_out]
        settings = Settings(data_dir=Path(tmp))
        out = {}
        for instance in suite(args.suite, settings):
            workload = load_workload(instance.workload)
            ranked = SkillProposer(workload, settings, "cpu", skills).propose(instance.start)
            out[instance.name] = [f"{c.label} (expected x{c.expected:.2f})" for c in ranked[: args.top]]
    for name, labels in out.items():
        print(f"{name}: " + "; ".join(labels))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
