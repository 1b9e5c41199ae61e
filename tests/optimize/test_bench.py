"""The evaluation harness on the CPU: suites, a small methods x instance run, the stamped report, and the escape
re-check (hidden seeds and in-domain probe cases) that catches a final program the run's own checks passed."""

import json

import pytest

from klineage.bench.references import Recheck, escapes
from klineage.bench.report import markdown, write_report
from klineage.bench.run import run_bench
from klineage.bench.suites import suite
from klineage.library import Library
from klineage.program import Program, load_program
from klineage.workload import UserError, load_workload
from tests.conftest import FIXTURES, ROOT
from tests.optimize.skillmaker import make_skill

pytestmark = pytest.mark.interpreter
OPT = FIXTURES / "optimize"


def test_naive_suite_pairs_each_naive_program_with_its_tuned_expert(settings):
    found = {i.name: i for i in suite("naive", settings)}
    assert {"softmax", "rmsnorm", "matmul", "attention"} <= set(found)
    assert found["matmul"].expert.name == "expert" and found["softmax"].expert.name == "expert"
    assert found["rmsnorm"].expert.name == "tuned"  # no project-written expert: the tuned version
    assert "32" in found["matmul"].start.source


def test_experts_suite_is_empty_without_lineages(settings):
    assert suite("experts", settings) == []


def test_small_run_writes_a_stamped_report_and_invents_no_time(settings, tmp_path):
    with Library(tmp_path / "lib") as lib:
        lib.save(make_skill("cache_hints", {"eviction_policy": '"evict_first"'}, ("contiguous",)))
    softmax = [i for i in suite("naive", settings) if i.name == "softmax"]
    result = run_bench(softmax, ["klineage", "autotune"], 3, settings, "cpu", tmp_path / "lib")
    assert result["stamp"]["timed"] is False and result["stamp"]["budget"] == 3 and result["stamp"]["commit"]
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["klineage"]["kept"] >= 1 and rows["klineage"]["escapes"] == []
    assert rows["autotune"]["kept"] == 0  # nothing to decide launch configurations on without timing
    assert all(r["speedup"] is None and r["vs_torch_compile"] is None for r in result["rows"])
    cost = result["costs"]["softmax"]  # where an instance's time went outside its runs: read by bench_costs.py
    assert set(cost) == {"references_s", "escapes_s"} and cost["escapes_s"] > 0
    text = markdown(result)
    assert "No GPU: nothing was timed" in text and "| klineage |" in text
    assert "Library: 1 optimization skill, 0 with an effect timed on a GPU" in text  # the test skill is untimed
    paths = write_report(result, tmp_path / "report")
    assert json.loads(paths["json"].read_text())["summary"]["klineage"]["escapes"] == 0


def test_escape_recheck_catches_a_program_wrong_only_off_the_checked_sizes(settings, sandbox):
    wl = load_workload(OPT / "rowsum_workload.py")
    start = load_program(OPT / "rowsum_naive.py")
    # passes the check cases (N=200, a multiple of 8) but drops a row's tail when N is not a multiple of 8
    wrong = Program("wrong", start.source.replace("mask=cols < N,", "mask=cols < N - N % 8,"))
    assert wrong.source != start.source
    found = escapes(wl, start, wrong, settings, "cpu", sandbox)
    assert found.escapes and found.unchecked == []
    # the divisibility probe finds it every time; the hidden seeds' check too when its DOMAIN draw (a random shape
    # per check, issue 30) lands on an N that is not a multiple of 8
    assert any(e["check"].startswith("divisible_by_block") for e in found.escapes), found.escapes
    assert {e["code"] for e in found.escapes} == {"mismatch"}, found.escapes
    assert escapes(wl, start, start, settings, "cpu", sandbox) == Recheck([], [])


class RaisingHarness:
    """Stands in for the sandbox: the final program's check job raises `raises` times in a row (the harness failed,
    as a workload file read while the device call replaced its tree did in run 23), then judges it `then`; the start
    passes. Records which program each job checked."""

    def __init__(self, final_hash: str, raises: int, then: str = "fail"):
        self.final_hash, self.raises, self.then, self.asked = final_hash, raises, then, []

    def run(self, job):
        from klineage.gates import Verdict
        from klineage.sandbox import SandboxResult

        program = job.payload.program.hash
        self.asked.append("final" if program == self.final_hash else "start")
        if program != self.final_hash:
            return SandboxResult(True, value=Verdict("correctness", "pass"))
        if self.raises:
            self.raises -= 1
            return SandboxResult(False, error="FileNotFoundError: [Errno 2] No such file", kind="exception")
        return SandboxResult(
            True, value=Verdict("correctness", self.then, "" if self.then == "pass" else "mismatch", "rows wrong")
        )


def test_an_escape_recheck_whose_harness_raises_runs_again_and_is_never_an_escape(settings):
    wl = load_workload(OPT / "rowsum_workload.py")
    start = load_program(OPT / "rowsum_naive.py")
    final = Program("final", start.source.replace("BLOCK", "TILE"))
    once = RaisingHarness(final.hash, raises=1)  # the harness raised once: the second run judges, a real escape
    found = escapes(wl, start, final, settings, "cpu", once)
    assert [e["code"] for e in found.escapes] == ["mismatch"] * len(found.escapes) and found.escapes
    assert found.unchecked == [] and once.asked[:3] == ["final", "final", "start"]
    twice = RaisingHarness(final.hash, raises=100)  # it keeps raising: every check unchecked, none an escape
    found = escapes(wl, start, final, settings, "cpu", twice)
    assert found.escapes == [] and found.unchecked and found.unchecked[0]["check"] == "hidden seeds"
    assert all(e["code"] == "error" and "FileNotFoundError" in e["reason"] for e in found.unchecked)
    assert "start" not in twice.asked and twice.asked.count("final") == 2 * len(found.unchecked)


def test_shards_split_a_suite_and_merge_back(settings):
    from klineage.bench.run import merge, shard

    instances = suite("heldout", settings)
    parts = [shard(instances, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(i.name for p in parts for i in p) == sorted(i.name for i in instances)
    with pytest.raises(UserError):
        shard(instances, "4/3")
    stamp = {
        "methods": ["klineage"],
        "budget": 4,
        "commit": "abc",
        "device": "cpu",
        "instances": [],
        "seconds": 1.0,
        "timed": False,
        "versions": {},
        "date": "d",
    }
    row = {
        "instance": "x",
        "method": "klineage",
        "speedup": 2.0,
        "expert_fraction": None,
        "roofline_fraction": None,
        "vs_torch_compile": None,
        "evaluations": 4,
        "evaluations_to_95": 2,
        "failed_share": 0.0,
        "kept": 1,
        "refusals": 0,
        "escapes": [],
        "seconds": 1.0,
        "stop": "s",
        "best_hash": "h",
    }
    a = {
        "stamp": {**stamp, "instances": ["x"]},
        "rows": [row],
        "references": {},
        "trajectories": {},
        "costs": {"x": {"references_s": 1.0, "escapes_s": 2.0}},
    }
    b = {
        "stamp": {**stamp, "instances": ["y"]},
        "rows": [{**row, "instance": "y", "speedup": 8.0}],
        "references": {},
        "trajectories": {},
    }
    merged = merge([a, b])
    assert merged["costs"] == {"x": {"references_s": 1.0, "escapes_s": 2.0}}  # b predates costs
    assert merged["stamp"]["instances"] == ["x", "y"] and merged["stamp"]["shards"] == 2
    assert merged["summary"]["klineage"]["geomean_speedup"] == pytest.approx(4.0)
    with pytest.raises(UserError):
        merge([a, {**b, "stamp": {**b["stamp"], "budget": 8}}])
    later = merge([a, {**b, "stamp": {**b["stamp"], "commit": "def"}}])  # continued in a later session
    assert later["stamp"]["commit"] == "abc, def" and [r["commit"] for r in later["rows"]] == ["abc", "def"]


def test_a_report_written_before_unchecked_existed_files_its_harness_errors_there():
    """Run 23's shards (H200) filed a FileNotFoundError of the harness as escapes of blind and memory: merged again,
    those rows count no escape, and the report says which re-checks could not run."""
    from klineage.bench.run import merge

    stamp = {
        "methods": ["blind"],
        "budget": 4,
        "commit": "f551bab",
        "device": "d",
        "instances": ["x"],
        "seconds": 1.0,
        "timed": True,
        "versions": {},
        "date": "d",
    }
    raised = {"check": "hidden seeds", "code": "error", "reason": "FileNotFoundError: [Errno 2] No such file"}
    row = {
        "instance": "x",
        "method": "blind",
        "speedup": 1.17,
        "expert_fraction": None,
        "roofline_fraction": None,
        "vs_torch_compile": None,
        "evaluations": 4,
        "evaluations_to_95": 2,
        "failed_share": 0.0,
        "kept": 1,
        "refusals": 0,
        "escapes": [raised],
        "seconds": 1.0,
        "stop": "s",
        "best_hash": "h",
    }
    merged = merge([{"stamp": stamp, "rows": [row], "references": {}, "trajectories": {}}])
    assert merged["rows"][0]["escapes"] == [] and merged["rows"][0]["unchecked"] == [raised]
    assert merged["summary"]["blind"]["escapes"] == 0 and merged["summary"]["blind"]["unchecked"] == 1
    assert merged["summary"]["blind"]["geomean_speedup"] == pytest.approx(1.17)  # not credited as its start
    text = markdown(merged)
    assert "Escape re-checks that could not run (1;" in text and "x/blind hidden seeds: FileNotFoundError" in text
    assert "| x | blind | 1.170 |" in text and "| 0 (1 could not run) |" in text
    assert "counts as its start" not in text


def test_a_bundled_workload_recorded_on_another_machine_is_found_here(tmp_path):
    from klineage.bench.suites import _relocated
    from klineage.workload import source_hash

    here = _relocated("/elsewhere/site-packages/klineage/examples/matmul/workload.py")
    assert here.is_file() and here.parent.name == "matmul"
    assert str(_relocated("/nowhere/w.py")) == "/nowhere/w.py"
    # the recorded path exists too (the device call's own tree): the same content is read from this installation
    recorded = tmp_path / "src" / "klineage" / "examples" / "matmul" / "workload.py"
    recorded.parent.mkdir(parents=True)
    recorded.write_text(here.read_text())
    assert _relocated(str(recorded), source_hash(here.read_text())) == here
    # a workload edited since: the recorded copy is the one the lineage was mined on
    recorded.write_text(here.read_text() + "\nEXTRA = 1\n")
    assert _relocated(str(recorded), source_hash(recorded.read_text())) == recorded


def test_joined_suites_prefix_each_name_and_a_cut_run_keeps_what_it_finished(settings, tmp_path):
    joined = suite("naive,heldout", settings)
    names = [i.name for i in joined]
    assert len(names) == len(set(names)) == len(suite("naive", settings)) + len(suite("heldout", settings))
    assert "naive:softmax" in names and all(n.split(":")[0] in ("naive", "heldout") for n in names)
    two = [i for i in joined if i.name in ("naive:softmax", "naive:rmsnorm")]
    seen = []
    result = run_bench(two, ["autotune"], 1, settings, "cpu", None, on_instance=lambda partial: seen.append(partial))
    assert len(seen) == 1 and seen[0]["stamp"]["partial"] and len(seen[0]["rows"]) == 1
    assert seen[0]["stamp"]["instances"] == [two[0].name] and not result["stamp"]["partial"]
    assert "Partial: the run was cut short" in markdown(seen[0]) and "Partial" not in markdown(result)
    assert seen[0]["stamp"]["unfinished"] == [two[1].name] and f"Not finished: {two[1].name}." in markdown(seen[0])
    # --resume: the finished instance is carried over as it was; only the other one runs
    ran = []
    resumed = run_bench(two, ["autotune"], 1, settings, "cpu", None, on_progress=ran.append, earlier=seen[0])
    assert all(text.startswith(two[1].name) for text in ran) and ran
    assert [r["instance"] for r in resumed["rows"]] == [two[0].name, two[1].name]
    assert resumed["rows"][0] == {**seen[0]["rows"][0], "commit": seen[0]["stamp"]["commit"]}
    assert resumed["costs"][two[0].name] == seen[0]["costs"][two[0].name] and two[1].name in resumed["costs"]
    assert set(resumed["trajectories"]) == {f"{i.name}/autotune" for i in two}
    with pytest.raises(UserError, match="budget"):
        run_bench(two, ["autotune"], 2, settings, "cpu", None, earlier=seen[0])


def _claim_all(folder, names, out):
    from klineage.bench.run import Queue

    queue = Queue(folder)
    out.put([n for n in names if queue.claim(n)])


def test_shards_sharing_a_queue_take_each_instance_once_and_the_merge_names_what_none_finished(settings, tmp_path):
    """Four processes claim the same 40 names from one queue folder: each name is taken exactly once. A bench run
    given a claim runs only what it took, and its report says which instances it was offered; bench-merge then names
    the instances no shard finished (a queue's shard cannot name its own)."""
    import multiprocessing

    from klineage.bench.run import Queue, merge

    names = [f"heldout:n{i}" for i in range(40)]
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(tmp_path / "q", names, out)) for _ in range(4)]
    for p in procs:
        p.start()
    taken = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(n for t in taken for n in t) == sorted(names)

    two = [i for i in suite("naive", settings) if i.name in ("softmax", "rmsnorm")]
    queue = Queue(tmp_path / "bench-queue")
    assert queue.claim(two[0].name)  # another shard took the first
    seen = []
    result = run_bench(two, ["autotune"], 1, settings, "cpu", None, on_instance=seen.append, claim=queue.claim)
    assert [r["instance"] for r in result["rows"]] == [two[1].name] and seen == []
    assert result["stamp"]["instances"] == [two[1].name] and result["stamp"]["suite"] == [i.name for i in two]
    assert not queue.claim(two[1].name)
    cut = {**result, "stamp": {**result["stamp"], "instances": [], "partial": True, "unfinished": []}, "rows": []}
    merged = merge([cut, {**cut, "stamp": {**cut["stamp"], "instances": [two[1].name]}, "rows": result["rows"]}])
    assert merged["stamp"]["unfinished"] == [two[0].name] and merged["stamp"]["partial"]
    assert f"Not finished: {two[0].name}." in markdown(merged)
    from click.testing import CliRunner

    from klineage.cli import main

    both = CliRunner().invoke(
        main, ["bench", "naive", "--methods", "autotune", "--shard", "1/2", "--queue", str(tmp_path / "q2")]
    )
    assert both.exit_code == 2 and both.output.count("\n") == 1 and "give one" in both.output
    # --instances in the order given (h200_eval.sh hands the longest out first)
    given = CliRunner().invoke(
        main,
        [
            "bench",
            "naive",
            "--methods",
            "autotune",
            "--budget",
            "1",
            "--device",
            "cpu",
            "--instances",
            "softmax,rmsnorm",
            "--queue",
            str(tmp_path / "q3"),
            "--out",
            str(tmp_path / "given"),
            "--json",
        ],
    )
    assert given.exit_code == 0, given.output
    assert json.loads((tmp_path / "given" / "bench.json").read_text())["stamp"]["instances"] == ["softmax", "rmsnorm"]


def test_a_start_that_fails_its_gates_is_skipped_with_why_and_the_suite_goes_on(settings, tmp_path):
    from dataclasses import replace

    from klineage.bench.memory import build_memory

    softmax = next(i for i in suite("naive", settings) if i.name == "softmax")
    broken = replace(
        softmax,
        name="broken",
        start=Program("broken", softmax.start.source.replace("num = tl.exp(x - x_max)", "num = tl.exp(x * 2 - x_max)")),
    )
    assert broken.start.source != softmax.start.source
    result = run_bench([broken, softmax], ["autotune"], 1, settings, "cpu", None)
    assert [r["instance"] for r in result["rows"]] == ["softmax"]
    assert "fails its correctness gate" in result["skipped"]["broken"]
    assert "- broken: the starting program" in markdown(result)
    added, skipped = build_memory([broken, softmax], settings, "cpu", 3, tmp_path / "memory.json")
    assert list(skipped) == ["broken"] and added >= 1


def test_memory_build_keeps_each_attempt_as_it_is_made(settings, tmp_path, monkeypatch):
    """A build killed at a deadline (h200_eval.sh gives it minutes) keeps the attempts it finished."""
    import klineage.bench.memory as bench_memory
    from klineage.bench.memory import build_memory
    from klineage.optimize import Attempt, load_memory
    from klineage.proposers import Candidate

    softmax = next(i for i in suite("naive", settings) if i.name == "softmax")

    def killed_after_one(workload, start, proposer, settings, device, budget, sandbox, explore, on_attempt):
        cand = Candidate(
            "BLOCK: 128 -> 256", "catalog", "launch_config", "program", "forward", {"BLOCK": 256}, 1.0, "", (), start
        )
        on_attempt(Attempt(2, cand, False, "not_faster", [], {"measured": True, "speedup": 0.9}))
        raise SystemExit("killed at the deadline")

    monkeypatch.setattr(bench_memory, "optimize", killed_after_one)
    path, said = tmp_path / "memory.json", []
    with pytest.raises(SystemExit):
        build_memory([softmax], settings, "cpu", 6, path, on_progress=said.append)
    (entry,) = load_memory(path)
    assert entry.transform == "launch_config" and entry.speedup == 0.9 and entry.source == "softmax:blind"
    # a log says how far it got, and what the step measured
    assert said == ["softmax", "softmax: evaluation 2, BLOCK: 128 -> 256: not_faster x0.900"]


def test_a_progress_line_gives_no_speedup_where_none_was_timed():
    from klineage.bench.run import say_attempt
    from klineage.optimize import Attempt
    from klineage.proposers import Candidate

    cand = Candidate("BLOCK: 128 -> 256", "catalog", "launch_config", "program", "forward", {}, 1.0, "", (), None)
    said = []
    say_attempt(said.append, "x", Attempt(3, cand, False, "failed_gate", [], {"measured": False, "why": "no GPU"}))
    say_attempt(said.append, "x", Attempt(4, cand, True, "kept", [], {"measured": True, "speedup": 1.8164}))
    assert said == [
        "x: evaluation 3, BLOCK: 128 -> 256: failed_gate",
        "x: evaluation 4, BLOCK: 128 -> 256: kept x1.816",
    ]


def test_progress_is_a_line_per_step_in_the_log_of_an_unattended_run(monkeypatch, capsys):
    from klineage.cli.common import progress_bar

    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "1")
    with progress_bar(False) as progress:  # stderr under pytest is not a terminal
        task = progress.add_task("memory", total=None)
        for text in ("softmax", "softmax", "softmax: evaluation 2", "rmsnorm"):
            progress.update(task, description=text)
    lines = capsys.readouterr().err.splitlines()
    # the task's own description first, at once: nothing runs silently until its first step is done
    assert [line.split(" ", 1)[1] for line in lines] == ["memory", "softmax", "softmax: evaluation 2", "rmsnorm"]
    with progress_bar(True) as progress:  # --json, asked for lines: a bench shard's log gets them
        progress.update(progress.add_task("memory", total=None), description="cross_entropy")
    assert [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()] == ["memory", "cross_entropy"]
    monkeypatch.delenv("KLINEAGE_PROGRESS_LINES")
    with progress_bar(True) as progress:  # --json, not asked for: nothing (one stream may be read as JSON)
        progress.update(progress.add_task("memory", total=None), description="softmax")
    assert capsys.readouterr().err == ""
    with progress_bar(False) as progress:  # the default where stderr is no terminal: lines too
        progress.update(progress.add_task("memory", total=None), description="rmsnorm")
    assert [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()] == ["memory", "rmsnorm"]
    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "0")
    with progress_bar(False) as progress:  # turned off: nothing
        progress.update(progress.add_task("memory", total=None), description="softmax")
    assert capsys.readouterr().err == ""


def test_evaluations_to_95_are_also_compared_on_the_instances_both_methods_improved():
    """The per-method mean leaves out what a method did not improve: here blind's mean (2.0) beats klineage's (3.0)
    only because blind improved one instance of the two; on that one both took 2 evaluations."""
    from dataclasses import asdict

    from klineage.bench.metrics import Row, summarize
    from klineage.bench.report import markdown

    def row(instance, method, to95):
        return Row(instance, method, 2.0 if to95 else 1.0, None, None, None, 4, to95, 0.0, 1, 0, [], 1.0, "s", "h")

    rows = [row("a", "klineage", 2), row("a", "blind", 2), row("b", "klineage", 4), row("b", "blind", None)]
    summary = summarize(rows, ["klineage", "blind"])
    assert summary["klineage"]["mean_evaluations_to_95"] == 3.0 and summary["blind"]["mean_evaluations_to_95"] == 2.0
    assert summary["klineage"]["paired_evaluations_to_95"] == {"blind": {"instances": 1, "klineage": 2.0, "blind": 2.0}}
    stamp = {
        "methods": ["klineage", "blind"],
        "budget": 4,
        "commit": "c",
        "device": "d",
        "instances": ["a", "b"],
        "seconds": 1.0,
        "timed": True,
        "versions": {},
        "date": "d",
    }
    text = markdown({"stamp": stamp, "rows": [asdict(r) for r in rows], "summary": summary})
    assert "paired (instances where both methods improved): klineage 2.0 vs blind 2.0 on 1." in text


def test_evaluations_to_the_instances_best_do_not_reward_stopping_early():
    """Memory keeps one x1.2 step at evaluation 2 and nothing after: 95% of its own final at 2, as early as klineage
    reaching x3 at 2. Against the instance's best (x3) memory never gets there and counts budget + 1."""
    from klineage.bench.metrics import summarize, to_instance_best
    from klineage.bench.report import markdown

    def trajectory(*steps):  # (evaluation, speedup, kept)
        return {
            "timed": True,
            "attempts": [{"evaluation": e, "kept": k, "effect": {"measured": True, "speedup": x}} for e, x, k in steps],
        }

    trajectories = {
        "a/klineage": trajectory((2, 3.0, True), (3, 0.9, False)),
        "a/memory": trajectory((2, 1.2, True), (3, 0.8, False), (4, 1.0, False)),
        "b/klineage": trajectory((2, 1.5, True), (3, 1.2, True)),  # 95% of log(1.8) only at 3
        "b/memory": trajectory((2, 0.7, False), (3, 1.8, True)),
        "c/klineage": trajectory((2, 0.9, False)),  # nobody improved c: not counted
        "c/memory": trajectory((2, 0.95, False)),
        "d/klineage": trajectory((2, 2.0, True)),  # memory never ran d: not comparable, not counted
    }
    found = to_instance_best(trajectories, ["klineage", "memory"], budget=4)
    assert found == {
        "klineage": {"instances": 2, "reached": 2, "mean": 2.5},
        "memory": {"instances": 2, "reached": 1, "mean": 4.0},
    }
    summary = summarize([], ["klineage", "memory"], trajectories, 4)
    assert summary["memory"]["evaluations_to_95_of_best"] == found["memory"]
    stamp = {
        "methods": ["klineage", "memory"],
        "budget": 4,
        "commit": "c",
        "device": "d",
        "instances": ["a", "b"],
        "seconds": 1.0,
        "timed": True,
        "versions": {},
        "date": "d",
    }
    text = markdown({"stamp": stamp, "rows": [], "summary": summary})
    assert "on the 2 instances some method improved; a miss counts 5): klineage 2.5 (2 reached); memory 4.0" in text
    assert "of the instance's best" not in markdown(
        {"stamp": {**stamp, "timed": False}, "rows": [], "summary": summary}
    )


def test_a_final_that_escaped_counts_as_its_start_and_sets_no_target():
    """Memory's x1.87 on the naive softmax was wrong on half the bench case's rows (H200, run 20): the summary
    credits it x1.0 and its start's fractions, and klineage is measured against the best correct result."""
    from dataclasses import asdict

    from klineage.bench.metrics import Row, summarize
    from klineage.bench.report import markdown

    escape = [{"check": "hidden seeds", "code": "mismatch", "reason": "half the rows"}]
    rows = [
        Row("a", "klineage", 1.2, 0.6, 0.5, 1.0, 4, 2, 0.0, 1, 0, [], 1.0, "s", "h"),
        Row("a", "memory", 1.8, 0.9, 0.9, 1.5, 4, 2, 0.0, 1, 0, escape, 1.0, "s", "m"),
    ]
    trajectories = {
        "a/klineage": {
            "timed": True,
            "attempts": [{"evaluation": 2, "kept": True, "effect": {"measured": True, "speedup": 1.2}}],
        },
        "a/memory": {
            "timed": True,
            "attempts": [{"evaluation": 2, "kept": True, "effect": {"measured": True, "speedup": 1.8}}],
        },
    }
    summary = summarize(rows, ["klineage", "memory"], trajectories, 4)
    memory = summary["memory"]
    assert memory["geomean_speedup"] == 1.0 and memory["escapes"] == 1 and memory["fast_1"] == 0.0
    assert abs(memory["geomean_expert_fraction"] - 0.5) < 1e-12 and memory["mean_evaluations_to_95"] is None
    assert summary["klineage"]["evaluations_to_95_of_best"] == {"instances": 1, "reached": 1, "mean": 2.0}
    assert memory["evaluations_to_95_of_best"] == {"instances": 1, "reached": 0, "mean": 5.0}
    stamp = {
        "methods": ["klineage", "memory"],
        "budget": 4,
        "commit": "c",
        "device": "d",
        "instances": ["a"],
        "seconds": 1.0,
        "timed": True,
        "versions": {},
        "date": "d",
    }
    text = markdown({"stamp": stamp, "rows": [asdict(r) for r in rows], "summary": summary})
    assert "| a | memory | 1.800 |" in text and "counts as its start in these summaries" in text


def test_the_report_counts_memory_bound_instances_at_the_roofline_target_per_suite():
    """Issue 4's line (85% of the roofline on memory-bound held-out kernels) was counted by hand from bench.json
    for runs 12-23; the summary counts it per suite from the profile gate's bound, an escaped final at its start's
    fraction, and the report names KLineage's misses."""
    from dataclasses import asdict

    from klineage.bench.metrics import Row, summarize

    def row(instance, method, roofline, bound, escapes=()):
        return Row(
            instance, method, 2.0, None, roofline, None, 4, 2, 0.0, 1, 0, list(escapes), 1.0, "s", "h", bound=bound
        )

    escape = {"check": "hidden seeds", "code": "mismatch", "reason": "rows wrong"}
    rows = [
        row("heldout:kl_div", "klineage", 0.42, "memory"),
        row("heldout:rope", "klineage", 0.93, "memory"),
        row("heldout:bmm_fp32", "klineage", 0.30, "compute"),
        row("naive:softmax", "klineage", 0.97, "memory"),
        row("heldout:kl_div", "memory", 0.23, "memory"),
        row("heldout:rope", "memory", 0.90, "memory", [escape]),
        row("heldout:bmm_fp32", "memory", 0.20, "compute"),
        row("naive:softmax", "memory", 0.86, None),
    ]
    summary = summarize(rows, ["klineage", "memory"])
    assert summary["klineage"]["memory_bound_at_target"] == {
        "heldout": {"instances": 2, "reached": 1, "under": {"kl_div": 0.42}},
        "naive": {"instances": 1, "reached": 1, "under": {}},
    }
    # memory's RoPE escaped: credited with its start's fraction (0.90 / 2.0), under the line; a row with no bound
    # (written before rows carried it) is not counted
    assert summary["memory"]["memory_bound_at_target"] == {
        "heldout": {"instances": 2, "reached": 0, "under": {"kl_div": 0.23, "rope": 0.45}}
    }
    stamp = {
        "methods": ["klineage", "memory"],
        "budget": 4,
        "commit": "c",
        "device": "d",
        "instances": ["heldout:kl_div", "heldout:rope", "heldout:bmm_fp32", "naive:softmax"],
        "seconds": 1.0,
        "timed": True,
        "versions": {},
        "date": "d",
    }
    text = markdown({"stamp": stamp, "rows": [asdict(r) for r in rows], "summary": summary})
    assert (
        "Memory-bound instances at 85% of the roofline or better (the bench case's bound, from the profile "
        "gate): heldout: klineage 1 of 2 (under: kl_div 0.42), memory 0 of 2; naive: klineage 1 of 1."
    ) in text
    untimed = markdown({"stamp": {**stamp, "timed": False}, "rows": [], "summary": summary})
    assert "Memory-bound instances" not in untimed


def test_bench_costs_splits_an_attempt_into_gates_and_its_timing_job():
    """Run 6 left about 10 s of a KLineage attempt's 30.6 s unexplained (gates 10.0 s, GPU wait 9.3 s, hold 1.0 s):
    the timing job's own wall and its child's setup are recorded now, and tabulated; a reused effect has none."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_costs", ROOT / "benchmarks" / "bench_costs.py")
    bench_costs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_costs)
    timed = {"measured": True, "job_s": 12.0, "setup_s": 3.0, "gpu_wait_s": 6.0, "gpu_held_s": 1.5, "start_s": 1.0}
    report = {
        "trajectories": {
            "i/klineage": {"seconds": 40.0, "attempts": [{"seconds": 20.0, "check_seconds": 7.0, "effect": timed}]},
            "i/blind": {"seconds": 1.0, "attempts": [{"seconds": 0.0, "effect": {**timed, "reused": True}}]},
        }
    }
    out = bench_costs.costs([report])
    assert out["klineage"]["job"] == [12.0] and out["klineage"]["setup"] == [3.0] and out["klineage"]["check"] == [7.0]
    assert out["klineage"]["launch_bound"] == [] and out["klineage"]["host_launch"] == []  # not recorded: none
    launch = {"current_host_launch_ms": 0.3, "candidate_host_launch_ms": 0.2, "current_launch_bound": 0.5}
    report["trajectories"]["i/klineage"]["attempts"][0]["effect"] = {**timed, **launch}
    launched = bench_costs.costs([report])["klineage"]
    assert launched["host_launch"] == [0.3, 0.2] and launched["launch_bound"] == [0.5]  # both sides, each its own
    report["trajectories"]["i/klineage"]["attempts"][0]["effect"] = timed
    report["trajectories"]["i/klineage"]["attempts"][0]["verdicts"] = [
        {"gate": "correctness", "status": "pass", "seconds": 7.0, "trial_seconds": [1.5, 2.0, 0.5]}
    ]
    checked = bench_costs.costs([report])["klineage"]
    assert checked["trials"] == [4.0] and checked["around"] == [3.0]  # 7 s: 4 in its trials, 3 around them
    assert checked["check_phases"] == []  # a report from before the check's phases: nothing invented
    parts = {"candidate_start": 1.0, "reference_start": 1.5, "workload": 0.1, "static_scan": 0.2}
    report["trajectories"]["i/klineage"]["attempts"][0]["verdicts"][0]["phase_seconds"] = parts
    (row,) = bench_costs.costs([report])["klineage"]["check_phases"]
    assert row == {**parts, "trials": 4.0, "seconds": 7.0}
    del report["trajectories"]["i/klineage"]["attempts"][0]["verdicts"]
    # the candidate's start is recorded; its first calls' settling is not in this effect, and nothing is invented
    assert out["klineage"]["start"] == [1.0] and out["klineage"]["settle"] == []
    assert out["blind"]["reused"] == 1 and out["blind"]["job"] == [] and out["blind"]["wait"] == []
    assert out["klineage"]["phases"] == []  # a report from before phases were recorded: nothing invented
    # run 18's KLineage runs spent 120-156 s outside their attempts: the start's check, the final pair and profile,
    # and the rest (proposing) are recorded apart now
    report["trajectories"]["i/klineage"]["phases"] = {"start_check_s": 9.0, "start_correctness_s": 4.0, "final_s": 6.0}
    (phases,) = bench_costs.costs([report])["klineage"]["phases"]
    # a gate's part of the start's check is not subtracted again
    assert phases == {**report["trajectories"]["i/klineage"]["phases"], "attempts_s": 20.0, "rest_s": 5.0}
