"""Every option, positional and subcommand of every `kraftlog` command has a help text
(`kraftlog ... --help` is the CLI's documentation), checked by walking the argparse tree."""

from __future__ import annotations

import argparse

from cli.main import build_parser


def actions_without_help(parser: argparse.ArgumentParser, path: str = "kraftlog") -> list[str]:
    """`command option` for every action of `parser` and its subcommands that has no help text.

    `help=argparse.SUPPRESS` counts as help: it hides an option on purpose."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            described = {choice.dest for choice in action._choices_actions if choice.help}
            for name, subparser in action.choices.items():
                if name not in described:
                    missing.append(f"{path} {name} (subcommand)")
                missing.extend(actions_without_help(subparser, f"{path} {name}"))
            continue
        if not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_has_help() -> None:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"cluster", "topics", "produce", "consume", "perf", "chaos", "broker", "controller"} <= subcommands.keys()
    assert actions_without_help(parser) == []


def test_an_option_or_subcommand_without_help_is_flagged() -> None:
    parser = argparse.ArgumentParser(prog="demo")
    parser.add_argument("--described", help="has one")
    parser.add_argument("--hidden", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="runs")
    run.add_argument("--seed", type=int)
    run.add_argument("name")
    sub.add_parser("bare")
    assert actions_without_help(parser, "demo") == ["demo run --seed", "demo run name", "demo bare (subcommand)"]
