"""Broker settings: every key with its default, parsed from the command line.

Names follow Kafka's broker configs (with dots turned into dashes on the command line);
``docs/operations.md`` lists them all.
"""

from __future__ import annotations

import argparse
import enum
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from metadata_quorum.broker_heartbeats import DEFAULT_SESSION_TIMEOUT_MS
from metadata_quorum.endpoints import Voter, parse_address_overrides, parse_quorum
from server_common import power_loss
from server_common.event_loops import add_event_loop_argument
from server_common.limits import MESSAGE_BYTES_MAX
from server_common.security_options import SecurityOptions, add_security_arguments
from server_common.tls import ServerTls, add_tls_arguments, channel_credentials, server_tls_from_args

MIB = 1 << 20


def parse_host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"'{value}' is not host:port (for example 127.0.0.1:9092)")
    return host, int(port)


class UnsafeBehaviour(enum.Enum):
    """Deliberately wrong replication rules, for the chaos harness's negative controls only.

    Each one is a bug Kafka once had; a run with one of them must make the history checker
    report the anomaly it causes. They are reachable only through ``--unsafe-testing``, which
    logs a warning at start and is never set by ``cluster up`` or any default.
    """

    TRUNCATE_TO_HW = "truncate-to-hw"  # pre-KIP-101: a new follower truncates to its HW
    ACK_BEFORE_REPLICATION = "ack-before-replication"  # acks=all answered after the leader's append
    SKIP_EPOCH_FENCING = "skip-epoch-fencing"  # requests with another leader epoch are served
    STALL_FETCHER = "stall-fetcher"  # after a restart, followers never fetch the partitions they had on disk
    ASSIGN_BEFORE_REVOKE = "assign-before-revoke"  # the group coordinator hands a partition over before its owner revoked it
    SKIP_FSYNC = "skip-fsync"  # --durability fsync reports offsets durable without calling fsync
    READ_COMMITTED_PAST_LSO = "read-committed-past-lso"  # read_committed served up to the HW, aborted transactions unlisted
    MARKERS_BEFORE_DECISION = "markers-before-decision"  # the transaction coordinator writes markers before its decision is durable


class Durability(enum.Enum):
    """When an acks=all produce is acknowledged (docs/durability.md).

    ``page-cache`` (the default, Kafka's): once every ISR member has the batch in its log,
    in the page cache; a process crash loses nothing, a power failure of every replica can.
    ``fsync`` (Redpanda's default): once every ISR member has fsynced it; the HW advances only
    over offsets every ISR member reported durable. fsyncs are batched (group commit).
    """

    PAGE_CACHE = "page-cache"
    FSYNC = "fsync"


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    host: str
    port: int
    data_dir: Path
    controllers: list[Voter]
    rack: str = ""
    max_replicas: int = 0  # replicas this broker registers it can host; 0: from its open-file budget
    request_max_bytes: int = MESSAGE_BYTES_MAX
    heartbeat_interval_ms: int = 500
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 8 * MIB
    replica_tick_interval_ms: int = 100
    advertised: tuple[str, int] | None = None
    peer_addresses: dict[int, tuple[str, int]] = field(default_factory=dict)
    unsafe: UnsafeBehaviour | None = None
    durability: Durability = Durability.PAGE_CACHE
    power_loss_ledger: bool = False  # testing only (server_common/power_loss.py)
    hw_checkpoint_interval_ms: int = 5000
    retention_check_interval_ms: int = 30000
    flush_check_interval_ms: int = 1000
    # The scrub runs on the event loop: short, frequent slices keep each one well under a
    # millisecond, so no produce or fetch waits behind a second's worth of CRC checks.
    scrub_interval_ms: int = 10
    scrub_lap_rest_ms: int = 60_000  # after a lap over every log, the scrub rests this long
    scrub_bytes_per_second: int = 8 * MIB  # background CRC verification of stored batches; 0: off
    cleaner_interval_ms: int = 15000  # how often the log cleaner looks for compacted logs due a pass
    cleaner_io_bytes_per_second: int = 32 * MIB  # the cleaner's read rate (its I/O bound)
    cleaner_map_entries: int = 500_000  # keys one cleaning pass maps (its memory bound)
    fetch_max_wait_ms_cap: int = 30000
    controlled_shutdown_timeout_s: float = 30.0
    topic_defaults: dict[str, str] = field(default_factory=dict)
    storage_fault_injection: bool = False  # testing only: see data_plane/storage/fault_injection.py
    metrics_port: int = 0  # Prometheus /metrics on the --listen host; 0: off
    metrics_group_lag_series: int = 1000  # the most consumer-group lag series a scrape exports (data_plane/groups/group_lag.py)
    quota_window_num: int = 11  # client quotas: samples a rate is measured over (Kafka's quota.window.num)
    quota_window_size_ms: int = 1000  # client quotas: length of one sample (Kafka's quota.window.size.seconds)
    offsets_topic_partitions: int = 50  # Kafka's offsets.topic.num.partitions; used when the topic is first created
    group_session_timeout_ms: int = 45000  # Kafka's group.consumer.session.timeout.ms
    group_heartbeat_interval_ms: int = 5000  # Kafka's group.consumer.heartbeat.interval.ms
    group_max_size: int = 1000  # members per consumer group
    offsets_retention_minutes: float = 10080  # Kafka's offsets.retention.minutes (7 days); a float, so tests can use seconds
    offsets_retention_check_interval_ms: int = 600_000  # Kafka's offsets.retention.check.interval.ms
    transaction_state_partitions: int = 50  # Kafka's transaction.state.log.num.partitions; used when the topic is first created
    transaction_max_timeout_ms: int = 900_000  # Kafka's transaction.max.timeout.ms: the longest timeout a producer may ask for
    transactional_id_expiration_ms: int = 604_800_000  # Kafka's transactional.id.expiration.ms (7 days idle)
    producer_id_expiration_ms: int = 86_400_000  # Kafka's producer.id.expiration.ms (1 day idle): a partition forgets the producer
    producer_id_expiration_check_interval_ms: int = 600_000  # Kafka's producer.id.expiration.check.interval.ms
    # Kafka's transaction.partition.verification.enable (KIP-890 part 1): a transactional
    # producer's first batch on a partition is checked with its coordinator before it is appended.
    transaction_partition_verification: bool = True
    tls: ServerTls | None = None  # None: plaintext listener and plaintext channels to peers
    security: SecurityOptions = SecurityOptions()  # authentication and ACLs (docs/security.md)
    kafka_listen: tuple[str, int] | None = None  # Kafka's wire protocol here too (docs/kafka.md); None: off
    kafka_advertised: tuple[str, int] | None = None  # the Kafka address registered for clients; None: kafka_listen

    def peer_credentials(self) -> grpc.ChannelCredentials | None:
        """Channel credentials for this broker's own calls (controllers, leaders it
        replicates from, repair reads): its serving identity and CA; None in plaintext."""
        if self.tls is None:
            return None
        return channel_credentials(self.tls.ca_file, self.tls.cert_file, self.tls.key_file)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker-id", type=int, required=True, help="this broker's id (unique, >= 1)")
    parser.add_argument("--listen", required=True, help="host:port for the gRPC data plane")
    parser.add_argument("--data-dir", type=Path, required=True, help="where partition logs live")
    parser.add_argument("--controllers", required=True, help="controller quorum: id@host:raft_port:grpc_port,...")
    parser.add_argument("--rack", default="", help="rack label (informational)")
    parser.add_argument("--max-replicas", type=int, default=0,
                        help="replicas this broker registers it can host; the controller refuses creations, partition "
                             "increases and reassignments past it (default 0: 8 per open-file handle of its budget, "
                             "docs/operations.md, Sizing)")
    parser.add_argument("--request-max-bytes", type=int, default=BrokerConfig.request_max_bytes, help="largest gRPC request or response")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=BrokerConfig.heartbeat_interval_ms, help="time between heartbeats to the active controller (default: %(default)s)")
    parser.add_argument("--session-timeout-ms", type=int, default=BrokerConfig.session_timeout_ms, help="the controllers' broker.session.timeout.ms as this broker assumes it: bounds its controller calls; must exceed --heartbeat-interval-ms (default: %(default)s)")
    parser.add_argument("--replica-lag-time-max-ms", type=int, default=BrokerConfig.replica_lag_time_max_ms,
                        help="a follower not caught up for this long leaves the ISR")
    parser.add_argument("--replica-fetch-wait-max-ms", type=int, default=BrokerConfig.replica_fetch_wait_max_ms,
                        help="longest a follower's fetch waits at the leader for new data")
    parser.add_argument("--advertised-address", help="host:port registered for clients and peers (default: --listen)")
    parser.add_argument("--peer-address", action="append", default=[], metavar="ID=HOST:PORT",
                        help="reach broker ID's data plane here instead of its registered address (repeatable; e.g. a proxy)")
    parser.add_argument("--kafka-listen", metavar="HOST:PORT",
                        help="also serve Kafka's wire protocol here, for Kafka clients (docs/kafka.md; default: off)")
    parser.add_argument("--kafka-advertised", metavar="HOST:PORT",
                        help="the Kafka address registered for clients (default: --kafka-listen)")
    parser.add_argument("--unsafe-testing", choices=[b.value for b in UnsafeBehaviour],
                        help="DELIBERATELY WRONG replication, for chaos negative controls only: never in production")
    parser.add_argument("--storage-fault-injection", action="store_true",
                        help="TESTING ONLY: fail appends or segment rolls with EIO while DATA_DIR/inject-io-error names them (append, roll, all)")
    parser.add_argument("--durability", choices=[d.value for d in Durability], default=Durability.PAGE_CACHE.value,
                        help="when acks=all is acknowledged: page-cache: every in-sync replica has the batch in its log "
                             "(survives process crashes, not a power failure of every replica); fsync: every in-sync replica "
                             "has fsynced it (batched fsyncs; see docs/durability.md) (default: %(default)s)")
    add_event_loop_argument(parser)
    parser.add_argument(power_loss.FLAG, action="store_true", help=power_loss.FLAG_HELP)
    parser.add_argument("--retention-check-interval-ms", type=int, default=BrokerConfig.retention_check_interval_ms, help="how often retention deletes old segments (default: %(default)s)")
    parser.add_argument("--log-format", choices=["console", "json"], default="console", help="console: lines for people, json: one object per line (default: %(default)s)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info",
                        help="lowest level logged; debug adds a line per replica for every metadata change (default: %(default)s)")
    parser.add_argument("--metrics-port", type=int, default=BrokerConfig.metrics_port,
                        help="serve Prometheus metrics at http://LISTEN_HOST:PORT/metrics; https with the --tls-* files and the same "
                             "--tls-client-auth when TLS is on (0: off; default: %(default)s)")
    parser.add_argument("--metrics-group-lag-series", type=int, default=BrokerConfig.metrics_group_lag_series,
                        help="the most consumer-group lag series (group and partition, and group totals) a scrape exports, "
                             "the largest lags first (default: %(default)s)")
    parser.add_argument("--scrub-bytes-per-second", type=int, default=BrokerConfig.scrub_bytes_per_second,
                        help="rate of the background CRC check of stored batches (0: off)")
    parser.add_argument("--cleaner-interval-ms", type=int, default=BrokerConfig.cleaner_interval_ms,
                        help="how often the log cleaner looks for compacted partitions due a pass (default: %(default)s)")
    parser.add_argument("--cleaner-io-bytes-per-second", type=int, default=BrokerConfig.cleaner_io_bytes_per_second,
                        help="the log cleaner's read rate, so cleaning leaves the disk to produce and fetch (default: %(default)s)")
    parser.add_argument("--cleaner-map-entries", type=int, default=BrokerConfig.cleaner_map_entries,
                        help="keys one cleaning pass holds in memory; more keys take more passes (default: %(default)s)")
    add_tls_arguments(parser)
    add_security_arguments(parser)
    parser.add_argument("--quota-window-num", type=int, default=BrokerConfig.quota_window_num,
                        help="client quotas measure rates over this many samples, at least 2 (default: %(default)s)")
    parser.add_argument("--quota-window-size-ms", type=int, default=BrokerConfig.quota_window_size_ms,
                        help="length of one client quota sample (default: %(default)s)")
    parser.add_argument("--offsets-topic-partitions", type=int, default=BrokerConfig.offsets_topic_partitions,
                        help="partitions of __consumer_offsets when this broker creates it (default: %(default)s)")
    parser.add_argument("--group-session-timeout-ms", type=int, default=BrokerConfig.group_session_timeout_ms,
                        help="a group member without a heartbeat for this long is removed (default: %(default)s)")
    parser.add_argument("--group-heartbeat-interval-ms", type=int, default=BrokerConfig.group_heartbeat_interval_ms,
                        help="how often group members are told to heartbeat (default: %(default)s)")
    parser.add_argument("--group-max-size", type=int, default=BrokerConfig.group_max_size,
                        help="most members of one consumer group (default: %(default)s)")
    parser.add_argument("--offsets-retention-minutes", type=float, default=BrokerConfig.offsets_retention_minutes,
                        help="a consumer group empty for this long loses its committed offsets and is deleted; offsets of "
                             "topics a group no longer subscribes to expire this long after their commit (default: %(default)s)")
    parser.add_argument("--offsets-retention-check-interval-ms", type=int, default=BrokerConfig.offsets_retention_check_interval_ms,
                        help="how often committed offsets are checked for expiry (default: %(default)s)")
    parser.add_argument("--transaction-state-partitions", type=int, default=BrokerConfig.transaction_state_partitions,
                        help="partitions of __transaction_state when this broker creates it (default: %(default)s)")
    parser.add_argument("--transaction-max-timeout-ms", type=int, default=BrokerConfig.transaction_max_timeout_ms,
                        help="the longest transaction timeout a producer may ask for (default: %(default)s)")
    parser.add_argument("--transactional-id-expiration-ms", type=int, default=BrokerConfig.transactional_id_expiration_ms,
                        help="a transactional id idle this long with no transaction open is forgotten (default: %(default)s)")
    parser.add_argument("--producer-id-expiration-ms", type=int, default=BrokerConfig.producer_id_expiration_ms,
                        help="a partition forgets an idempotent producer that has written nothing to it for this long (its "
                             "duplicate detection and epoch); it may write again as a new producer (default: %(default)s)")
    parser.add_argument("--producer-id-expiration-check-interval-ms", type=int,
                        default=BrokerConfig.producer_id_expiration_check_interval_ms,
                        help="how often partitions are checked for expired producer ids (default: %(default)s)")
    parser.add_argument("--transaction-partition-verification", action=argparse.BooleanOptionalAction,
                        default=BrokerConfig.transaction_partition_verification,
                        help="check a transactional producer's first batch on a partition with its transaction coordinator "
                             "(KIP-890); off only for tests that write transactional batches without a coordinator (default: on)"),


def from_args(args: argparse.Namespace) -> BrokerConfig:
    host, port = parse_host_port(args.listen)
    if not 0 <= args.metrics_port <= 65535:
        raise ValueError(f"--metrics-port {args.metrics_port} is out of range: give 1 to 65535, or 0 to turn metrics off")
    if args.metrics_group_lag_series < 0:
        raise ValueError(f"--metrics-group-lag-series {args.metrics_group_lag_series} is negative: give 0 (no lag series) or more")
    if args.quota_window_num < 2 or args.quota_window_size_ms < 1:
        raise ValueError(f"--quota-window-num must be at least 2 and --quota-window-size-ms at least 1, got "
                         f"{args.quota_window_num} and {args.quota_window_size_ms}")
    if args.offsets_topic_partitions < 1 or args.group_max_size < 1:
        raise ValueError("--offsets-topic-partitions and --group-max-size must be at least 1")
    if args.offsets_retention_minutes <= 0 or args.offsets_retention_check_interval_ms < 1:
        raise ValueError(f"--offsets-retention-minutes must be positive and --offsets-retention-check-interval-ms at least 1, "
                         f"got {args.offsets_retention_minutes} and {args.offsets_retention_check_interval_ms}")
    if min(args.transaction_state_partitions, args.transaction_max_timeout_ms, args.transactional_id_expiration_ms) < 1:
        raise ValueError("--transaction-state-partitions, --transaction-max-timeout-ms and --transactional-id-expiration-ms "
                         "must be at least 1")
    if min(args.producer_id_expiration_ms, args.producer_id_expiration_check_interval_ms) < 1:
        raise ValueError(f"--producer-id-expiration-ms and --producer-id-expiration-check-interval-ms must be at least 1, got "
                         f"{args.producer_id_expiration_ms} and {args.producer_id_expiration_check_interval_ms}")
    if args.max_replicas < 0:
        raise ValueError(f"--max-replicas must be 0 (from the open-file budget) or positive, got {args.max_replicas}")
    if not 0 < args.group_heartbeat_interval_ms < args.group_session_timeout_ms:
        raise ValueError("--group-heartbeat-interval-ms must be positive and below --group-session-timeout-ms: raise the timeout or lower the interval")
    if args.kafka_advertised and not args.kafka_listen:
        raise ValueError("--kafka-advertised needs --kafka-listen: give the address to listen on for Kafka clients too")
    return BrokerConfig(
        broker_id=args.broker_id,
        host=host,
        port=port,
        data_dir=args.data_dir,
        controllers=parse_quorum(args.controllers),
        rack=args.rack,
        max_replicas=args.max_replicas,
        request_max_bytes=args.request_max_bytes,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        session_timeout_ms=args.session_timeout_ms,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        replica_fetch_wait_max_ms=args.replica_fetch_wait_max_ms,
        advertised=parse_host_port(args.advertised_address) if args.advertised_address else None,
        peer_addresses=parse_address_overrides(args.peer_address, "--peer-address"),
        unsafe=UnsafeBehaviour(args.unsafe_testing) if args.unsafe_testing else None,
        durability=Durability(args.durability),
        power_loss_ledger=args.power_loss_ledger,
        retention_check_interval_ms=args.retention_check_interval_ms,
        scrub_bytes_per_second=args.scrub_bytes_per_second,
        cleaner_interval_ms=args.cleaner_interval_ms,
        cleaner_io_bytes_per_second=args.cleaner_io_bytes_per_second,
        cleaner_map_entries=args.cleaner_map_entries,
        metrics_port=args.metrics_port,
        metrics_group_lag_series=args.metrics_group_lag_series,
        tls=server_tls_from_args(args),
        security=SecurityOptions.from_args(args),
        kafka_listen=parse_host_port(args.kafka_listen) if args.kafka_listen else None,
        kafka_advertised=parse_host_port(args.kafka_advertised) if args.kafka_advertised else None,
        storage_fault_injection=args.storage_fault_injection,
        quota_window_num=args.quota_window_num,
        quota_window_size_ms=args.quota_window_size_ms,
        offsets_topic_partitions=args.offsets_topic_partitions,
        group_session_timeout_ms=args.group_session_timeout_ms,
        group_heartbeat_interval_ms=args.group_heartbeat_interval_ms,
        group_max_size=args.group_max_size,
        offsets_retention_minutes=args.offsets_retention_minutes,
        offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
        transaction_state_partitions=args.transaction_state_partitions,
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
        transactional_id_expiration_ms=args.transactional_id_expiration_ms,
        producer_id_expiration_ms=args.producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=args.producer_id_expiration_check_interval_ms,
        transaction_partition_verification=args.transaction_partition_verification,
    )
