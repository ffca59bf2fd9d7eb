"""kcat (Debian's package, librdkafka underneath) against the Kafka door: keyed records
produced with acks=all and read back, and records written through the gRPC door read by kcat.
kcat fetches with Fetch v11, a version whose answer has no current-leader field: the answer
must still be built (it closed the connection before)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from data_plane.client import Producer
from tests.cluster import local_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed: apt-get install kcat (.ci/run installs it)"),
]


def kcat(*args: str, stdin: str = "") -> str:
    done = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kcat_produces_and_consumes_through_the_kafka_door_and_reads_the_grpc_doors_records(tmp_path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        cluster.create_topic("kcat", 2, 1)
        cluster.wait_topic_ready("kcat", 2)
        lines = [f"key-{i}:value-{i}" for i in range(500)]
        kcat("-b", cluster.kafka_bootstrap, "-t", "kcat", "-P", "-K:", "-p", "0", "-X", "acks=all", stdin="\n".join(lines) + "\n")
        read = kcat("-b", cluster.kafka_bootstrap, "-t", "kcat", "-C", "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%k:%s@%o\n")
        assert read.splitlines() == [f"{line}@{offset}" for offset, line in enumerate(lines)]

        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(3):
                producer.send("kcat", f"grpc-{i}".encode(), key=b"g", partition=1).result()
        read = kcat("-b", cluster.kafka_bootstrap, "-t", "kcat", "-C", "-p", "1", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")
        assert read.splitlines() == [f"g=grpc-{i}" for i in range(3)]
