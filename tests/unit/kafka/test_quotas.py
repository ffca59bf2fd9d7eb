"""What a Kafka request counts against its client's quotas and how its answer says it was
throttled (data_plane/kafka/quotas.py)."""

from __future__ import annotations

import datetime

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaError

from data_plane.kafka.apis import API_VERSIONS, FETCH, LIST_OFFSETS, PRODUCE, api_versions_response
from data_plane.kafka.group_apis import OFFSET_COMMIT
from data_plane.kafka.classic_groups import HEARTBEAT
from data_plane.kafka.entities import NO_THROTTLE
from data_plane.kafka.quotas import charged_amounts, with_throttle_time


def test_a_produce_counts_its_request_bytes_and_a_fetch_its_answer_bytes() -> None:
    assert charged_amounts(PRODUCE, 1000, 50) == (("request_rate", 1.0), ("producer_byte_rate", 1000.0))
    assert charged_amounts(FETCH, 80, 70_000) == (("request_rate", 1.0), ("consumer_byte_rate", 70_000.0))
    assert charged_amounts(LIST_OFFSETS, 80, 90) == (("request_rate", 1.0),)


def test_calls_the_grpc_door_does_not_limit_count_nothing() -> None:
    """Group calls (their gRPC counterparts are the group coordinator's, not limited), so a
    consumer's heartbeat never waits behind its fetch quota; ApiVersions."""
    assert charged_amounts(HEARTBEAT, 80, 90) == charged_amounts(OFFSET_COMMIT, 80, 90) == charged_amounts(API_VERSIONS, 80, 90) == ()


def test_the_throttle_time_goes_into_an_answer_that_has_the_field() -> None:
    produce = load_response_schema(PRODUCE, 9)(responses=(), throttle_time=NO_THROTTLE)
    assert with_throttle_time(produce, 250).throttle_time == datetime.timedelta(milliseconds=250)
    assert with_throttle_time(api_versions_response(3, KafkaError.none), 5).throttle_time == datetime.timedelta(milliseconds=5)


def test_an_answer_without_the_field_or_already_saying_longer_is_left_alone() -> None:
    v0 = api_versions_response(0, KafkaError.none)  # ApiVersions v0 has no throttle time
    assert with_throttle_time(v0, 250) is None
    longer = load_response_schema(PRODUCE, 9)(responses=(), throttle_time=datetime.timedelta(milliseconds=900))
    assert with_throttle_time(longer, 250) is None
