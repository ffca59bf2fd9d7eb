"""The codecs a record batch body may be compressed with: lz4 and zstd, each one whole frame.

A producer picks the codec per batch (the attributes' low three bits name it), the broker
stores and serves the bytes as they came, and every reader decompresses with the same
bounded call: a body that declares or inflates to more than ``BODY_DECOMPRESSED_BYTES_MAX``
is refused before the memory is spent, and a body must be exactly one frame (no trailing
bytes, no second frame), so two readers never disagree about what a batch holds.

zstd contexts are reused per thread: a context must never serve two threads at once, and
making one per batch doubles the cost of compressing a small batch.
"""

from __future__ import annotations

import threading

import lz4.frame
import zstandard

CODES = {"none": 0, "lz4": 1, "zstd": 2}
NAMES = {code: name for name, code in CODES.items()}
BODY_DECOMPRESSED_BYTES_MAX = 64 << 20  # a body larger than this once decompressed is refused
ZSTD_LEVEL = 3  # zstd's own default: most of the ratio of higher levels at several times their speed

_per_thread = threading.local()


class BodyCompressionError(ValueError):
    """A compressed body that is not one whole frame of its codec within the size limit."""


def compress(name: str, body: bytes) -> bytes:
    """``body`` as one frame of codec ``name`` ("none" returns it as is), declaring its size."""
    if name == "lz4":
        return lz4.frame.compress(body, block_linked=False)
    if name == "zstd":
        return _zstd_compressor().compress(body)
    return body


def decompress(name: str, body: bytes | memoryview) -> bytes | memoryview:
    """The content of a body compressed with codec ``name``; BodyCompressionError saying why not."""
    if name == "lz4":
        return _lz4_decompress(body)
    if name == "zstd":
        return _zstd_decompress(body)
    return body


def _lz4_decompress(body: bytes | memoryview) -> bytes:
    """The output buffer is sized by the frame's declared content size (our encoder declares
    it), else by the limit."""
    try:
        declared = lz4.frame.get_frame_info(body)["content_size"]
    except RuntimeError as exc:
        raise BodyCompressionError(f"its lz4 body does not start with an lz4 frame header ({exc})") from None
    _check_declared("lz4", declared)
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(body, max_length=declared or BODY_DECOMPRESSED_BYTES_MAX)
    except RuntimeError as exc:
        raise BodyCompressionError(f"its lz4 body does not decompress ({exc})") from None
    if not decompressor.eof or decompressor.unused_data or (declared and len(out) != declared):
        raise BodyCompressionError(
            f"its lz4 body is not exactly one whole lz4 frame of at most {declared or BODY_DECOMPRESSED_BYTES_MAX} bytes"
        )
    return out


def _zstd_decompress(body: bytes | memoryview) -> bytes:
    """zstandard allocates a frame's declared content size as given, so the declaration is
    checked first; a frame without one is decompressed into at most the limit."""
    try:
        declared = zstandard.get_frame_parameters(body).content_size
    except zstandard.ZstdError as exc:
        raise BodyCompressionError(f"its zstd body does not start with a zstd frame header ({exc})") from None
    if declared != zstandard.CONTENTSIZE_UNKNOWN:
        _check_declared("zstd", declared)
    try:
        return _zstd_decompressor().decompress(body, max_output_size=BODY_DECOMPRESSED_BYTES_MAX, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise BodyCompressionError(
            f"its zstd body is not exactly one whole zstd frame of at most {BODY_DECOMPRESSED_BYTES_MAX} bytes ({exc})"
        ) from None


def _check_declared(name: str, declared: int) -> None:
    if declared > BODY_DECOMPRESSED_BYTES_MAX:
        raise BodyCompressionError(
            f"its {name} body declares {declared} bytes, over {BODY_DECOMPRESSED_BYTES_MAX}: send smaller batches"
        )


def _zstd_compressor() -> zstandard.ZstdCompressor:
    compressor = getattr(_per_thread, "compressor", None)
    if compressor is None:
        compressor = _per_thread.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_per_thread, "decompressor", None)
    if decompressor is None:
        decompressor = _per_thread.decompressor = zstandard.ZstdDecompressor()
    return decompressor
