"""The batch body codecs: round trips, and the refusals every reader relies on (one whole
frame, nothing after it, nothing over the decompressed size limit)."""

from __future__ import annotations

import threading

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from data_plane import batch_compression
from data_plane.batch_compression import BodyCompressionError, compress, decompress

CODECS = ["lz4", "zstd"]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(batch_compression.CODES)), st.binary(min_size=1, max_size=5000))
def test_every_codec_round_trips(codec, body) -> None:
    assert bytes(decompress(codec, compress(codec, body))) == body


def test_none_leaves_the_body_as_it_is() -> None:
    assert compress("none", b"abc") == b"abc" and decompress("none", b"abc") == b"abc"


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_bodies_declare_their_size_and_shrink_repetitive_data(codec) -> None:
    body = b"kraftlog record value " * 500
    frame = compress(codec, body)
    assert len(frame) < len(body) // 10
    declared = (
        lz4.frame.get_frame_info(frame)["content_size"] if codec == "lz4" else zstandard.get_frame_parameters(frame).content_size
    )
    assert declared == len(body)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda frame: b"not a frame at all", "frame header"),
        (lambda frame: frame[:-3], "frame"),
        (lambda frame: frame + frame, "frame"),
        (lambda frame: frame + b"\x00", "frame"),
    ],
    ids=["garbage", "truncated", "two frames", "trailing byte"],
)
def test_a_body_that_is_not_exactly_one_frame_is_refused(codec, tamper, message) -> None:
    frame = compress(codec, b"value " * 100)
    with pytest.raises(BodyCompressionError, match=message):
        decompress(codec, tamper(frame))


@pytest.mark.parametrize("codec", CODECS)
def test_a_body_over_the_limit_is_refused_by_its_declared_size(codec, monkeypatch) -> None:
    frame = compress(codec, bytes(10_000))
    monkeypatch.setattr(batch_compression, "BODY_DECOMPRESSED_BYTES_MAX", 9_999)
    with pytest.raises(BodyCompressionError, match="declares 10000 bytes, over 9999"):
        decompress(codec, frame)


@pytest.mark.parametrize(
    "frame",
    [
        lz4.frame.compress(bytes(10_000), store_size=False),
        zstandard.ZstdCompressor(write_content_size=False).compress(bytes(10_000)),
    ],
    ids=CODECS,
)
def test_a_frame_without_a_declared_size_is_bounded_while_decompressing(frame, monkeypatch) -> None:
    codec = "lz4" if frame.startswith(b"\x04\x22\x4d\x18") else "zstd"
    assert len(decompress(codec, frame)) == 10_000  # accepted within the limit
    monkeypatch.setattr(batch_compression, "BODY_DECOMPRESSED_BYTES_MAX", 9_999)
    with pytest.raises(BodyCompressionError):
        decompress(codec, frame)


def test_zstd_contexts_are_not_shared_between_threads() -> None:
    """Threads compressing at once each get their own context, and every frame decodes."""
    bodies = [bytes([i]) * 20_000 + bytes(range(256)) * i for i in range(8)]
    frames: dict[int, bytes] = {}
    mismatches: list[int] = []

    def work(i: int) -> None:
        for _ in range(50):
            frames[i] = compress("zstd", bodies[i])
            if decompress("zstd", frames[i]) != bodies[i]:
                mismatches.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert mismatches == []
    assert [decompress("zstd", frames[i]) for i in range(8)] == bodies
