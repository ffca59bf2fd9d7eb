"""A mistyped command or option is reported by the command it was given to, with the nearest
valid spelling, as `kraftlog` prints it (argparse's usage, then one error line)."""

from __future__ import annotations

import pytest

from cli.arg_errors import closest
from cli.main import main


def error_line(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.strip().splitlines()[-1]


def test_an_unknown_option_is_reported_by_its_command_with_the_option_meant(capsys) -> None:
    line = error_line(capsys, "topics", "describe", "--under-replicatd")
    assert line == "kraftlog topics describe: error: unrecognized arguments: --under-replicatd (did you mean --under-replicated?)"


def test_each_of_several_unknown_options_gets_its_own_suggestion(capsys) -> None:
    line = error_line(capsys, "consume", "T", "--from-begining", "--max-mesages", "3")
    assert line.startswith("kraftlog consume: error: unrecognized arguments: --from-begining --max-mesages 3")
    assert "--from-begining: did you mean --from-beginning?" in line and "--max-mesages: did you mean --max-messages?" in line


def test_an_unknown_argument_like_nothing_valid_points_to_the_commands_help(capsys) -> None:
    line = error_line(capsys, "topics", "describe", "T", "surplus")
    assert line == "kraftlog topics describe: error: unrecognized arguments: surplus (see 'kraftlog topics describe --help')"


@pytest.mark.parametrize("argv, meant", [
    (("topic", "list"), "'topics'"),
    (("topics", "lst"), "'list'"),
    (("consume", "T", "--isolation-level", "read_commited"), "'read_committed'"),
])
def test_an_invalid_choice_suggests_the_choice_meant(capsys, argv, meant) -> None:
    line = error_line(capsys, *argv)
    assert "invalid choice" in line and line.endswith(f"(did you mean {meant}?)")


def test_nothing_is_suggested_when_no_choice_is_close(capsys) -> None:
    line = error_line(capsys, "xyzzy")
    assert "invalid choice: 'xyzzy'" in line and "did you mean" not in line
    assert closest("xyzzy", ["topics", "produce"]) is None


@pytest.mark.parametrize("argv, message", [
    (("consume", "T", "--max-messages", "-1"), "argument --max-messages: must be at least 1, got -1"),
    (("consume", "T", "--max-messages", "0"), "argument --max-messages: must be at least 1, got 0"),
    (("consume", "T", "--timeout-ms", "-5"), "argument --timeout-ms: must be at least 0, got -5"),
    (("consume", "T", "--max-messages", "many"), "argument --max-messages: 'many' is not a whole number"),
])
def test_a_count_below_its_minimum_is_refused(capsys, argv, message) -> None:
    assert error_line(capsys, *argv) == f"kraftlog consume: error: {message}"
