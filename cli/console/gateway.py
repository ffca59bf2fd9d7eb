"""The console's blocking calls to the cluster, made as one principal: every client here is
built with that principal's ``ClientSecurity``, so the brokers and controllers authorize each
read and change as theirs (a topic the user may not DESCRIBE is absent from the answers).

Only the public gRPC contract is used, through the same clients the CLI uses: ``Admin``,
``ControllerClient``, ``GroupAdmin``, ``TransactionAdmin``, ``SecurityClient``,
``Consumer`` and ``Producer``. The server runs these in worker threads.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from cli.console import snapshots
from cli.partition_view import describe_rows
from data_plane.client import Admin, Consumer, Producer
from data_plane.client.errors import KraftlogError
from data_plane.client.group_admin import GroupAdmin
from data_plane.client.transaction_admin import TransactionAdmin
from metadata_quorum.controller_client import ControllerClient
from metadata_quorum.security_client import SecurityClient
from server_common.authorizer import AclBinding
from server_common.client_security import ClientSecurity

LOG_STATE_TIMEOUT_MS = 3000
BROWSE_MAX = 2000
EARLIEST, LATEST = -2, -1


class Gateway:
    """One principal's view of the cluster; clients opened on first use and kept."""

    def __init__(self, bootstrap: str, security: ClientSecurity) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self._lock = threading.Lock()
        self._admin: Admin | None = None
        self._controller: ControllerClient | None = None

    def admin(self) -> Admin:
        with self._lock:
            if self._admin is None:
                self._admin = Admin(self.bootstrap, request_timeout_ms=LOG_STATE_TIMEOUT_MS, security=self.security)
            return self._admin

    def controller(self) -> ControllerClient:
        admin = self.admin()
        with self._lock:
            if self._controller is None:
                self._controller = ControllerClient(admin.controller_endpoints(), timeout_s=10.0, security=self.security)
            return self._controller

    def close(self) -> None:
        with self._lock:
            for client in (self._admin, self._controller):
                if client is not None:
                    client.close()
            self._admin = self._controller = None

    def check_credentials(self) -> None:
        """Raises KraftlogError (UNAUTHENTICATED, ...) unless the brokers accept this principal."""
        self.admin().describe_topics()

    # -- reads ----------------------------------------------------------------------------

    def _visible_topics(self) -> set[str]:
        """The topics this principal may DESCRIBE: the brokers' Metadata answer is filtered
        by ACLs, the controllers' cluster description is not."""
        return set(self.admin().describe_topics())

    def _logs(self, topics=()) -> tuple[dict, set[int]]:
        """Each broker's DescribeLogs answer; the ids of brokers that did not answer (a
        principal without DESCRIBE on the cluster sees no log state, and no broker as down)."""
        cluster_brokers = self.controller().describe_cluster().brokers
        answers, unreachable = {}, set()
        admin = self.admin()
        for b in cluster_brokers:
            try:
                answers.update(admin.describe_logs(broker_id=b.endpoint.broker_id, topics=topics))
            except KraftlogError as exc:
                if exc.retriable:  # down or slow; a refusal (no DESCRIBE on the cluster) only hides the log state
                    unreachable.add(b.endpoint.broker_id)
        return answers, unreachable

    def cluster_rows(self, topic: str | None = None) -> tuple[Any, list[dict], dict, set[int]]:
        """(DescribeCluster answer, partition rows of the visible topics, logs, unreachable brokers)."""
        cluster = self.controller().describe_cluster()
        visible = self._visible_topics()
        topics = [t for t in cluster.topics if t.name in visible and topic in (None, t.name)]
        logs, unreachable = self._logs([topic] if topic else ())
        return cluster, describe_rows(topics, logs), logs, unreachable

    def overview(self) -> dict:
        cluster, rows, _, unreachable = self.cluster_rows()
        names = sorted({r["topic"] for r in rows})
        configs = self.controller().describe_configs(names) if names else {}
        min_isr = {t: int(e.value) for t, entries in configs.items() for e in entries if e.key == "min.insync.replicas"}
        return snapshots.overview(cluster, self.controller().describe_quorum(), rows, min_isr, unreachable)

    def topics(self, rates: dict[str, float]) -> list[dict]:
        _, rows, logs, _ = self.cluster_rows()
        return snapshots.topic_list(rows, snapshots.leader_sizes(logs, rows), rates)

    def topic(self, name: str) -> dict:
        cluster = self.controller().describe_cluster()
        if name not in self._visible_topics():
            raise KraftlogError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist or you may not describe it")
        logs, _ = self._logs([name])
        configs = self.controller().describe_configs([name]).get(name, [])
        return snapshots.topic_page(name, [t for t in cluster.topics if t.name == name], logs, configs)

    def browse(self, topic: str, partition: int | None, start: str, value: int | None, limit: int,
               read_committed: bool, key_filter: str = "", value_filter: str = "", header_filter: str = "",
               timeout_s: float = 2.0) -> dict:
        """Up to ``limit`` records of ``topic`` (one partition, or all) from ``start``:
        ``offset`` (value), ``timestamp`` (value in ms), ``beginning`` or ``end`` (the last
        ``limit`` records before the end). Returns the records and where each partition ended."""
        limit = max(1, min(limit, BROWSE_MAX))
        described = self.admin().describe_topics([topic])[topic]
        tps = [(topic, p) for p in sorted(described.partitions) if partition is None or p == partition]
        if not tps:
            raise KraftlogError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic} has no partition {partition}")
        admin = self.admin()
        ends = {tp: o.offset for tp, o in admin.list_offsets({tp: LATEST for tp in tps}, read_committed=read_committed).items()}
        starts = {tp: o.offset for tp, o in admin.list_offsets({tp: EARLIEST for tp in tps}).items()}
        if start == "offset":
            positions = {tp: min(max(value or 0, starts[tp]), ends[tp]) for tp in tps}
        elif start == "timestamp":
            found = admin.list_offsets({tp: int(value or 0) for tp in tps})
            positions = {tp: ends[tp] if found[tp].offset < 0 else found[tp].offset for tp in tps}
        elif start == "end":
            positions = {tp: max(starts[tp], ends[tp] - max(1, limit // len(tps))) for tp in tps}
        else:
            positions = dict(starts)
        records = []
        wanted = {tp for tp in tps if positions[tp] < ends[tp]}
        if wanted:
            consumer = Consumer(self.bootstrap, security=self.security, fetch_mode="fetch", fetch_max_wait_ms=100,
                                isolation_level="read_committed" if read_committed else "read_uncommitted",
                                max_poll_records=limit, client_id="kraftlog-console")
            try:
                consumer.assign(wanted)
                for tp in wanted:
                    consumer.seek(tp, positions[tp])
                deadline = time.monotonic() + timeout_s
                while wanted and len(records) < limit and time.monotonic() < deadline:
                    for r in consumer.poll(timeout_ms=100):
                        tp = (r.topic, r.partition)
                        if tp not in wanted or r.offset >= ends[tp]:
                            wanted.discard(tp)
                            continue
                        positions[tp] = r.offset + 1
                        if r.offset + 1 >= ends[tp]:
                            wanted.discard(tp)
                        if snapshots.matches(r, key_filter, value_filter, header_filter) and len(records) < limit:
                            records.append(snapshots.record_json(r))
            finally:
                consumer.close()
        return {"records": records, "next": {str(tp[1]): positions[tp] for tp in tps}, "ends": {str(tp[1]): ends[tp] for tp in tps}}

    def groups(self) -> list[dict]:
        with GroupAdmin(self.bootstrap, security=self.security) as admin:
            listed, _ = admin.list_groups()
        return [g._asdict() for g in listed]

    def group(self, group_id: str) -> dict:
        with GroupAdmin(self.bootstrap, security=self.security) as admin:
            return snapshots.group_page(admin.describe_group(group_id))

    def transactions(self) -> list[dict]:
        now_ms = int(time.time() * 1000)
        with TransactionAdmin(self.bootstrap, security=self.security) as admin:
            listed, _ = admin.list_transactions()
            return [snapshots.transaction_json(admin.describe_transaction(t.transactional_id), now_ms) for t in listed]

    def security_state(self) -> dict:
        with SecurityClient(self.admin().controller_endpoints(), timeout_s=10.0, security=self.security) as client:
            users = [{"name": u.name, "mechanism": u.mechanism, "iterations": u.iterations} for u in client.list_users()]
            acls = [dataclasses.asdict(a) for a in client.list_acls()]
        quotas = self.controller().describe_client_quotas()
        return {"users": users, "acls": acls, "quotas": [_quota_json(q) for q in quotas.entries]}

    # -- changes --------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.controller().create_topic(name, partitions, replication_factor, configs)

    def delete_topic(self, name: str) -> None:
        self.controller().delete_topics([name])

    def add_partitions(self, name: str, total: int) -> None:
        self.controller().create_partitions({name: total})

    def alter_config(self, name: str, key: str, value: str | None) -> None:
        self.controller().alter_configs(name, {key: value} if value else {}, [] if value else [key])

    def reset_offsets(self, group_id: str, topic: str, kind: str, value: int | None, execute: bool) -> list[dict]:
        partitions = [(topic, p) for p in sorted(self.admin().describe_topics([topic])[topic].partitions)]
        with GroupAdmin(self.bootstrap, security=self.security) as admin:
            steps = admin.plan_reset(group_id, partitions, kind, value)
            if execute:
                admin.execute_reset(group_id, steps)
        return [s._asdict() for s in steps]

    def delete_group(self, group_id: str) -> None:
        with GroupAdmin(self.bootstrap, security=self.security) as admin:
            admin.delete_group(group_id)

    def abort_transaction(self, transactional_id: str) -> None:
        with TransactionAdmin(self.bootstrap, security=self.security) as admin:
            before = admin.describe_transaction(transactional_id)
        if before.state != "Ongoing":
            raise ValueError(f"{transactional_id} has no open transaction (state {before.state}): nothing to abort")
        with Producer(self.bootstrap, transactional_id=transactional_id, transaction_timeout_ms=before.transaction_timeout_ms,
                      security=self.security) as producer:
            producer.init_transactions()

    def upsert_user(self, name: str, password: str) -> None:
        with SecurityClient(self.admin().controller_endpoints(), timeout_s=10.0, security=self.security) as client:
            client.upsert_user(name, password, 4096)

    def delete_user(self, name: str) -> None:
        with SecurityClient(self.admin().controller_endpoints(), timeout_s=10.0, security=self.security) as client:
            client.delete_user(name)

    def change_quota(self, user: str | None, client_id: str | None, key: str, value: float | None) -> None:
        """Set one quota value of a (user, client id) entity, or remove it (``value`` None);
        None leaves a dimension out, "" is its default (docs/quotas.md)."""
        if user is None and client_id is None:
            raise ValueError("name a user, a client id or both (an empty one means its default)")
        if value is None:
            self.controller().alter_client_quotas((user, client_id), remove_keys=[key])
        else:
            self.controller().alter_client_quotas((user, client_id), {key: value})

    def change_acl(self, acl: dict, create: bool) -> None:
        """Create or delete one ACL. The named values (resource type, pattern, operation,
        permission) are taken in either case: Kafka's tools spell them TOPIC, READ, ALLOW."""
        named = ("resource_type", "pattern_type", "operation", "permission")
        binding = AclBinding(**{k: str(acl[k]).lower() if k in named else acl[k] for k in AclBinding.__dataclass_fields__})
        with SecurityClient(self.admin().controller_endpoints(), timeout_s=10.0, security=self.security) as client:
            (client.create_acls if create else client.delete_acls)([binding])


def _quota_json(entry: Any) -> dict:
    entity = entry.entity
    return {"user": entity.user if entity.HasField("user") else None,
            "client_id": entity.client_id if entity.HasField("client_id") else None, "values": dict(entry.values)}
