"""structlog configuration for kraftlog processes: JSON lines for machines, console for people.

Modules only call ``structlog.get_logger(name).bind(...)``; the process entry point picks
the renderer once here.
"""

from __future__ import annotations

import logging
import sys

import structlog


class _CurrentStderr:
    """``sys.stderr`` as it is at each write, not as it was when logging was configured: a
    caller may swap the stream later (a test's captured stderr, closed after the test, must
    not be where every later log line goes)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str = "console", level: str = "INFO") -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
        cache_logger_on_first_use=True,
    )
