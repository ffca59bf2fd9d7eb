#!/usr/bin/env node
'use strict';
/**
 * A kraftlog client in Node.js on the records path: creates the topic if it is missing,
 * produces N records with keys and headers (acks=-1, idempotent), fetches them back and checks
 * every one. Retriable answers (a leader moved, a broker died) refresh the metadata and try
 * again with the same sequence numbers, so a retry never writes a record twice.
 *
 *   npm ci && node client.js --bootstrap 127.0.0.1:9092 --topic node-example --records 1000
 *
 * Prints progress, then "OK: ..." and exits 0, or "FAILED: ..." (a check that failed, a code no
 * retry can fix, an unreachable cluster) and exits 1; bad usage exits 2. The last line,
 * "RESULT {json}", is for scripts.
 */
const grpc = require('@grpc/grpc-js');
const { checkRecords } = require('./check');
const {
  CHANNEL_OPTIONS, RETRIABLE, loadProtos, call, retriableStatus, refreshesMetadata, leavesOutcomeUnknown, ClusterView, resolveRepoRoot,
} = require('./kraftlog');

const USAGE = `usage: node client.js [--bootstrap HOST:PORT,...] [--topic NAME] [--records N]
       [--partitions N] [--replication-factor N] [--batch N] [--value-bytes N] [--interval-ms MS]
       [--timeout-s S] [--proto-dir DIR]
  --bootstrap          brokers to ask first (default: $KRAFTLOG_BOOTSTRAP or 127.0.0.1:9092)
  --topic              topic to write and read (default node-example; created when missing)
  --records            how many records to produce (default 1000)
  --partitions         partitions of a topic this run creates (default 3)
  --replication-factor replicas of a topic this run creates (default 1)
  --batch              records per partition per Produce request (default 100)
  --value-bytes        pad each value to this many bytes with '.' (default 0: no padding)
  --interval-ms        pause between produce rounds, to spread a run over time (default 0)
  --timeout-s          give up after this long (default 60)
  --proto-dir          the repository root holding proto/*.proto (default: two levels up)`;

function parseArgs(argv) {
  const options = {
    bootstrap: process.env.KRAFTLOG_BOOTSTRAP || '127.0.0.1:9092', topic: 'node-example', records: 1000,
    partitions: 3, 'replication-factor': 1, batch: 100, 'value-bytes': 0, 'interval-ms': 0, 'timeout-s': 60, 'proto-dir': resolveRepoRoot(),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (argv[i] === '--help' || argv[i] === '-h') usage(null, 0);
    if (!argv[i].startsWith('--') || !(name in options) || argv[i + 1] === undefined) usage(`bad option ${argv[i]}`);
    options[name] = typeof options[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
    if (Number.isNaN(options[name])) usage(`${argv[i]} needs a number, got ${argv[i + 1]}`);
  }
  if (options.records < 1 || options.batch < 1) usage('--records and --batch must be at least 1');
  return options;
}

function usage(problem, code = 2) {
  if (problem) console.error(`error: ${problem}`);
  console.error(USAGE);
  process.exit(code);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counts retries by cause and remembers whether a produce's outcome was ever unknown. */
class RetryLog {
  constructor(deadline) {
    this.deadline = deadline;
    this.byCause = {};
    this.outcomeUnknown = false;
    this.attempt = 0;
  }

  note(cause, message) {
    this.byCause[cause] = (this.byCause[cause] || 0) + 1;
    console.log(`retry: ${cause}${message ? ` (${message})` : ''}`);
  }

  /** Backs off before the next attempt, growing to 1 s; fails once the run's deadline passed. */
  async backoff(what) {
    if (Date.now() > this.deadline) throw new Error(`${what} did not finish before --timeout-s; retries so far ${JSON.stringify(this.byCause)}`);
    this.attempt += 1;
    await sleep(Math.min(1000, 50 * 2 ** Math.min(this.attempt, 5)));
  }

  succeeded() {
    this.attempt = 0;
  }
}

/** Creates the topic through the active controller, following NOT_CONTROLLER hints. */
async function createTopic(kraftlog, view, options, retries) {
  let targets = [...view.controllers];
  for (;;) {
    for (const address of targets) {
      const controller = new kraftlog.ControllerService(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
      try {
        const answer = await call(controller, 'CreateTopics', {
          topics: [{ name: options.topic, num_partitions: options.partitions, replication_factor: options['replication-factor'], configs: {} }],
        }, 10000);
        const code = answer.error_code === 'NONE' ? answer.topics[0].error_code : answer.error_code;
        if (code === 'NONE' || code === 'TOPIC_ALREADY_EXISTS') {
          console.log(`created topic ${options.topic}: ${options.partitions} partitions, replication factor ${options['replication-factor']}`);
          return;
        }
        if (code !== 'NOT_CONTROLLER') throw new Error(`CreateTopics: ${code}: ${answer.error_message || answer.topics[0].error_message}`);
        const hint = answer.active_controller;
        if (hint && hint.controller_id >= 0) targets = [`${hint.host}:${hint.port}`, ...view.controllers];
        retries.note('NOT_CONTROLLER', `active controller ${hint ? hint.controller_id : -1}`);
        break;
      } catch (err) {
        if (err.code === undefined) throw err;
        retries.note(retriableStatus(err) || 'CONTROLLER_ERROR', `${address}: ${err.details}`);
      } finally {
        controller.close();
      }
    }
    await retries.backoff('creating the topic');
  }
}

/** Waits until Metadata shows a reachable leader for every partition of the topic. */
async function awaitLeaders(view, options, retries) {
  for (;;) {
    const code = await view.refresh(options.topic);
    const partitions = [...view.partitions.keys()];
    if (code === 'NONE' && partitions.length > 0 && partitions.every((p) => view.leader(p))) return partitions.sort((a, b) => a - b);
    await retries.backoff(`waiting for leaders of ${options.topic} (${code})`);
  }
}

/**
 * Sends one request per leader broker for all the partitions it leads and returns, per
 * partition, the answer or the retriable cause. A gRPC failure hits every partition of that request.
 */
async function perLeader(view, partitions, method, buildPartition, wrap, retries) {
  const byLeader = new Map();
  const outcomes = new Map();
  for (const p of partitions) {
    const leader = view.leader(p);
    if (!leader) {
      outcomes.set(p, { cause: 'LEADER_NOT_AVAILABLE' });
      continue;
    }
    if (!byLeader.has(leader.address)) byLeader.set(leader.address, []);
    byLeader.get(leader.address).push(buildPartition(p, leader.epoch));
  }
  await Promise.all([...byLeader].map(async ([address, entries]) => {
    try {
      const answer = await call(view.stub(address), method, wrap(entries), 15000);
      for (const t of answer.topics) for (const r of t.partitions) outcomes.set(r.partition, { answer: r });
    } catch (err) {
      const cause = retriableStatus(err);
      if (!cause) throw new Error(`${method} to ${address}: gRPC ${err.code}: ${err.details} (not retriable: see docs/protocol.md)`);
      for (const entry of entries) outcomes.set(entry.partition, { cause, message: `${address}: ${err.details}` });
    }
  }));
  for (const [p, outcome] of outcomes) {
    if (outcome.answer && outcome.answer.error_code !== 'NONE') {
      const code = outcome.answer.error_code;
      if (!RETRIABLE.has(code)) throw new Error(`${method} partition ${p}: ${code}: ${outcome.answer.error_message}`);
      outcomes.set(p, { cause: code, message: `partition ${p}: ${outcome.answer.error_message}` });
    }
    const { cause, message } = outcomes.get(p);
    if (cause) retries.note(cause, message);
  }
  return outcomes;
}

/** A producer id for idempotent produce (docs/protocol.md, "Idempotent produce on the records path"). */
async function initProducerId(view, retries) {
  for (;;) {
    const address = [...view.brokers.values()][0];
    try {
      const answer = await call(view.stub(address), 'InitProducerId', {}, 10000);
      if (answer.error_code === 'NONE') return { producer_id: answer.producer_id, producer_epoch: answer.producer_epoch };
      if (!RETRIABLE.has(answer.error_code)) throw new Error(`InitProducerId: ${answer.error_code}: ${answer.error_message}`);
      retries.note(answer.error_code, answer.error_message);
    } catch (err) {
      if (err.code === undefined || !retriableStatus(err)) throw err;
      retries.note(retriableStatus(err), `${address}: ${err.details}`);
    }
    await retries.backoff('getting a producer id');
  }
}

/**
 * Produces every record, acks=-1, and sets each one's acknowledged offset. Idempotent: each
 * partition numbers its records from 0, a request carries the sequence of its first record,
 * and a retry resends the same records with the same numbers (one request per partition at a
 * time keeps them in order), so the leader answers a retry of a written batch with its
 * original offset instead of writing it again.
 */
async function produceAll(view, records, options, retries) {
  const producer = await initProducerId(view, retries);
  const queues = new Map([...view.partitions.keys()].map((p) => [p, records.filter((r) => r.partition === p)]));
  const sequences = new Map([...queues.keys()].map((p) => [p, 0]));
  let acked = 0;
  while (acked < records.length) {
    const ready = [...queues.keys()].filter((p) => queues.get(p).length > 0);
    const outcomes = await perLeader(view, ready, 'Produce', (p, epoch) => ({
      partition: p,
      current_leader_epoch: epoch,
      records: queues.get(p).slice(0, options.batch).map((r) => ({ key: r.key, value: r.value, headers: r.headers })),
      ...producer,
      base_sequence: sequences.get(p),
    }), (entries) => ({ acks: -1, timeout_ms: 10000, client_id: 'node-example', topics: [{ topic: options.topic, partitions: entries }] }), retries);
    let refresh = false;
    for (const [p, outcome] of outcomes) {
      if (outcome.answer) {
        const sent = queues.get(p).splice(0, options.batch);
        sent.forEach((r, i) => { r.offset = outcome.answer.base_offset + i; });
        sequences.set(p, (sequences.get(p) + sent.length) % 2 ** 31);
        acked += sent.length;
        continue;
      }
      refresh = refresh || refreshesMetadata(outcome.cause);
      retries.outcomeUnknown = retries.outcomeUnknown || leavesOutcomeUnknown(outcome.cause);
    }
    console.log(`produced ${acked}/${records.length}`);
    if (refresh) await view.refresh(options.topic);
    if ([...outcomes.values()].some((o) => !o.answer)) await retries.backoff('producing');
    else {
      retries.succeeded();
      if (options['interval-ms'] > 0 && acked < records.length) await sleep(options['interval-ms']);
    }
  }
}

/** Fetches every partition from its first to its last acknowledged offset, as plain records. */
async function fetchAll(view, records, options, retries) {
  const ranges = new Map();
  for (const r of records) {
    const range = ranges.get(r.partition) || { next: r.offset, end: r.offset + 1 };
    ranges.set(r.partition, { next: Math.min(range.next, r.offset), end: Math.max(range.end, r.offset + 1) });
  }
  const fetched = new Map([...ranges.keys()].map((p) => [p, new Map()]));
  for (;;) {
    const wanted = [...ranges.keys()].filter((p) => ranges.get(p).next < ranges.get(p).end);
    if (wanted.length === 0) return fetched;
    const outcomes = await perLeader(view, wanted, 'Fetch', (p, epoch) => ({
      partition: p, fetch_offset: ranges.get(p).next, partition_max_bytes: 0, current_leader_epoch: epoch,
    }), (entries) => ({
      max_wait_ms: 500, min_bytes: 1, max_bytes: 1 << 20, format: 'RECORDS', client_id: 'node-example',
      topics: [{ topic: options.topic, partitions: entries }],
    }), retries);
    let failed = false;
    for (const [p, outcome] of outcomes) {
      if (!outcome.answer) {
        failed = true;
        continue;
      }
      const range = ranges.get(p);
      for (const record of outcome.answer.records) {
        if (record.offset < range.end) fetched.get(p).set(record.offset, record);
        range.next = Math.max(range.next, record.offset + 1);
      }
    }
    if (failed) {
      await view.refresh(options.topic); // a fetch has no outcome to lose: refresh on any failure
      await retries.backoff('fetching');
    } else retries.succeeded();
  }
}

function makeRecords(count, partitions, valueBytes) {
  const stamp = Date.now().toString(36);
  return Array.from({ length: count }, (_, index) => ({
    index,
    partition: partitions[index % partitions.length],
    key: index % 10 === 0 ? null : Buffer.from(`key-${index}`), // some null keys: absent, not empty
    value: Buffer.from(`value-${index}-${stamp}`.padEnd(valueBytes, '.')),
    headers: [
      { key: 'index', value: Buffer.from(String(index)) },
      { key: 'source', value: Buffer.from('node-example') },
    ],
    offset: -1,
  }));
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const kraftlog = loadProtos(options['proto-dir']);
  const view = new ClusterView(kraftlog, options.bootstrap.split(',').filter(Boolean));
  const retries = new RetryLog(Date.now() + options['timeout-s'] * 1000);
  let result;
  try {
    if ((await view.refresh(options.topic)) === 'UNKNOWN_TOPIC_OR_PARTITION') await createTopic(kraftlog, view, options, retries);
    const partitions = await awaitLeaders(view, options, retries);
    const records = makeRecords(options.records, partitions, options['value-bytes']);
    await produceAll(view, records, options, retries);
    const fetched = await fetchAll(view, records, options, retries);
    const check = checkRecords(records, fetched);
    result = {
      ok: check.problems.length === 0, produced: records.length, checked: check.checked, duplicates: check.duplicates,
      retries: retries.byCause, outcomeUnknown: retries.outcomeUnknown,
    };
    if (result.ok) {
      console.log(`OK: ${records.length} records produced to ${options.topic} (${partitions.length} partitions) and fetched back with `
        + `matching keys, values, headers and offsets; ${check.duplicates} duplicates, retries ${JSON.stringify(retries.byCause)}`);
    } else {
      console.log(`FAILED: ${check.problems.length} problems, first ones:\n  ${check.problems.slice(0, 10).join('\n  ')}`);
    }
  } catch (err) {
    console.log(`FAILED: ${err.message}`);
    result = { ok: false, error: err.message, retries: retries.byCause };
  } finally {
    view.close();
  }
  console.log(`RESULT ${JSON.stringify(result)}`);
  process.exitCode = result.ok ? 0 : 1;
}

main();
