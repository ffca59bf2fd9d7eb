"""The command synopses of docs/operations.md ("Everyday commands", "A local cluster") say
what the parser does: every option they show exists on that command, and a number shown as
an option's value (`[--num-records 1000000]`) is its default. The command examples of
docs/groups.md name only options that exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]


def synopsis_lines() -> list[str]:
    text = (ROOT / "docs/operations.md").read_text()
    blocks = [text.split(f"## {title}", 1)[1].split("```")[1] for title in ("Everyday commands", "A local cluster")]
    return [line for block in blocks for line in block.splitlines() if "kraftlog " in line]


def command_parser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    """The parser of the longest run of subcommand names at the start of ``words``."""
    for word in words:
        subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subparsers is None or word not in subparsers.choices:
            break
        parser = subparsers.choices[word]
    return parser


def mismatches(lines: list[str]) -> list[str]:
    found = []
    root = build_parser()
    for line in lines:
        command = line.split("kraftlog ", 1)[1]
        parser = command_parser(root, command.split())
        options = {o: a for a in parser._actions for o in a.option_strings}
        for option in re.findall(r"--[a-z][a-z-]*", command):
            if option not in options:
                found.append(f"{parser.prog}: no option {option}")
        for option, value in re.findall(r"\[(--[a-z][a-z-]*) (-?\d+)\]", command):
            default = options[option].default if option in options else None
            if isinstance(default, (int, float)) and default != type(default)(value):
                found.append(f"{parser.prog} {option}: the doc shows {value}, the default is {options[option].default}")
    return found


def test_the_synopses_match_the_parser() -> None:
    lines = synopsis_lines()
    assert any("perf produce" in line for line in lines) and any("cluster up" in line for line in lines)
    assert mismatches(lines) == []


def test_the_groups_examples_use_options_that_exist() -> None:
    block = (ROOT / "docs/groups.md").read_text().split("From the command line", 1)[1].split("```")[1]
    lines = [line for line in block.splitlines() if line.startswith("kraftlog ")]
    assert len(lines) >= 5 and mismatches(lines) == []


def test_a_wrong_default_or_a_missing_option_is_found() -> None:
    assert mismatches(["kraftlog perf produce --topic NAME [--batch-records 16384] [--no-such-flag]"]) == [
        "kraftlog perf produce: no option --no-such-flag",
        "kraftlog perf produce --batch-records: the doc shows 16384, the default is 8000",
    ]
