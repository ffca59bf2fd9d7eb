"""One consumer-group member as its own OS process, for runs and tests that SIGKILL members.

    python -m chaos.workload.group_member BOOTSTRAP GROUP TOPIC EVENTS_FILE [INSTANCE_ID]

Subscribes to TOPIC in GROUP (auto-commit every 200 ms, earliest when nothing is committed)
and appends JSON lines to EVENTS_FILE, flushed as they happen: ``{"owned": [partitions]}``
whenever what it owns changes, ``{"read": [[partition, offset, value], ...]}`` per poll that
returned records; each with ``at`` (time.time() when the poll returned). SIGTERM closes the consumer (commit, revoke, leave) and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from data_plane.client import Consumer
from server_common.logging_setup import configure_logging


def main(bootstrap: str, group: str, topic: str, events_path: str, instance_id: str = "") -> int:
    configure_logging("json", "INFO")  # to stderr: the member's log file
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(events_path, "a", buffering=1) as events, Consumer(
        bootstrap, group_id=group, group_instance_id=instance_id, auto_offset_reset="earliest",
        auto_commit_interval_ms=200, client_id=f"member-{events_path.rsplit('/', 1)[-1]}",
    ) as consumer:
        consumer.subscribe([topic])
        owned: list[int] | None = None
        while not stop.is_set():
            records = consumer.poll(timeout_ms=50)
            now = time.time()
            now_owned = sorted(p for _, p in consumer.assignment())
            if now_owned != owned:
                owned = now_owned
                events.write(json.dumps({"owned": owned, "epoch": consumer.group.member_epoch, "at": now}) + "\n")
            if records:
                events.write(json.dumps({"read": [[r.partition, r.offset, r.value.decode()] for r in records], "at": now}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
