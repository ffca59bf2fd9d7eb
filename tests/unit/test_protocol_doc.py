"""docs/protocol.md against the code it describes: every RPC and every error code of
proto/*.proto is named there, and its retry rules are the ones the Python client and the Node
example follow, and the Node example sets the servers' message-size limit. Each checker
also runs on a doctored copy that it must flag."""

from __future__ import annotations

import re
from pathlib import Path

from data_plane.client.errors import METADATA_REFRESH_CODES, RETRIABLE_CODES
from data_plane.client.idempotence import OUTCOME_UNKNOWN_CODES
from server_common.limits import MESSAGE_BYTES_MAX

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DOC = ROOT / "docs/protocol.md"
NODE_CLIENT = ROOT / "examples" / "node" / "kraftlog.js"


def proto_texts() -> list[str]:
    return [path.read_text() for path in sorted((ROOT / "proto").glob("*.proto"))]


def rpc_names(proto_text: str) -> set[str]:
    """The RPCs a .proto file declares (`rpc Name(`)."""
    return set(re.findall(r"^\s*rpc\s+(\w+)\s*\(", proto_text, re.MULTILINE))


def error_code_names(proto_text: str) -> set[str]:
    """The values of `enum ErrorCode`, when the file declares it."""
    enum = re.search(r"enum ErrorCode \{(.*?)\}", proto_text, re.DOTALL)
    return set(re.findall(r"^\s*([A-Z_]+)\s*=", enum.group(1), re.MULTILINE)) if enum else set()


def not_named(doc: str, names: set[str]) -> set[str]:
    """The names the doc never mentions as code (`Name`)."""
    return {name for name in names if f"`{name}`" not in doc}


def retry_table(doc: str) -> dict[str, tuple[bool, bool]]:
    """Rows of the table under "## Retry rules": code -> (refresh Metadata first, Produce outcome unknown)."""
    section = doc.split("## Retry rules", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| (yes|no) \| (yes|no) \|", section, re.MULTILINE)
    return {code: (refresh == "yes", unknown == "yes") for code, refresh, unknown in rows}


def retry_rule_differences(table: dict[str, tuple[bool, bool]], retriable: set[str], refresh: set[str], unknown: set[str]) -> list[str]:
    """How the doc's table and a client's three code sets disagree ([] when they agree)."""
    problems = [f"{code}: retriable in the code, missing from the table" for code in sorted(retriable - table.keys())]
    problems += [f"{code}: in the table, not retriable in the code" for code in sorted(table.keys() - retriable)]
    for code, (doc_refresh, doc_unknown) in sorted(table.items()):
        if code in retriable and doc_refresh != (code in refresh):
            problems.append(f"{code}: 'refresh Metadata first' is {doc_refresh} in the table")
        if code in retriable and doc_unknown != (code in unknown):
            problems.append(f"{code}: 'Produce outcome unknown' is {doc_unknown} in the table")
    return problems


def js_set(source: str, name: str) -> set[str]:
    """The string members of `const NAME = new Set([...])` in a JavaScript file."""
    body = re.search(rf"const {name} = new Set\(\[(.*?)\]\);", source, re.DOTALL)
    assert body, f"no `const {name} = new Set([...])` found"
    return set(re.findall(r"'([A-Z_]+)'", body.group(1)))


def js_product(source: str, name: str) -> int:
    """The value of `const NAME = A * B * ...;` (integer literals only) in a JavaScript file."""
    expression = re.search(rf"const {name} = ([0-9 *]+);", source)
    assert expression, f"no `const {name} = <integer product>;` found"
    value = 1
    for factor in expression.group(1).split("*"):
        value *= int(factor)
    return value


# ---------------------------------------------------------------- the repository as it is


def test_every_rpc_of_every_proto_file_is_named_in_protocol_md() -> None:
    names = set().union(*map(rpc_names, proto_texts()))
    assert {"Produce", "ReplicaFetch", "BrokerSession", "StreamMetadata"} <= names
    assert not_named(PROTOCOL_DOC.read_text(), names) == set()


def test_every_error_code_is_named_in_protocol_md() -> None:
    codes = set().union(*map(error_code_names, proto_texts()))
    assert {"NONE", "OFFSET_NOT_AVAILABLE", "INVALID_RECORD"} <= codes
    assert not_named(PROTOCOL_DOC.read_text(), codes) == set()


def test_retry_rules_match_the_python_client() -> None:
    table = retry_table(PROTOCOL_DOC.read_text())
    assert retry_rule_differences(table, set(RETRIABLE_CODES), set(METADATA_REFRESH_CODES), set(OUTCOME_UNKNOWN_CODES)) == []


def test_retry_rules_match_the_node_example() -> None:
    table = retry_table(PROTOCOL_DOC.read_text())
    source = NODE_CLIENT.read_text()
    node_sets = js_set(source, "RETRIABLE"), js_set(source, "REFRESH_METADATA"), js_set(source, "OUTCOME_UNKNOWN")
    assert retry_rule_differences(table, *node_sets) == []


def test_the_node_example_sets_the_servers_message_limit() -> None:
    source = NODE_CLIENT.read_text()
    assert js_product(source, "MESSAGE_BYTES_MAX") == MESSAGE_BYTES_MAX
    assert "'grpc.max_receive_message_length': MESSAGE_BYTES_MAX" in source
    assert "'grpc.max_send_message_length': MESSAGE_BYTES_MAX" in source


# ---------------------------------------------------------------- negative controls


def test_a_doc_without_an_rpc_is_flagged() -> None:
    doc = PROTOCOL_DOC.read_text().replace("`BrokerSession`", "a session stream")
    names = set().union(*map(rpc_names, proto_texts()))
    assert not_named(doc, names) == {"BrokerSession"}
    assert not_named(PROTOCOL_DOC.read_text(), names | rpc_names("service S {\n  rpc Subscribe(A) returns (stream B);\n}")) == {"Subscribe"}


def test_a_doc_without_an_error_code_is_flagged() -> None:
    doc = PROTOCOL_DOC.read_text().replace("`OFFSET_NOT_AVAILABLE`", "OFFSET_NOT_AVAILABLE")
    assert not_named(doc, set().union(*map(error_code_names, proto_texts()))) == {"OFFSET_NOT_AVAILABLE"}


def test_retry_rules_that_drift_from_the_code_are_flagged() -> None:
    doc = PROTOCOL_DOC.read_text()
    table = retry_table(doc)
    code_sets = set(RETRIABLE_CODES), set(METADATA_REFRESH_CODES), set(OUTCOME_UNKNOWN_CODES)
    without_row = retry_table(re.sub(r"^\| `REQUEST_TIMED_OUT` \|.*\n", "", doc, flags=re.MULTILINE))
    assert retry_rule_differences(without_row, *code_sets) == ["REQUEST_TIMED_OUT: retriable in the code, missing from the table"]
    flipped = dict(table, NOT_ENOUGH_REPLICAS=(True, False))
    assert retry_rule_differences(flipped, *code_sets) == ["NOT_ENOUGH_REPLICAS: 'refresh Metadata first' is True in the table"]
    extra = dict(table, CORRUPT_MESSAGE=(False, False))
    assert retry_rule_differences(extra, *code_sets) == ["CORRUPT_MESSAGE: in the table, not retriable in the code"]


def test_a_different_node_limit_is_read_as_such() -> None:
    assert js_product("const MESSAGE_BYTES_MAX = 4 * 1024 * 1024;", "MESSAGE_BYTES_MAX") == 4 << 20 != MESSAGE_BYTES_MAX
