"""The record batch test vectors (proto/testdata/record_batches.json) against the shipping
codec: every valid vector decodes to what the file says and encodes back to its bytes, every
invalid one is refused with its error code, and a file that drifts from the code is caught."""

from __future__ import annotations

import copy
import json
import struct
import subprocess
import zlib
from pathlib import Path

import lz4.frame
import pytest

from data_plane import record_batch_vectors as vectors
from data_plane.record_batch import HEADER_SIZE, encode_batch

VECTOR_FILE = Path(__file__).resolve().parents[2] / vectors.DEFAULT_PATH


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def test_every_vector_holds_against_the_code(document) -> None:
    assert vectors.vector_problems(document) == []


def test_the_file_is_what_the_generator_writes(document) -> None:
    if document["codec_libraries"] != vectors.codec_library_versions():
        pytest.skip(f"compressed vectors were written with {document['codec_libraries']}, these are {vectors.codec_library_versions()}")
    assert VECTOR_FILE.read_text(encoding="utf-8") == vectors.render(vectors.build_vectors()), (
        "the vector file is stale: run python -m data_plane.record_batch_vectors"
    )


def test_the_generator_is_deterministic() -> None:
    assert vectors.build_vectors() == vectors.build_vectors()


def test_the_cases_cover_what_another_implementation_must_handle(document) -> None:
    valid = {v["name"]: v for v in document["valid"]}
    records = [r for v in document["valid"] for r in v["records"]]
    assert {v["header"]["compression"] for v in valid.values()} == {"none", "lz4", "zstd"}
    assert any(r["key_hex"] is None for r in records) and any(r["value_hex"] is None for r in records)
    assert any(r["key_hex"] == "" for r in records) and any(r["value_hex"] == "" for r in records)
    assert any(h["value_hex"] is None for r in records for h in r["headers"])
    assert any(not h["key"].isascii() for r in records for h in r["headers"])
    assert max(len(v["records"]) for v in valid.values()) >= 100
    assert valid["stamped"]["header"]["base_offset"] == 1000 and valid["stamped"]["records"][-1]["offset"] == 1002
    assert valid["log-append-time"]["header"]["timestamp_type"] == 1
    assert valid["idempotent"]["header"]["producer_id"] == 4001
    codes = {v["error_code"] for v in document["invalid"]}
    assert codes == {"CORRUPT_MESSAGE", "INVALID_RECORD", "INVALID_TIMESTAMP"}
    assert {v["readers_reject"] for v in document["invalid"]} == {True, False}


# ---------------------------------------------------------------------------------- negative controls


def _flip(hex_bytes: str, position: int) -> str:
    data = bytearray.fromhex(hex_bytes)
    data[position] ^= 0x01
    return data.hex()


@pytest.mark.parametrize("position", [0, 12, 20, 21, 27, 57, HEADER_SIZE, -1], ids=lambda p: f"byte {p}")
def test_a_flipped_byte_in_any_valid_vector_is_caught(document, position) -> None:
    """Inside the CRC's span the batch is refused; in the prefix (base offset, leader epoch,
    CRC) the decoded header no longer matches the file."""
    for vector in document["valid"]:
        tampered = copy.deepcopy(document)
        target = next(v for v in tampered["valid"] if v["name"] == vector["name"])
        target["batch_hex"] = _flip(target["batch_hex"], position)
        problems = vectors.vector_problems(tampered)
        assert problems and all(p.startswith(f"valid {vector['name']}:") for p in problems), (vector["name"], problems)


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda d: d["valid"][0]["records"][0].update(value_hex="00"), "records"),
        (lambda d: d["valid"][2]["records"][0].update(key_hex=""), "records"),  # null read as empty
        (lambda d: d["valid"][3]["records"][2]["headers"][0].update(value_hex=""), "records"),
        (lambda d: d["valid"][0]["header"].update(max_timestamp=0), "header"),
        (lambda d: d["valid"][0].update(body_hex="00"), "body_hex"),
        (lambda d: next(v for v in d["invalid"] if v["name"] == "bad-magic").update(error_code="INVALID_RECORD"), "answers CORRUPT_MESSAGE"),
        (lambda d: next(v for v in d["invalid"] if v["name"] == "producer-fields-mixed").update(readers_reject=True), "decoder accepts"),
        (lambda d: d["invalid"][0].update(batch_hex=d["valid"][0]["batch_hex"]), "accepts it"),
    ],
    ids=["value", "null-key-as-empty", "header-value", "header-field", "body", "error-code", "readers-reject", "valid-as-invalid"],
)
def test_an_edited_expectation_is_caught(document, edit, expected) -> None:
    tampered = copy.deepcopy(document)
    edit(tampered)
    problems = vectors.vector_problems(tampered)
    assert problems and expected in problems[0], problems


def test_other_codec_library_versions_compare_compressed_vectors_by_content(document, monkeypatch) -> None:
    """Another lz4 or zstd version may compress differently: the bytes need not match then, the
    header and the uncompressed body still must."""
    tampered = copy.deepcopy(document)
    tampered["codec_libraries"] = {"lz4": "0.0.0", "zstd": "0.0.0"}
    zstd_vector = next(v for v in tampered["valid"] if v["name"] == "zstd")
    assert vectors.vector_problems(tampered) == []
    zstd_vector["body_hex"] = _flip(zstd_vector["body_hex"], 0)
    assert len(vectors.vector_problems(tampered)) == 1


def test_the_command_checks_and_writes_the_file(tmp_path, document, capsys) -> None:
    path = tmp_path / "vectors.json"
    assert vectors.main([str(path)]) == 0
    assert vectors.main(["--check", str(path)]) == 0
    tampered = copy.deepcopy(document)
    tampered["valid"][1]["batch_hex"] = _flip(tampered["valid"][1]["batch_hex"], -1)
    path.write_text(json.dumps(tampered), encoding="utf-8")
    assert vectors.main(["--check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "valid empty-key-and-value: refused" in out and "1 problems: regenerate it" in out


# ---------------------------------------------------------------------------------- another language


def _run_node_check(document: dict, tmp_path: Path) -> tuple[int, str]:
    """examples/node/check_vectors.js over ``document``: (exit status, output)."""
    from tests.integration.test_node_example import EXAMPLE, node_tools

    node, _, _ = node_tools()
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = subprocess.run([node, str(EXAMPLE / "check_vectors.js"), str(path)], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def test_a_javascript_codec_written_from_the_doc_agrees_with_every_vector(document, tmp_path) -> None:
    """It decodes every valid vector, encodes each one's records back to its body (uncompressed:
    to its bytes), and refuses every invalid vector a reader must refuse."""
    status, output = _run_node_check(document, tmp_path)
    assert status == 0, output
    assert f'"valid":{len(document["valid"])},"invalid":{len(document["invalid"])},"problems":0' in output


def test_the_javascript_check_catches_a_tampered_vector(document, tmp_path) -> None:
    tampered = copy.deepcopy(document)
    tampered["valid"][0]["batch_hex"] = _flip(tampered["valid"][0]["batch_hex"], -1)
    tampered["valid"][5]["records"][1]["timestamp_ms"] += 1
    tampered["invalid"][0]["batch_hex"] = document["valid"][0]["batch_hex"]
    status, output = _run_node_check(tampered, tmp_path)
    assert status == 1, output
    assert "valid one-record: refused: CRC" in output and "valid timestamps: record 1" in output
    assert "invalid crc-mismatch: decoded, but a reader must refuse it" in output
    assert "valid one-record: its records encode to other bytes" in output and "valid timestamps: its records encode to another body" in output


def _batch_with_body(template: bytes, compression_code: int, body: bytes) -> bytes:
    """``template``'s header over ``body`` with that compression code, length and CRC fixed up."""
    buf = bytearray(template[:HEADER_SIZE]) + body
    struct.pack_into("<h", buf, 21, compression_code)
    struct.pack_into("<i", buf, 8, len(buf))
    struct.pack_into("<I", buf, 17, zlib.crc32(buf[21:]))
    return bytes(buf)


def test_the_javascript_decoder_reads_frames_other_encoders_write(tmp_path) -> None:
    """Beyond the vector file: lz4 frames of several linked blocks, without a declared size
    but with checksums, of independent blocks; and a large zstd body."""
    values = [(f"record {i} " + "abcdefghij" * (i % 97)).encode() for i in range(400)]
    plain = encode_batch(values, timestamps_ms=vectors.T0)
    body = plain[HEADER_SIZE:]
    assert len(body) > 3 * 65536  # several lz4 blocks
    frames = [
        lz4.frame.compress(body),
        lz4.frame.compress(body, store_size=False, content_checksum=True, block_checksum=True),
        lz4.frame.compress(body, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX256KB),
    ]
    batches = [_batch_with_body(plain, 1, frame) for frame in frames]
    batches.append(encode_batch(values, timestamps_ms=vectors.T0, compression="zstd"))
    case = vectors.ValidCase("large", "400 records over 200 KB", [None] * 400, values, [()] * 400, [vectors.T0] * 400)
    document = {"valid": [vectors.describe_valid(case._replace(name=f"large-{i}"), data) for i, data in enumerate(batches)], "invalid": []}
    assert {v["header"]["compression"] for v in document["valid"]} == {"lz4", "zstd"}
    status, output = _run_node_check(document, tmp_path)
    assert status == 0, output
