"""The producer's settings, checked once and then shared: the Producer, its sender and its
accumulator all read this one frozen object, so a setting cannot mean one thing on the
caller's thread and another on the sender's, and no setting is checked in two places.

Defaults left open (``enable_idempotence``, ``max_in_flight_per_partition``) are resolved
here, as Kafka resolves them: idempotence on with acks='all', five requests per partition
with it and one without.
"""

from __future__ import annotations

from dataclasses import dataclass

from data_plane.client.channels import REQUEST_TIMEOUT_MS_DEFAULT
from data_plane.client.idempotence import IN_FLIGHT_PER_PARTITION_MAX
from server_common.limits import BATCH_BYTES_PER_MESSAGE_MAX

ACKS = {"all": -1, -1: -1, 1: 1, 0: 0}
COMPRESSIONS = ("none", "lz4", "zstd")


@dataclass(frozen=True)
class ProducerOptions:
    """Every Producer setting but its brokers and security.

    acks: "all" (the batch is below the high watermark, on min.insync.replicas replicas),
        1 (on the leader) or 0 (sent; futures get offset -1); held as -1, 1 or 0.
    linger_ms: how long a batch waits for more records before it is sent, while its partition
        already has a request in flight (a partition with none sends at once).
    batch_size: bytes after which a batch is sent without waiting for linger_ms.
    compression: "none", "lz4" or "zstd", per batch, done on the sender thread.
    retries: attempts after the first for retriable errors, bounded by delivery_timeout_ms.
    delivery_timeout_ms: the most a record may take from `send` to success or failure.
    retry_backoff_ms: first wait before a retry; doubles up to retry_backoff_max_ms.
    max_in_flight_per_broker: requests awaiting an answer per broker (each carries every
        partition it has ready for that broker).
    max_in_flight_per_partition: requests that may carry one partition at once (Kafka's
        max.in.flight.requests.per.connection). None (the default) means 5 with idempotence
        and 1 without. With idempotence it may be 1 to 5, and records of a partition stay in
        send order, retries included: sequence numbers let the leader refuse a batch that
        overtook an earlier one, and retries go out in sequence order
        (data_plane/client/idempotence.py). Without idempotence, above 1 a partition's records
        may be written out of order (a retry, or a broker handling two calls in another order
        than they were sent).
    buffer_memory: bytes held by unsent and unacknowledged records; beyond it `send` blocks
        up to max_block_ms, then raises BUFFER_EXHAUSTED.
    request_timeout_ms: how long a request may wait for its answer.
    max_request_size: bytes of batches in one request (one record can never exceed it).
    enable_idempotence: get a producer id and number batches per partition so the leader
        answers a retried duplicate with its original offset and refuses gaps. None (the
        default) means on with acks='all' and off otherwise, as in Kafka.
    client_id: shown in broker logs.
    partitioner: where records sent without a partition go: "sticky" (keyed records by
        Kafka's murmur2 hash of the key, unkeyed ones to one partition until batch_size bytes
        went there, KIP-794) or "round-robin" (every record to the topic's next partition in
        turn, key ignored).
    transactional_id: makes the producer transactional (KIP-98; needs acks='all' and
        idempotence): call `init_transactions` once, then send records between
        `begin_transaction` and `commit_transaction`/`abort_transaction`
        (data_plane/client/transactions.py). A later producer with the same id fences this
        one (`ProducerFencedError`).
    transaction_timeout_ms: the coordinator aborts a transaction open longer than this (at
        most the brokers' --transaction-max-timeout-ms).
    """

    acks: str | int = "all"
    linger_ms: float = 5
    batch_size: int = 256 * 1024
    compression: str = "none"
    retries: int = 2_147_483_647
    delivery_timeout_ms: float = 120_000
    retry_backoff_ms: float = 100
    retry_backoff_max_ms: float = 1_000
    max_in_flight_per_broker: int = 5
    max_in_flight_per_partition: int | None = None
    buffer_memory: int = 64 * 1024 * 1024
    max_block_ms: float = 60_000
    request_timeout_ms: float = REQUEST_TIMEOUT_MS_DEFAULT
    max_request_size: int = 16 * 1024 * 1024
    enable_idempotence: bool | None = None
    client_id: str = "kraftlog-producer"
    partitioner: str = "sticky"
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000

    def __post_init__(self) -> None:
        """Refuses a setting that cannot work, saying which values can; resolves the open defaults."""
        if self.transactional_id is not None and (self.enable_idempotence is False or ACKS.get(self.acks) != -1):
            raise ValueError("a transactional producer needs acks='all' and idempotence")
        if self.acks not in ACKS:
            raise ValueError(f"acks={self.acks!r}: use 'all', 1 or 0")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression={self.compression!r}: use one of {COMPRESSIONS}")
        acks = ACKS[self.acks]
        if self.enable_idempotence and acks != -1:
            raise ValueError("enable_idempotence needs acks='all'")
        idempotent = acks == -1 if self.enable_idempotence is None else self.enable_idempotence
        if not 0 < self.max_request_size <= BATCH_BYTES_PER_MESSAGE_MAX:
            raise ValueError(f"max_request_size must be in (0, {BATCH_BYTES_PER_MESSAGE_MAX}]")
        if not 0 < self.batch_size <= self.max_request_size:
            raise ValueError("batch_size must be positive and at most max_request_size")
        if self.max_in_flight_per_broker < 1 or self.retries < 0 or self.linger_ms < 0:
            raise ValueError("max_in_flight_per_broker must be >= 1, retries >= 0, linger_ms >= 0")
        in_flight = self.max_in_flight_per_partition
        if in_flight is None:
            in_flight = IN_FLIGHT_PER_PARTITION_MAX if idempotent else 1
        if idempotent and not 1 <= in_flight <= IN_FLIGHT_PER_PARTITION_MAX:
            raise ValueError(
                f"max_in_flight_per_partition={in_flight}: with idempotence use 1 to "
                f"{IN_FLIGHT_PER_PARTITION_MAX} (the leader remembers a producer's last {IN_FLIGHT_PER_PARTITION_MAX} batches)"
            )
        if in_flight < 1:
            raise ValueError(f"max_in_flight_per_partition={in_flight}: use 1 or more")
        object.__setattr__(self, "acks", acks)
        object.__setattr__(self, "enable_idempotence", idempotent)
        object.__setattr__(self, "max_in_flight_per_partition", in_flight)

    @property
    def transactional(self) -> bool:
        """The sender's view: a producer id comes from the transaction coordinator."""
        return bool(self.transactional_id)
