"""benchmarks/wild_ledger.py: the newest report with every method wins per instance; what it sums up to follows the
bench's own rules (an escape credited x1.0, the re-time preferred)."""

import gzip
import json

from benchmarks.wild_ledger import cost_seconds, ledger, main, queue_order, reports
from tests.unit.test_wild_suite import _row

METHODS = ["klineage", "blind"]


def _report(path, date, rows, device="NVIDIA H100 80GB HBM3", gz=False):
    result = {
        "stamp": {"device": device, "date": date, "commit": date[-2:], "timed": True, "budget": 4},
        "rows": rows,
        "trajectories": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if gz else open)(path, "wt") as f:
        json.dump(result, f)


def test_the_newest_complete_report_wins_and_escapes_count_as_the_start(tmp_path):
    _report(
        tmp_path / "a/bench.json",
        "2026-12-01",
        [_row("gems_x", "klineage", 1.5, None), _row("gems_x", "blind", 1.2, None)],
    )
    # newer, but without blind: not a comparison, so the older rows stand
    _report(tmp_path / "b/bench.json", "2026-12-02", [_row("gems_x", "klineage", 3.0, None)])
    # newer and complete for another instance; KLineage's row escaped
    _report(
        tmp_path / "c/bench.json.gz",
        "2026-12-03",
        [_row("ao_y", "klineage", 2.0, 1.9, escapes=[{"seed": 1}]), _row("ao_y", "blind", 1.1, 1.2)],
        gz=True,
    )
    # a CPU run is not a timing
    _report(
        tmp_path / "d/bench.json",
        "2026-12-04",
        [_row("gems_x", "klineage", 9, None), _row("gems_x", "blind", 9, None)],
        "cpu",
    )
    out = ledger(tmp_path, METHODS)
    table = {t["instance"]: t for t in out["table"]}
    assert table["gems_x"]["klineage"] == 1.5 and table["gems_x"]["commit"] == "01"
    assert table["ao_y"]["klineage"] == 1.0  # the escape is credited with its start
    assert table["ao_y"]["blind"] == 1.2  # the fresh-process re-time, not the reported 1.1
    assert out["summary"]["klineage"]["escapes"] == 1
    assert abs(out["summary"]["blind"]["geomean_final"] - (1.2 * 1.2) ** 0.5) < 1e-9
    assert out["reports_read"] == 3


def test_a_device_or_commit_filter_keeps_each_instances_newest_row_there(tmp_path):
    _report(
        tmp_path / "h100/bench.json",
        "2026-12-01",
        [_row("gems_x", "klineage", 1.5, None), _row("gems_x", "blind", 1.2, None)],
    )
    _report(
        tmp_path / "h200/bench.json",
        "2026-12-02",
        [_row("gems_x", "klineage", 1.1, None), _row("gems_x", "blind", 1.3, None)],
        "NVIDIA H200",
    )
    assert ledger(tmp_path, METHODS)["table"][0]["klineage"] == 1.1  # newest of any kind
    h100 = ledger(tmp_path, METHODS, "h100")
    assert h100["table"][0]["klineage"] == 1.5 and h100["devices"] == {"NVIDIA H100 80GB HBM3": 1}
    assert ledger(tmp_path, METHODS, "B200")["instances"] == 0
    # a commit's parts (the stamps' commits here are the dates' last two digits)
    assert ledger(tmp_path, METHODS, commit="01")["table"][0]["klineage"] == 1.5
    assert ledger(tmp_path, METHODS, commit="03")["instances"] == 0


def test_the_queue_order_puts_the_longest_first_and_the_untimed_at_the_upper_quartile(tmp_path):
    rows = [
        {**_row("gems_a", "klineage", 1.0, None), "seconds": 10.0},
        {**_row("gems_b", "klineage", 1.0, None), "seconds": 300.0},
        {**_row("gems_c", "klineage", 1.0, None), "seconds": 100.0},
        {**_row("gems_d", "klineage", 1.0, None), "seconds": 40.0},
    ]
    _report(tmp_path / "a/bench.json", "2026-12-01", rows)
    # a newer report re-costs gems_a, its escapes re-check included
    _report(tmp_path / "b/bench.json", "2026-12-02", [{**_row("gems_a", "blind", 1.0, None), "seconds": 150.0}])
    result = json.loads((tmp_path / "b/bench.json").read_text())
    result["costs"] = {"gems_a": {"references_s": 20.0, "escapes_s": 30.0}}
    (tmp_path / "b/bench.json").write_text(json.dumps(result))
    costs = cost_seconds(reports(tmp_path))
    assert costs["gems_a"] == 200.0
    # known: 40, 100, 200, 300; the upper quartile is 300, the untimed gems_e ties gems_b and keeps its place after it
    assert queue_order(["gems_a", "gems_b", "gems_c", "gems_d", "gems_e"], costs) == [
        "gems_b",
        "gems_e",
        "gems_a",
        "gems_c",
        "gems_d",
    ]


def test_the_queue_order_of_named_instances_keeps_only_those(tmp_path, capsys):
    _report(tmp_path / "a/bench.json", "2026-12-01", [{**_row("gems_flip", "klineage", 1.0, None), "seconds": 900.0}])
    assert main([str(tmp_path), "--queue-order", "wild", "--instances", "gems_sort,gems_flip,gems_nothing"]) == 0
    # gems_sort never timed is costed at the upper quartile of the one timing (900 s): a tie, kept in the
    # catalogue's order (sort before flip); a name the suite does not hold is not printed
    assert capsys.readouterr().out.strip() == "gems_sort,gems_flip"
