"""Progress from the first second (issue 31): a long command says what it is doing at once, and a step that runs on
says so again with the time it has taken, so nothing runs silently for minutes."""

import time

from klineage.cli.common import progress_bar


def test_a_task_is_said_at_once_and_a_long_step_again_while_it_runs(monkeypatch, capsys):
    monkeypatch.setenv("KLINEAGE_PROGRESS_LINES", "1")
    with progress_bar(False) as progress:
        monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
        progress.add_task("checking the start program on cpu", total=None)
        time.sleep(2.5)
        progress.say("a line that stays")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(" checking the start program on cpu")
    assert any("checking the start program on cpu (still running, " in line for line in lines[1:])
    assert lines[-1].endswith(" a line that stays")


def test_quiet_says_nothing(monkeypatch, capsys):
    monkeypatch.delenv("KLINEAGE_PROGRESS_LINES", raising=False)
    with progress_bar(True) as progress:  # --json
        progress.add_task("mining", total=None)
        progress.say("case tiny, derived ...")
    assert capsys.readouterr().err == ""
