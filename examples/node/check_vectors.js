'use strict';
/**
 * Checks record_batch.js against kraftlog's record batch test vectors: every valid vector must
 * decode to its recorded header, uncompressed body and records, and its records must encode
 * back to that body (and, uncompressed, to the very batch bytes once stamped as the leader
 * does); every invalid one marked readers_reject must be refused.
 *
 *   node check_vectors.js [path/to/record_batches.json]
 *
 * Prints one line per problem and a final `RESULT {json}`; exit status 0 when all hold, 1 otherwise.
 */
const fs = require('node:fs');
const path = require('node:path');
const { decodeBatch, encodeBatch, encodeBody, setLogAppendTime, stampBatch } = require('./record_batch');

const DEFAULT_FILE = path.join(__dirname, '..', '..', 'proto', 'testdata', 'record_batches.json');

const hex = (bytes) => (bytes === null ? null : Buffer.from(bytes).toString('hex'));

/** The problems of one valid vector (an empty list when it decodes as recorded). */
function validProblems(vector) {
  let decoded;
  try {
    decoded = decodeBatch(Buffer.from(vector.batch_hex, 'hex'));
  } catch (err) {
    return [`refused: ${err.message}`];
  }
  const problems = [];
  for (const [field, expected] of Object.entries(vector.header)) {
    if (decoded.header[field] !== expected) problems.push(`header ${field} is ${decoded.header[field]}, expected ${expected}`);
  }
  if (hex(decoded.body) !== vector.body_hex) problems.push('the uncompressed body differs from body_hex');
  const got = decoded.records.map((r) => ({
    offset: r.offset,
    timestamp_ms: r.timestamp_ms,
    key_hex: hex(r.key),
    value_hex: hex(r.value),
    headers: r.headers.map((h) => ({ key: h.key, value_hex: hex(h.value) })),
  }));
  if (got.length !== vector.records.length) problems.push(`${got.length} records, expected ${vector.records.length}`);
  got.forEach((record, i) => {
    if (JSON.stringify(record) !== JSON.stringify(vector.records[i])) {
      problems.push(`record ${i} is ${JSON.stringify(record)}, expected ${JSON.stringify(vector.records[i])}`);
    }
  });
  return problems;
}

const unhex = (text) => (text === null ? null : Buffer.from(text, 'hex'));

/** Encode the vector's records again: the body must match body_hex, an uncompressed batch batch_hex. */
function encodeProblems(vector) {
  const { header } = vector;
  const recorded = Buffer.from(vector.body_hex, 'hex');
  const records = vector.records.map((r, i) => ({
    key: unhex(r.key_hex),
    value: unhex(r.value_hex),
    headers: r.headers.map((h) => ({ key: h.key, value: unhex(h.value_hex) })),
    // LogAppendTime records read as max_timestamp; the producer's deltas stay in the body
    timestamp_ms: header.timestamp_type === 1 ? header.first_timestamp + recorded.readInt32LE(4 * i) : r.timestamp_ms,
  }));
  if (!encodeBody(records, header.first_timestamp).equals(recorded)) return ['its records encode to another body'];
  if (header.compression !== 'none') return [];
  const batch = encodeBatch(records, { producerId: header.producer_id, producerEpoch: header.producer_epoch, baseSequence: header.base_sequence });
  stampBatch(batch, header.base_offset, header.leader_epoch);
  if (header.timestamp_type === 1) setLogAppendTime(batch, header.max_timestamp);
  return batch.toString('hex') === vector.batch_hex ? [] : [`its records encode to other bytes: ${batch.toString('hex')}`];
}

function invalidProblems(vector) {
  if (!vector.readers_reject) return [];
  try {
    decodeBatch(Buffer.from(vector.batch_hex, 'hex'));
  } catch {
    return [];
  }
  return [`decoded, but a reader must refuse it (${vector.error_code})`];
}

function main() {
  const file = process.argv[2] || DEFAULT_FILE;
  const document = JSON.parse(fs.readFileSync(file, 'utf8'));
  const problems = [
    ...document.valid.flatMap((v) => [...validProblems(v), ...encodeProblems(v)].map((p) => `valid ${v.name}: ${p}`)),
    ...document.invalid.flatMap((v) => invalidProblems(v).map((p) => `invalid ${v.name}: ${p}`)),
  ];
  problems.forEach((p) => console.log(p));
  const result = { ok: problems.length === 0, valid: document.valid.length, invalid: document.invalid.length, problems: problems.length };
  console.log(`RESULT ${JSON.stringify(result)}`);
  process.exitCode = result.ok ? 0 : 1;
}

main();
