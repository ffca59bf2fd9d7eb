'use strict';
/**
 * The little a kraftlog client needs, written from proto/*.proto and docs/protocol.md alone:
 * stubs loaded at run time, one channel per broker with the message-size limits the protocol
 * asks for, a metadata view (who leads what, at which epoch), and the retry rules.
 */
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// docs/protocol.md, "Message-size limits": brokers send and accept messages up to 64 MiB, and a
// Fetch answer may exceed max_bytes; grpc-js would refuse anything over 4 MiB by default.
const MESSAGE_BYTES_MAX = 64 * 1024 * 1024;
const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': MESSAGE_BYTES_MAX,
  'grpc.max_send_message_length': MESSAGE_BYTES_MAX,
};

// docs/protocol.md, "Retry rules": codes that clear up by themselves, and those of them that
// mean the client's picture of leaders is stale (refresh Metadata before the next attempt).
const RETRIABLE = new Set([
  'NOT_LEADER_OR_FOLLOWER', 'UNKNOWN_LEADER_EPOCH', 'FENCED_LEADER_EPOCH', 'LEADER_NOT_AVAILABLE',
  'NOT_ENOUGH_REPLICAS', 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', 'REQUEST_TIMED_OUT',
  'UNKNOWN_TOPIC_OR_PARTITION', 'BROKER_NOT_AVAILABLE', 'REPLICA_NOT_AVAILABLE',
  'OFFSET_NOT_AVAILABLE', 'STORAGE_ERROR', 'NOT_CONTROLLER', 'UNSTABLE_OFFSET_COMMIT',
]);
const REFRESH_METADATA = new Set([
  'NOT_LEADER_OR_FOLLOWER', 'UNKNOWN_LEADER_EPOCH', 'FENCED_LEADER_EPOCH', 'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION', 'BROKER_NOT_AVAILABLE', 'REPLICA_NOT_AVAILABLE', 'STORAGE_ERROR',
]);
// A produce answered with one of these may still have been written: its retry must carry the
// same producer id, epoch and sequence, so the leader recognises it (docs/protocol.md).
const OUTCOME_UNKNOWN = new Set(['NOT_LEADER_OR_FOLLOWER', 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', 'REQUEST_TIMED_OUT', 'UNKNOWN_SERVER_ERROR']);
// gRPC statuses of a broker that is down or unreachable: retry elsewhere after a refresh.
const RETRIABLE_STATUS = new Map([
  [grpc.status.UNAVAILABLE, 'UNAVAILABLE'], [grpc.status.DEADLINE_EXCEEDED, 'DEADLINE_EXCEEDED'],
  [grpc.status.CANCELLED, 'CANCELLED'], [grpc.status.ABORTED, 'ABORTED'],
]);

const TRANSPORT_CAUSES = new Set(RETRIABLE_STATUS.values());

/** Whether the next attempt must first refresh Metadata: the leader or its broker changed. */
function refreshesMetadata(cause) {
  return REFRESH_METADATA.has(cause) || TRANSPORT_CAUSES.has(cause);
}

/** Whether a produce that failed this way may have been written all the same. */
function leavesOutcomeUnknown(cause) {
  return OUTCOME_UNKNOWN.has(cause) || TRANSPORT_CAUSES.has(cause);
}

/** Loads the contract from the repository's proto/ folder (no generated code). */
function loadProtos(repoRoot) {
  const definition = protoLoader.loadSync(['proto/broker.proto', 'proto/controller.proto'], {
    includeDirs: [repoRoot],
    keepCase: true, // field names as in the .proto files
    longs: Number, // offsets and timestamps stay far below 2^53
    enums: String, // error codes by name
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).kraftlog.v1;
}

/** Promise form of a unary call with a deadline. */
function call(stub, method, request, timeoutMs) {
  return new Promise((resolve, reject) => {
    stub[method](request, { deadline: Date.now() + timeoutMs }, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

/** A gRPC failure's retry class, or null when retrying cannot help (a bug or a limit). */
function retriableStatus(err) {
  return RETRIABLE_STATUS.get(err.code) || null;
}

/** Brokers, leaders and epochs as the last Metadata answer said, plus a stub per broker. */
class ClusterView {
  constructor(kraftlog, bootstrap) {
    this.kraftlog = kraftlog;
    this.bootstrap = bootstrap;
    this.stubs = new Map(); // "host:port" -> Broker stub
    this.brokers = new Map(); // broker id -> "host:port"
    this.partitions = new Map(); // partition -> { leader, epoch }
    this.controllers = [];
  }

  stub(address) {
    if (!this.stubs.has(address)) {
      this.stubs.set(address, new this.kraftlog.Broker(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS));
    }
    return this.stubs.get(address);
  }

  /** Asks the known brokers, then the bootstrap list, until one answers Metadata for `topic`. */
  async refresh(topic) {
    const addresses = [...new Set([...this.brokers.values(), ...this.bootstrap])];
    const failures = [];
    for (const address of addresses) {
      try {
        const meta = await call(this.stub(address), 'Metadata', { topics: [topic] }, 5000);
        this.brokers = new Map(meta.brokers.filter((b) => !b.fenced).map((b) => [b.broker_id, `${b.host}:${b.port}`]));
        this.controllers = meta.controllers.map((c) => `${c.host}:${c.port}`);
        const t = meta.topics[0];
        this.partitions = new Map();
        if (t.error_code === 'NONE') {
          for (const p of t.partitions) this.partitions.set(p.partition, { leader: p.leader_id, epoch: p.leader_epoch });
        }
        return t.error_code;
      } catch (err) {
        failures.push(`${address}: ${err.details || err.message}`);
      }
    }
    throw new Error(`no broker answered Metadata (${failures.join('; ')}): check --bootstrap and that the cluster runs (kraftlog cluster status)`);
  }

  /** The leader's address and epoch for a partition, or null while it has none we can reach. */
  leader(partition) {
    const p = this.partitions.get(partition);
    if (!p || p.leader < 0 || !this.brokers.has(p.leader)) return null;
    return { address: this.brokers.get(p.leader), epoch: p.epoch };
  }

  close() {
    for (const stub of this.stubs.values()) stub.close();
  }
}

module.exports = {
  CHANNEL_OPTIONS, RETRIABLE, loadProtos, call, retriableStatus, refreshesMetadata, leavesOutcomeUnknown, ClusterView,
  resolveRepoRoot: () => path.resolve(__dirname, '..', '..'),
};
