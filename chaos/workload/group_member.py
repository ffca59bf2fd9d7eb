"""One consumer-group member as its own OS process, for runs and tests that SIGKILL members.

    python -m chaos.workload.group_member BOOTSTRAP GROUP TOPIC EVENTS_FILE [INSTANCE_ID [PROCESS_MS [SESSION_TIMEOUT_MS]]]

Subscribes to TOPIC in GROUP (auto-commit every 200 ms, earliest when nothing is committed)
and appends JSON lines to EVENTS_FILE, flushed as they happen: ``{"owned": [partitions]}``
whenever what it owns changes, ``{"read": [[partition, offset, value], ...]}`` per poll that
returned records; each with ``at`` (time.time() when the poll returned). From the
callbacks: ``{"gained": [partitions]}`` once new partitions have their positions,
``{"released": [...]}`` when it has stopped reading partitions it gives up (revoked or lost),
stamped then. SIGTERM closes the consumer (commit, revoke, leave) and exits 0. PROCESS_MS stands for
the application's work on each poll's records: the member spends that long before polling
again, so a revocation waits for it, as it would in a real application. SESSION_TIMEOUT_MS:
the brokers' group session timeout (the member drops its partitions itself when no
heartbeat succeeded for that long).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from data_plane.client import Consumer
from server_common.logging_setup import configure_logging


def main(bootstrap: str, group: str, topic: str, events_path: str, instance_id: str = "", process_ms: str = "0",
         session_timeout_ms: str = "45000") -> int:
    configure_logging("json", "INFO")  # to stderr: the member's log file
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(events_path, "a", buffering=1) as events, Consumer(
        bootstrap, group_id=group, group_instance_id=instance_id, auto_offset_reset="earliest",
        auto_commit_interval_ms=200, session_timeout_ms=int(session_timeout_ms), client_id=f"member-{events_path.rsplit('/', 1)[-1]}",
    ) as consumer:
        def changed(kind: str):
            return lambda tps: events.write(json.dumps({kind: sorted(p for _, p in tps), "at": time.time()}) + "\n")

        consumer.subscribe([topic], on_assigned=changed("gained"), on_revoked=changed("released"), on_lost=changed("released"))
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
                stop.wait(int(process_ms) / 1000)  # the application's work on them
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
