"""Command-line mistakes answered by the command they belong to, with the nearest valid
spelling: ``kraftlog topics describe --under-replicatd`` says ``kraftlog topics describe:
error: unrecognized arguments: --under-replicatd (did you mean --under-replicated?)`` with
that command's usage, instead of the top-level usage that names no command at all (argparse
reports a subcommand's unknown options from the top-level parser).
"""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Callable, Iterable, NoReturn

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")


def closest(given: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``given`` was most likely a typo of, or None when none is close."""
    matches = difflib.get_close_matches(given, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def choice_hint(message: str) -> str:
    """`` (did you mean X?)`` for argparse's "invalid choice" message when one choice is close."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return ""
    guess = closest(match["given"], re.findall(r"'([^']*)'", match["choices"]))
    return f" (did you mean '{guess}'?)" if guess else ""


def unknown_arguments_message(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """What to tell the user about arguments ``parser`` (the command they typed) does not take."""
    options = [o for action in parser._actions for o in action.option_strings]
    hints = []
    for extra in extras:
        guess = closest(extra.split("=", 1)[0], options) if extra.startswith("--") else None
        if guess:
            hints.append(f"did you mean {guess}?" if len(extras) == 1 else f"{extra}: did you mean {guess}?")
    advice = "; ".join(hints) if hints else f"see '{parser.prog} --help'"
    return f"unrecognized arguments: {' '.join(extras)} ({advice})"


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum`` (``--max-messages -1`` is a
    mistake to say, not a command that prints nothing)."""

    def parse_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse_int


class KraftlogArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose "invalid choice" errors suggest the choice meant; subcommand
    parsers made from it (``add_subparsers``) are of this class too."""

    def error(self, message: str) -> NoReturn:
        super().error(message + choice_hint(message))


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` were parsed for: ``kraftlog topics describe``'s
    parser for ``kraftlog topics describe ...``."""
    while True:
        subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subparsers is None or getattr(args, subparsers.dest, None) not in subparsers.choices:
            return parser
        parser = subparsers.choices[getattr(args, subparsers.dest)]


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with unknown arguments reported by the command they were given to."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = chosen_parser(parser, args)
        command.error(unknown_arguments_message(command, extras))
    return args
