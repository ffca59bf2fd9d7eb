"""The process's open-file limit: raised to the hard limit at start, counted for tests and logs.

A broker holds a descriptor per open segment file, per client connection and per stream
to another node; the soft RLIMIT_NOFILE a shell hands down (often 1,024, here 20,000) is
only a default the process may raise up to the hard limit without privileges, as Kafka's
start scripts advise operators to do by hand.
"""

from __future__ import annotations

import os
import resource


def raise_open_file_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one; (soft before, soft now, hard). An
    unlimited hard limit cannot be a soft one for open files: the soft limit then goes to
    the kernel's per-process maximum (``fs.nr_open``)."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _nr_open(before)
    if target > before:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            target = before  # a container may refuse; the limit stays as it was
    return before, max(before, target), hard


def open_descriptor_count(pid: int | str = "self") -> int:
    """How many descriptors process ``pid`` holds (Linux: entries of /proc/<pid>/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def _nr_open(fallback: int) -> int:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return fallback
