"""Kafka request frames: served versions decode, others are told apart from bytes that are
not Kafka's protocol at all (the first is answered, the second closes the connection)."""

from __future__ import annotations

import io
import struct

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer

from data_plane.kafka.apis import SERVED
from data_plane.kafka.codec import MalformedFrame, Unserved, decode_request


def metadata_frame() -> bytes:
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, RequestHeader(request_api_key=3, request_api_version=12, correlation_id=5, client_id="c"))
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="t"),), allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    entity_writer(MetadataRequest)(buffer, request)
    return buffer.getvalue()


def test_a_served_request_decodes_with_its_header():
    request = decode_request(metadata_frame(), SERVED)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (3, 12, 5, "c")
    assert [t.name for t in request.body.topics] == ["t"]


def test_an_unserved_version_or_api_keeps_its_correlation_id():
    with pytest.raises(Unserved) as raised:
        decode_request(struct.pack(">hhi", 3, 13, 9) + b"\xff" * 10, SERVED)
    assert (raised.value.api_key, raised.value.api_version, raised.value.correlation_id) == (3, 13, 9)
    with pytest.raises(Unserved):
        decode_request(struct.pack(">hhi", 9999, 0, 1), SERVED)


@pytest.mark.parametrize("frame", [b"\0\0\0", metadata_frame()[:-3]], ids=["shorter than a header", "truncated body"])
def test_bytes_that_do_not_parse_are_malformed(frame):
    with pytest.raises(MalformedFrame):
        decode_request(frame, SERVED)


def test_bytes_after_a_whole_request_are_ignored_as_kafka_ignores_them():
    """librdkafka's AdminClient.list_topics sends Metadata v12 with three bytes after it."""
    captured = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    request = decode_request(captured, SERVED)
    assert (request.api_key, request.api_version, request.client_id, request.body.topics) == (3, 12, "rdkafka", None)
