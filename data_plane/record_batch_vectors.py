"""Test vectors of the record batch format, for implementations in other languages.

``build_vectors`` encodes a fixed set of cases with the shipping codec (``record_batch``):
valid batches as hex with their header fields, their uncompressed body and the records a
reader must see, and invalid batches with the error code a broker answers for them.
``vector_problems`` checks a vector document against the shipping codec, so a file that no
longer matches the code is caught. The file lives beside the contract,
``proto/testdata/record_batches.json``; docs/protocol.md ("Record batch format") describes
the format the vectors exercise.

    python -m data_plane.record_batch_vectors [--check] [PATH]

writes the file (or, with ``--check``, exits 1 listing what in it disagrees with the code).
Everything is deterministic: fixed timestamps, no clock, no randomness. Compressed bytes
depend on the lz4 and zstd library versions, which the document records.
"""

from __future__ import annotations

import argparse
import functools
import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import lz4
import zstandard

from data_plane.batch_compression import compress, decompress
from data_plane.control_batch import ControlType, encode_marker
from data_plane.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    InvalidRecordError,
    decode_batch,
    encode_batch,
    read_header,
    set_log_append_time,
    stamp_batch,
    validate_for_append,
)
from server_common.errors import ErrorCode

DEFAULT_PATH = Path("proto/testdata/record_batches.json")
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms: every vector's timestamps start here

Headers = Sequence[tuple[str, bytes | None]]


class ValidCase(NamedTuple):
    name: str
    description: str
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Headers]
    timestamps_ms: list[int]
    compression: str = "none"
    producer: tuple[int, int, int] = (-1, -1, -1)  # producer_id, producer_epoch, base_sequence
    stamp: tuple[int, int] | None = None  # base_offset, leader_epoch the leader writes
    log_append_time_ms: int | None = None


class InvalidCase(NamedTuple):
    name: str
    description: str
    batch: bytes
    error_code: str  # the ErrorCode name Produce answers for the partition (the document's field)
    readers_reject: bool  # a consumer's decoder must refuse it too (not only the broker's append check)


def codec_library_versions() -> dict[str, str]:
    """The versions whose output the compressed vectors hold (another version may compress differently)."""
    return {"lz4": lz4.library_version_string(), "zstd": ".".join(map(str, zstandard.ZSTD_VERSION))}


# ---------------------------------------------------------------------------------- the cases


def _single(name: str, description: str, key: bytes | None, value: bytes | None, headers: Headers = (), **options: Any) -> ValidCase:
    return ValidCase(name, description, [key], [value], [headers], [T0], **options)


def _many(n: int) -> tuple[list[bytes | None], list[bytes | None], list[Headers], list[int]]:
    """n records of varied sizes: every 7th key null, every 11th value null, every 5th with a header,
    timestamps spread over a minute (some before the first record's)."""
    keys = [None if i % 7 == 0 else f"key-{i % 13}".encode() for i in range(n)]
    values = [None if i % 11 == 0 else (f"value {i} " * (1 + i % 9)).encode() for i in range(n)]
    headers: list[Headers] = [[("index", str(i).encode())] if i % 5 == 0 else [] for i in range(n)]
    timestamps = [T0 + (i * 997) % 60_000 - (1_000 if i % 3 == 1 else 0) for i in range(n)]
    timestamps[0] = T0
    return keys, values, headers, timestamps


def valid_cases() -> list[ValidCase]:
    many = _many(200)
    repetitive = ([f"user-{i % 4}".encode() for i in range(50)], [b'{"event": "click", "page": "/home"}'] * 50, [[("h", b"x")]] * 50, [T0 + i for i in range(50)])
    return [
        _single("one-record", "one record, key and value, no headers", b"k", b"hello"),
        _single("empty-key-and-value", "a key and a value of zero bytes (length 0, not null)", b"", b""),
        ValidCase(
            "null-keys-and-values", "null key (length -1), null value, and both, beside present ones",
            [None, b"k1", None, b"k3"], [b"v0", None, None, b"v3"], [(), (), (), ()], [T0, T0 + 1, T0 + 2, T0 + 3],
        ),
        ValidCase(
            "headers", "0, 1 and 3 headers per record; a null header value, an empty one, a repeated key",
            [b"a", b"b", b"c"], [b"1", b"2", b"3"],
            [(), [("trace-id", b"abc123")], [("x", None), ("x", b""), ("content-type", b"text/plain")]],
            [T0, T0, T0],
        ),
        _single(
            "unicode", "utf-8 key, value and header key and value (bytes on the wire, the header key a string)",
            "ключ".encode(), "値 🎉 ünïcödé".encode(), [("ヘッダー", "värde 🚀".encode())],
        ),
        ValidCase(
            "timestamps", "timestamps out of order: the first is not the smallest (negative deltas), max_timestamp is the largest",
            [None] * 4, [b"a", b"b", b"c", b"d"], [()] * 4, [T0, T0 - 5_000, T0 + 86_400_000, T0 + 1],
        ),
        ValidCase("many-records", "200 records of varied sizes, null keys and values, headers on some", *many),
        ValidCase("lz4", "50 repetitive records, body compressed as one lz4 frame", *repetitive, compression="lz4"),
        ValidCase("zstd", "the same 50 records, body compressed as one zstd frame", *repetitive, compression="zstd"),
        ValidCase("many-records-zstd", "the 200 records of many-records, zstd", *many, compression="zstd"),
        _single("idempotent", "an idempotent producer's batch: producer id, epoch and base sequence set", b"k", b"v", producer=(4001, 2, 17)),
        ValidCase(
            "stamped", "as a leader stores it: base_offset 1000 and leader_epoch 7 written into the prefix (the CRC is unchanged)",
            [b"k0", b"k1", b"k2"], [b"v0", b"v1", b"v2"], [()] * 3, [T0, T0 + 10, T0 + 20], stamp=(1000, 7),
        ),
        ValidCase(
            "log-append-time", "stamped by a leader of a LogAppendTime topic: attribute bit 3 set, max_timestamp the broker's clock, CRC recomputed; readers see every record at max_timestamp (the body keeps the producer's deltas, 0 and 5)",
            [None, None], [b"v0", b"v1"], [(), ()], [T0, T0 + 5], stamp=(42, 3), log_append_time_ms=T0 + 123_456,
        ),
    ]


def encode_case(case: ValidCase) -> bytes:
    producer_id, producer_epoch, base_sequence = case.producer
    data = encode_batch(
        case.values, keys=case.keys, headers=case.headers, timestamps_ms=case.timestamps_ms, compression=case.compression,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
    )
    if case.stamp is None and case.log_append_time_ms is None:
        return data
    buf = bytearray(data)
    if case.stamp is not None:
        stamp_batch(buf, 0, *case.stamp)
    if case.log_append_time_ms is not None:
        set_log_append_time(buf, 0, case.log_append_time_ms)
    return bytes(buf)


Edit = Callable[[bytearray], None]


def _pack(fmt: str, offset: int, *values: int) -> Edit:
    """An edit writing ``values`` at ``offset`` (offsets into the batch, header included)."""
    return lambda buf: struct.pack_into(fmt, buf, offset, *values)


def _edited(data: bytes, *edits: Edit, recompute_crc: bool = True) -> bytes:
    """``data`` with ``edits`` applied and, unless told otherwise, a CRC that matches again,
    so that the check under test is the one that fails."""
    buf = bytearray(data)
    for edit in edits:
        edit(buf)
    if recompute_crc:
        _set_crc(buf)
    return bytes(buf)


def _set_crc(buf: bytearray) -> None:
    struct.pack_into("<I", buf, 17, zlib.crc32(buf[21:]))


def _with_body(data: bytes, body: bytes) -> bytes:
    """The header of ``data`` over another body, batch_length and CRC fixed up."""
    buf = bytearray(data[:HEADER_SIZE]) + body
    struct.pack_into("<i", buf, 8, len(buf))
    _set_crc(buf)
    return bytes(buf)


def invalid_cases() -> list[InvalidCase]:
    plain = encode_batch([b"v0", b"v1"], keys=[b"k0", None], timestamps_ms=[T0, T0 + 1])  # body: 4 columns of 2 int32 + "k0v0v1"
    with_header = encode_batch([b"v"], headers=[[("h", b"x")]], timestamps_ms=T0)
    lz4_batch = encode_batch([b"v"] * 20, timestamps_ms=T0, compression="lz4")
    zstd_batch = encode_batch([b"v"] * 20, timestamps_ms=T0, compression="zstd")
    body_at = HEADER_SIZE
    corrupt, invalid, timestamp = ErrorCode.CORRUPT_MESSAGE.name, ErrorCode.INVALID_RECORD.name, ErrorCode.INVALID_TIMESTAMP.name
    return [
        InvalidCase("crc-mismatch", "one byte of a value changed after encoding", _edited(plain, _pack("<B", len(plain) - 1, plain[-1] ^ 0x01), recompute_crc=False), corrupt, True),
        InvalidCase("bad-magic", "magic 1 instead of 2", _edited(plain, _pack("<b", 16, 1), recompute_crc=False), corrupt, True),
        InvalidCase("truncated", "the last 3 bytes are missing: batch_length runs past the bytes sent", plain[:-3], corrupt, True),
        InvalidCase("batch-length-below-header", "batch_length 60, shorter than the 61-byte header", _edited(plain, _pack("<i", 8, 60), recompute_crc=False), corrupt, True),
        InvalidCase("record-count-zero", "record_count 0 (and last_offset_delta -1): a batch holds at least one record", _edited(plain, _pack("<i", 23, -1), _pack("<i", 57, 0)), corrupt, True),
        InvalidCase("last-offset-delta-mismatch", "last_offset_delta 5 with record_count 2", _edited(plain, _pack("<i", 23, 5)), corrupt, True),
        InvalidCase("unknown-compression", "attributes compression code 5", _edited(plain, _pack("<h", 21, 5)), corrupt, True),
        InvalidCase("lengths-exceed-body", "the second value's length is 3 where the body holds 2 bytes for it", _edited(plain, _pack("<i", body_at + 8 * 2 + 4, 3)), invalid, True),
        InvalidCase("length-below-minus-one", "a key length of -2 (only -1, null, is negative)", _edited(plain, _pack("<i", body_at + 4 * 2, -2)), invalid, True),
        InvalidCase("null-header-key", "a header key of length -1 (only header values may be null)", _with_body(with_header, with_header[body_at:body_at + 16] + struct.pack("<ii", -1, 1) + b"vx"), invalid, True),
        InvalidCase("header-key-not-utf8", "a header key that is not utf-8 (0xff)", _edited(with_header, _pack("<B", len(with_header) - 2, 0xFF)), invalid, True),
        InvalidCase("lz4-not-a-frame", "compression lz4 but the body is not an lz4 frame", _with_body(lz4_batch, b"\x04\x22\x4d\x18not-a-frame"), invalid, True),
        InvalidCase("zstd-trailing-bytes", "compression zstd, one whole frame followed by a stray byte", _with_body(zstd_batch, zstd_batch[body_at:] + b"\x00"), invalid, True),
        InvalidCase("zstd-two-frames", "compression zstd, the body two frames (a body is exactly one)", _with_body(zstd_batch, zstd_batch[body_at:] * 2), invalid, True),
        InvalidCase("producer-fields-mixed", "producer_id -1 (not idempotent) but producer_epoch 0", _edited(plain, _pack("<h", 51, 0)), invalid, False),
        InvalidCase("control-batch", "a commit marker (attribute bits 4 and 5) sent by a producer: only the transaction coordinator writes control batches", encode_marker(ControlType.COMMIT, 4001, 2, 0, T0), invalid, False),
        InvalidCase("transactional-without-producer-id", "attribute bit 4 (transactional) with producer_id -1", _edited(plain, _pack("<h", 21, 0x10)), invalid, False),
        InvalidCase("negative-first-timestamp", "first_timestamp -5", _edited(plain, _pack("<qq", 27, -5, 0)), timestamp, False),
        InvalidCase("max-timestamp-below-first", "max_timestamp 1 ms below first_timestamp", _edited(plain, _pack("<q", 35, T0 - 1)), timestamp, False),
    ]


# ---------------------------------------------------------------------------------- the document


def _hex(item: bytes | None) -> str | None:
    return None if item is None else item.hex()


def describe_valid(case: ValidCase, data: bytes) -> dict[str, Any]:
    """The vector of one valid case: bytes, header fields, uncompressed body, records as readers see them."""
    decoded = decode_batch(data)
    header = decoded.header
    body = decompress(header.compression, data[HEADER_SIZE:])
    return {
        "name": case.name,
        "description": case.description,
        "batch_hex": data.hex(),
        "header": {**header._asdict(), "compression": header.compression, "timestamp_type": header.timestamp_type},
        "body_hex": bytes(body).hex(),
        "records": [
            {
                "offset": r.offset,
                "timestamp_ms": r.timestamp_ms,
                "key_hex": _hex(r.key),
                "value_hex": _hex(r.value),
                "headers": [{"key": k, "value_hex": _hex(v)} for k, v in r.headers],
            }
            for r in decoded.records()
        ],
    }


def build_vectors() -> dict[str, Any]:
    return {
        "about": "kraftlog record batch test vectors (magic 2), written by `python -m data_plane.record_batch_vectors`; the format is in docs/protocol.md, \"Record batch format\". Bytes are hex; key_hex/value_hex null means null.",
        "codec_libraries": codec_library_versions(),
        "valid": [describe_valid(case, encode_case(case)) for case in valid_cases()],
        "invalid": [
            {"name": c.name, "description": c.description, "batch_hex": c.batch.hex(), "error_code": c.error_code, "readers_reject": c.readers_reject}
            for c in invalid_cases()
        ],
    }


def render(document: dict[str, Any]) -> str:
    """JSON with one line per field of a vector and one per record, so a diff shows what changed."""
    line = functools.partial(json.dumps, ensure_ascii=False)
    out = ["{"]
    for key in ("about", "codec_libraries"):
        out.append(f" {line(key)}: {line(document[key])},")
    for section in ("valid", "invalid"):
        out.append(f" {line(section)}: [")
        for i, vector in enumerate(document[section]):
            fields = [f"   {line(k)}: {line(v)}" for k, v in vector.items() if k != "records"]
            if "records" in vector:
                records = ",\n".join(f"    {line(r)}" for r in vector["records"])
                fields.append(f'   "records": [\n{records}\n   ]')
            out.append("  {\n" + ",\n".join(fields) + "\n  }" + ("," if i + 1 < len(document[section]) else ""))
        out.append(" ]" + ("," if section == "valid" else ""))
    return "\n".join(out) + "\n}\n"


# ---------------------------------------------------------------------------------- checking a document


def error_code_of(exc: CorruptBatchError) -> str:
    """The ErrorCode a Produce of this batch gets (see the broker's Partition.produce)."""
    return exc.error_code.name if isinstance(exc, InvalidRecordError) else ErrorCode.CORRUPT_MESSAGE.name


def vector_problems(document: dict[str, Any]) -> list[str]:
    """What in ``document`` the shipping codec disagrees with (empty when it all holds).

    Valid vectors: the bytes pass the broker's append check and decode to exactly the
    recorded header, body and records, and the records (with the header's fields) encode
    back to the same bytes; compressed bytes only with the recorded codec library versions,
    otherwise to the same header and uncompressed body. Invalid vectors: the append check
    refuses them with the recorded code, and the decoder refuses those marked readers_reject.
    """
    problems: list[str] = []
    same_libraries = document.get("codec_libraries") == codec_library_versions()
    for vector in document["valid"]:
        problems += [f"valid {vector['name']}: {p}" for p in _valid_problems(vector, same_libraries)]
    for vector in document["invalid"]:
        problems += [f"invalid {vector['name']}: {p}" for p in _invalid_problems(vector)]
    return problems


def _valid_problems(vector: dict[str, Any], same_libraries: bool) -> list[str]:
    data = bytes.fromhex(vector["batch_hex"])
    try:
        validate_for_append(data)
        described = describe_valid(_case_from_vector(vector), data)
    except CorruptBatchError as exc:
        return [f"refused: {exc}"]
    problems = [f"{field} is {described[field]!r} in the code, {vector[field]!r} in the file" for field in ("header", "body_hex", "records") if described[field] != vector[field]]
    if problems:
        return problems
    again = encode_case(_case_from_vector(vector))
    if again == data:
        return []
    if vector["header"]["compression"] != "none" and not same_libraries:
        ours, theirs = read_header(again), read_header(data)
        if _without_crc_and_length(ours) == _without_crc_and_length(theirs) and decompress(ours.compression, again[HEADER_SIZE:]) == decompress(theirs.compression, data[HEADER_SIZE:]):
            return []
    return [f"its records encode to other bytes: {again.hex()}"]


def _without_crc_and_length(header: BatchHeader) -> BatchHeader:
    return header._replace(crc=0, batch_length=0)


def _case_from_vector(vector: dict[str, Any]) -> ValidCase:
    """The encoder's input recovered from a valid vector: its records and header fields.

    A LogAppendTime batch's records all read as max_timestamp, so its create timestamps come
    from the body's delta column."""
    header, records = vector["header"], vector["records"]
    if header["timestamp_type"] == 1:
        deltas = struct.unpack_from(f"<{len(records)}i", bytes.fromhex(vector["body_hex"]))
        timestamps = [header["first_timestamp"] + d for d in deltas]
    else:
        timestamps = [r["timestamp_ms"] for r in records]
    stamped = header["base_offset"] != 0 or header["leader_epoch"] != -1
    return ValidCase(
        vector["name"], vector["description"],
        [_unhex(r["key_hex"]) for r in records], [_unhex(r["value_hex"]) for r in records],
        [[(h["key"], _unhex(h["value_hex"])) for h in r["headers"]] for r in records],
        timestamps, header["compression"], (header["producer_id"], header["producer_epoch"], header["base_sequence"]),
        (header["base_offset"], header["leader_epoch"]) if stamped else None,
        header["max_timestamp"] if header["timestamp_type"] == 1 else None,
    )


def _unhex(item: str | None) -> bytes | None:
    return None if item is None else bytes.fromhex(item)


def _invalid_problems(vector: dict[str, Any]) -> list[str]:
    data = bytes.fromhex(vector["batch_hex"])
    problems = []
    try:
        validate_for_append(data)
        problems.append(f"the append check accepts it, expected {vector['error_code']}")
    except CorruptBatchError as exc:
        if error_code_of(exc) != vector["error_code"]:
            problems.append(f"the append check answers {error_code_of(exc)} ({exc}), expected {vector['error_code']}")
    if vector["readers_reject"]:
        try:
            decode_batch(data)
            problems.append("the decoder accepts it, expected a refusal")
        except CorruptBatchError:
            pass
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_plane.record_batch_vectors", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH, help="the vector file (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="check the file against the code instead of writing it; exit 1 on any disagreement")
    args = parser.parse_args(argv)
    if not args.check:
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(render(build_vectors()), encoding="utf-8")
        print(f"wrote {args.path}")
        return 0
    problems = vector_problems(json.loads(args.path.read_text(encoding="utf-8")))
    for problem in problems:
        print(problem)
    print(f"{args.path}: {'OK' if not problems else f'{len(problems)} problems: regenerate it with python -m data_plane.record_batch_vectors or fix the code'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
