"""The open-file limit: a process started with a soft limit below its hard one raises it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_low_soft_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = 256, min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1])

    def lower() -> None:  # in the child only
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    code = ("import resource; from server_common.open_files import raise_open_file_limit; "
            "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=lower, capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.strip() == f"{(soft, hard, hard)} {(hard, hard)}"
