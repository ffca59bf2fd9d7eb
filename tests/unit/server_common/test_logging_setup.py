"""Logging goes to the stderr of the moment, not the one there when it was configured."""

import io
import sys

import structlog

from server_common.logging_setup import configure_logging


def test_a_log_line_goes_to_the_current_stderr_after_the_old_one_closed(monkeypatch) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging()
    structlog.get_logger("setup-test").warning("before the swap")
    first.close()  # as pytest closes a test's captured stderr
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    structlog.get_logger("setup-test").warning("after the swap")
    assert "after the swap" in second.getvalue()
