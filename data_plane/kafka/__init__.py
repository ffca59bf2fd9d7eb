"""The Kafka door: Kafka's wire protocol on each broker (docs/kafka.md).

A translation at the edge into the same partitions, authorizer and producer ids the gRPC
``Broker`` service serves: ``listener`` frames requests and answers them in order per
connection, ``apis`` turns each served request into the calls the gRPC service makes,
``batches`` converts Kafka's record batch v2 to kraftlog's format and back, ``error_codes``
maps kraftlog's error codes to Kafka's. Message types and their serialization come from
``kio`` (generated from Kafka's JSON schemas); nothing here stores anything.
"""
