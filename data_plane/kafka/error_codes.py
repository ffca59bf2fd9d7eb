"""kraftlog's error codes as Kafka answers them: the one table both directions read.

kraftlog's ``ErrorCode`` (proto/common.proto) keeps Kafka's names but not its numbers; a
Kafka client reads Kafka's numbers. Every kraftlog code has an entry (a unit test checks it),
so no answer reaches a Kafka client as a number it would misread. Codes Kafka has no
equivalent for map to the closest code a client handles the same way (the retriable ones to
retriable ones), and the message still says what happened.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaError

from server_common.errors import ErrorCode

TO_KAFKA: dict[ErrorCode, KafkaError] = {
    ErrorCode.NONE: KafkaError.none,
    ErrorCode.UNKNOWN_SERVER_ERROR: KafkaError.unknown_server_error,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: KafkaError.not_leader_or_follower,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: KafkaError.unknown_topic_or_partition,
    ErrorCode.OFFSET_OUT_OF_RANGE: KafkaError.offset_out_of_range,
    ErrorCode.CORRUPT_MESSAGE: KafkaError.corrupt_message,
    ErrorCode.MESSAGE_TOO_LARGE: KafkaError.message_too_large,
    ErrorCode.FENCED_LEADER_EPOCH: KafkaError.fenced_leader_epoch,
    ErrorCode.UNKNOWN_LEADER_EPOCH: KafkaError.unknown_leader_epoch,
    ErrorCode.NOT_ENOUGH_REPLICAS: KafkaError.not_enough_replicas,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: KafkaError.not_enough_replicas_after_append,
    ErrorCode.REQUEST_TIMED_OUT: KafkaError.request_timed_out,
    ErrorCode.STORAGE_ERROR: KafkaError.kafka_storage_error,
    ErrorCode.NOT_CONTROLLER: KafkaError.not_controller,
    ErrorCode.TOPIC_ALREADY_EXISTS: KafkaError.topic_already_exists,
    ErrorCode.INVALID_TOPIC: KafkaError.invalid_topic_exception,
    ErrorCode.INVALID_PARTITIONS: KafkaError.invalid_partitions,
    ErrorCode.INVALID_REPLICATION_FACTOR: KafkaError.invalid_replication_factor,
    ErrorCode.INVALID_CONFIG: KafkaError.invalid_config,
    ErrorCode.STALE_BROKER_EPOCH: KafkaError.stale_broker_epoch,
    ErrorCode.BROKER_NOT_REGISTERED: KafkaError.broker_id_not_registered,
    ErrorCode.INVALID_REQUEST: KafkaError.invalid_request,
    ErrorCode.OUT_OF_ORDER_SEQUENCE: KafkaError.out_of_order_sequence_number,
    ErrorCode.DUPLICATE_SEQUENCE: KafkaError.duplicate_sequence_number,
    ErrorCode.INVALID_PRODUCER_EPOCH: KafkaError.invalid_producer_epoch,
    ErrorCode.UNKNOWN_PRODUCER_ID: KafkaError.unknown_producer_id,
    ErrorCode.INELIGIBLE_REPLICA: KafkaError.ineligible_replica,
    ErrorCode.INVALID_UPDATE_VERSION: KafkaError.invalid_update_version,
    ErrorCode.LEADER_NOT_AVAILABLE: KafkaError.leader_not_available,
    ErrorCode.REASSIGNMENT_IN_PROGRESS: KafkaError.reassignment_in_progress,
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: KafkaError.no_reassignment_in_progress,
    ErrorCode.ELECTION_NOT_NEEDED: KafkaError.election_not_needed,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: KafkaError.preferred_leader_not_available,
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: KafkaError.duplicate_broker_registration,
    ErrorCode.INVALID_TIMESTAMP: KafkaError.invalid_timestamp,
    ErrorCode.REPLICA_NOT_AVAILABLE: KafkaError.replica_not_available,
    ErrorCode.BROKER_NOT_AVAILABLE: KafkaError.broker_not_available,
    ErrorCode.INVALID_REQUIRED_ACKS: KafkaError.invalid_required_acks,
    ErrorCode.OFFSET_NOT_AVAILABLE: KafkaError.offset_not_available,
    ErrorCode.INVALID_RECORD: KafkaError.invalid_record,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: KafkaError.coordinator_not_available,
    ErrorCode.NOT_COORDINATOR: KafkaError.not_coordinator,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: KafkaError.coordinator_load_in_progress,
    ErrorCode.UNKNOWN_MEMBER_ID: KafkaError.unknown_member_id,
    ErrorCode.ILLEGAL_GENERATION: KafkaError.illegal_generation,
    ErrorCode.REBALANCE_IN_PROGRESS: KafkaError.rebalance_in_progress,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: KafkaError.inconsistent_group_protocol,
    ErrorCode.MEMBER_ID_REQUIRED: KafkaError.member_id_required,
    ErrorCode.FENCED_MEMBER_EPOCH: KafkaError.fenced_member_epoch,
    ErrorCode.STALE_MEMBER_EPOCH: KafkaError.stale_member_epoch,
    ErrorCode.GROUP_ID_NOT_FOUND: KafkaError.group_id_not_found,
    ErrorCode.NON_EMPTY_GROUP: KafkaError.non_empty_group,
    ErrorCode.INVALID_GROUP_ID: KafkaError.invalid_group_id,
    ErrorCode.UNRELEASED_INSTANCE_ID: KafkaError.unreleased_instance_id,
    ErrorCode.GROUP_MAX_SIZE_REACHED: KafkaError.group_max_size_reached,
    ErrorCode.UNSUPPORTED_ASSIGNOR: KafkaError.unsupported_assignor,
    ErrorCode.OFFSET_METADATA_TOO_LARGE: KafkaError.offset_metadata_too_large,
    ErrorCode.INVALID_COMMIT_OFFSET: KafkaError.invalid_commit_offset_size,
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: KafkaError.group_subscribed_to_topic,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: KafkaError.topic_authorization_failed,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: KafkaError.group_authorization_failed,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: KafkaError.cluster_authorization_failed,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: KafkaError.transactional_id_authorization_failed,
    ErrorCode.AUTHENTICATION_FAILED: KafkaError.sasl_authentication_failed,
    ErrorCode.INVALID_TXN_STATE: KafkaError.invalid_txn_state,
    ErrorCode.PRODUCER_FENCED: KafkaError.producer_fenced,
    ErrorCode.CONCURRENT_TRANSACTIONS: KafkaError.concurrent_transactions,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: KafkaError.invalid_producer_id_mapping,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: KafkaError.invalid_transaction_timeout,
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: KafkaError.transactional_id_not_found,
    ErrorCode.UNSTABLE_OFFSET_COMMIT: KafkaError.unstable_offset_commit,
    # Kafka has no "this broker is full": it refuses a placement it cannot make as an invalid
    # replica assignment, which clients do not retry, as they should not here.
    ErrorCode.BROKER_CAPACITY_EXCEEDED: KafkaError.invalid_replica_assignment,
}


def to_kafka(code: int) -> KafkaError:
    """Kafka's code for a kraftlog code (a number this broker does not know: unknown server error)."""
    try:
        return TO_KAFKA[ErrorCode(code)]
    except ValueError:
        return KafkaError.unknown_server_error
