"""``kraftlog chaos list``: a table for people, ``--json`` for scripts, both naming every scenario."""

from __future__ import annotations

import json

import pytest

from chaos.scenarios import SCENARIOS
from cli.main import main


def test_json_lists_every_scenario_and_what_a_negative_control_must_find(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "list", "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert set(listed) == set(SCENARIOS)
    assert listed["leader-kill-loop"]["negative_control"] is False and listed["leader-kill-loop"]["must_find"] == []
    assert listed["unsafe-txn-read-past-lso"]["must_find"] == ["G1a", "G1b"] and listed["unsafe-txn-read-past-lso"]["workload"] == "txn"


def test_the_table_has_a_line_per_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
