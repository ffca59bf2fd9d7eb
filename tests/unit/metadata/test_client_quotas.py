"""Client quotas as metadata: AlterClientQuotas validates and commits all or nothing, the
records replay into the image, snapshots carry them, DescribeClientQuotas filters them."""

from __future__ import annotations

import math

import pytest

from metadata_quorum import client_quotas as cq
from metadata_quorum.delta import image_from_snapshot
from metadata_quorum.image import MetadataImage, image_to_records
from kraftlog_proto import common_pb2 as common
from kraftlog_proto import controller_pb2 as pb

from .helpers import commit

Op = pb.AlterClientQuotasRequest.Op


def entry(user=None, client_id=None, **values) -> pb.AlterClientQuotasRequest.Entry:
    ops = [Op(key=k, remove=True) if v is None else Op(key=k, value=v) for k, v in values.items()]
    return pb.AlterClientQuotasRequest.Entry(entity=pb.ClientQuotaEntity(user=user, client_id=client_id), ops=ops)


def alter(image: MetadataImage, *entries, validate_only=False):
    decision = cq.alter_client_quotas(image, pb.AlterClientQuotasRequest(entries=list(entries), validate_only=validate_only))
    return commit(image, decision), decision.response


def test_set_override_and_remove_replay_into_the_image():
    image = MetadataImage.empty("c")
    image, response = alter(image, entry(user="alice", producer_byte_rate=1024.0), entry(client_id="", request_rate=50.0))
    assert [r.error_code for r in response.entries] == [common.NONE, common.NONE]
    assert dict(image.client_quotas[("alice", None)]) == {"producer_byte_rate": 1024.0}
    assert dict(image.client_quotas[(None, "")]) == {"request_rate": 50.0}
    image, _ = alter(image, entry(user="alice", producer_byte_rate=None, consumer_byte_rate=2048.0))
    assert dict(image.client_quotas[("alice", None)]) == {"consumer_byte_rate": 2048.0}
    image, _ = alter(image, entry(user="alice", consumer_byte_rate=None))
    assert ("alice", None) not in image.client_quotas  # an entity with no value left is gone


def test_removing_a_quota_that_is_not_set_changes_nothing():
    image = MetadataImage.empty("c")
    decision = cq.alter_client_quotas(image, pb.AlterClientQuotasRequest(entries=[entry(user="bob", request_rate=None)]))
    assert decision.records == () and decision.response.entries[0].error_code == common.NONE


@pytest.mark.parametrize("bad, says", [
    (entry(producer_byte_rate=1.0), "neither a user nor a client id"),
    (entry(user="a", bytes_per_second=1.0), "unknown quota 'bytes_per_second'"),
    (entry(user="a", producer_byte_rate=0.0), "above 0"),
    (entry(user="a", producer_byte_rate=-5.0), "above 0"),
    (entry(user="a", request_rate=math.inf), "requests per second"),
    (entry(user="a", request_rate=math.nan), "requests per second"),
    (entry(user="x" * 300, request_rate=1.0), "limit is 255"),
])
def test_an_invalid_entry_refuses_the_whole_request(bad, says):
    image = MetadataImage.empty("c")
    after, response = alter(image, entry(user="alice", producer_byte_rate=1024.0), bad)
    assert after.client_quotas == image.client_quotas, "nothing applied"
    good, refused = response.entries
    assert refused.error_code == common.INVALID_REQUEST and says in refused.error_message
    assert good.error_code == common.INVALID_REQUEST and "another entry" in good.error_message


def test_the_same_quota_twice_in_one_request_is_refused():
    image = MetadataImage.empty("c")
    twice = pb.AlterClientQuotasRequest.Entry(entity=pb.ClientQuotaEntity(user="a"),
                                              ops=[Op(key="request_rate", value=1.0), Op(key="request_rate", value=2.0)])
    _, response = alter(image, twice)
    assert "changed twice" in response.entries[0].error_message


def test_validate_only_commits_nothing():
    image, response = alter(MetadataImage.empty("c"), entry(user="a", request_rate=5.0), validate_only=True)
    assert response.entries[0].error_code == common.NONE and not image.client_quotas


def test_snapshot_rebuilds_the_quotas():
    image, _ = alter(MetadataImage.empty("c"), entry(user="alice", client_id="app", producer_byte_rate=1.0),
                     entry(user="", consumer_byte_rate=2.0), entry(client_id="app", request_rate=3.0))
    rebuilt = image_from_snapshot("c", image_to_records(image), image.offset)
    assert rebuilt.client_quotas == image.client_quotas


def test_describe_filters_by_exact_entity_names():
    image, _ = alter(MetadataImage.empty("c"), entry(user="alice", client_id="app", producer_byte_rate=1.0),
                     entry(user="", consumer_byte_rate=2.0), entry(client_id="app", request_rate=3.0), entry(user="alice", request_rate=4.0))

    def described(**wanted):
        response = cq.describe_client_quotas(image, pb.DescribeClientQuotasRequest(**wanted))
        return [cq.entity_of(e.entity) for e in response.entries]

    assert described() == [("", None), ("alice", "app"), ("alice", None), (None, "app")]
    assert described(user="alice") == [("alice", "app"), ("alice", None)]
    assert described(user="") == [("", None)]
    assert described(client_id="app") == [("alice", "app"), (None, "app")]
