"""Client quotas on the Kafka door (docs/quotas.md, docs/kafka.md): what a Kafka request
counts against the quotas and how its answer says it was throttled. Pure; the listener
carries it out with the broker's own ``QuotaEnforcer``, so a client is measured in one place
whichever door it uses (the same sensors, the same mute: a client id over its quota on one
door is over it on the other).

- The requests limited are those that stand for a call of the gRPC Broker service (Produce,
  Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata, InitProducerId, DeleteRecords: the
  calls the gRPC door limits); group, transaction, admin, ACL, ApiVersions and SASL calls are
  not, as their gRPC counterparts (other services) are not. A consumer's heartbeats are
  therefore never held behind its fetch quota.
- Each limited request counts 1 against ``request_rate``; a Produce the bytes of
  its request frame against ``producer_byte_rate`` (Kafka counts the request's size, the gRPC
  door the protobuf request's); a Fetch the bytes of its response frame against
  ``consumer_byte_rate`` (Kafka counts the response's size, the gRPC door the protobuf
  answer's).
- The throttle time earned goes into the answer's ``throttle_time_ms`` (every Kafka response
  that has the field: Produce and Fetch for the byte rates, any of them for the request
  rate), and the broker holds the client's next requests that long (KIP-219's muted channel).
  librdkafka never waits on its own (it reports the time through ``throttle_cb`` and its
  statistics), so the broker's hold is what keeps it to its quota, as on Kafka's brokers.
"""

from __future__ import annotations

import dataclasses
import datetime

from data_plane.kafka.apis import DELETE_RECORDS, FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, PRODUCE
from data_plane.kafka.entities import millis
from metadata_quorum.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_RATE

LIMITED = frozenset({PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, METADATA, INIT_PRODUCER_ID, DELETE_RECORDS})


def charged_amounts(api_key: int, request_bytes: int, response_bytes: int) -> tuple[tuple[str, float], ...]:
    """(quota key, amount) pairs one Kafka request counts against its client's quotas (none
    for an API that is not ``LIMITED``)."""
    if api_key not in LIMITED:
        return ()
    amounts: tuple[tuple[str, float], ...] = ((REQUEST_RATE, 1.0),)
    if api_key == PRODUCE:
        return amounts + ((PRODUCER_BYTE_RATE, float(request_bytes)),)
    if api_key == FETCH:
        return amounts + ((CONSUMER_BYTE_RATE, float(response_bytes)),)
    return amounts


def with_throttle_time(response, throttle_ms: int):
    """``response`` saying ``throttle_ms``; None when it needs no change: its API has no
    throttle time to say it in (the client is held all the same), or it says a longer one."""
    if "throttle_time" not in {f.name for f in dataclasses.fields(response)} or millis(response.throttle_time) >= throttle_ms:
        return None
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
