'use strict';
/**
 * A decoder (and an uncompressed encoder) of kraftlog record batches (the fast path's `batches` bytes), written from the
 * "Record batch format" section of docs/protocol.md alone, and checked against the test
 * vectors in proto/testdata/record_batches.json by check_vectors.js.
 *
 * Little-endian throughout; CRC-32 (zlib's, not CRC-32C) over bytes 21 .. end; a columnar
 * body, compressed as one lz4 or zstd frame. lz4 frames are decoded here in plain JavaScript;
 * zstd uses node:zlib (Node.js >= 22.15), after checking the body is exactly one frame.
 * int64 fields are returned as Numbers (exact below 2^53, which offsets and ms timestamps are).
 */
const zlib = require('node:zlib');

const HEADER_SIZE = 61;
const MAGIC = 2;
const BODY_DECOMPRESSED_MAX = 64 << 20;
const COMPRESSION = { 0: 'none', 1: 'lz4', 2: 'zstd' };

class BatchError extends Error {}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (reflected 0xEDB88320, init and final XOR 0xFFFFFFFF). */
function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function readHeader(buf, pos) {
  const i64 = (at) => Number(buf.readBigInt64LE(pos + at));
  return {
    base_offset: i64(0),
    batch_length: buf.readInt32LE(pos + 8),
    leader_epoch: buf.readInt32LE(pos + 12),
    magic: buf.readInt8(pos + 16),
    crc: buf.readUInt32LE(pos + 17),
    attributes: buf.readInt16LE(pos + 21),
    last_offset_delta: buf.readInt32LE(pos + 23),
    first_timestamp: i64(27),
    max_timestamp: i64(35),
    producer_id: i64(43),
    producer_epoch: buf.readInt16LE(pos + 51),
    base_sequence: buf.readInt32LE(pos + 53),
    record_count: buf.readInt32LE(pos + 57),
  };
}

// ------------------------------------------------------------------------- lz4 frame

/** One lz4 block's sequences, appended to out (earlier blocks stay addressable: linked blocks). */
function lz4Block(src, out, outPos) {
  let ip = 0;
  let op = outPos;
  const length = (initial) => {
    let n = initial;
    if (n === 15) {
      let b;
      do {
        if (ip >= src.length) throw new BatchError('lz4 block ends inside a length');
        b = src[ip++];
        n += b;
      } while (b === 255);
    }
    return n;
  };
  while (ip < src.length) {
    const token = src[ip++];
    const literals = length(token >>> 4);
    if (ip + literals > src.length || op + literals > out.length) throw new BatchError('lz4 literals run past the block or the frame size');
    src.copy(out, op, ip, ip + literals);
    ip += literals;
    op += literals;
    if (ip === src.length) break; // the last sequence has literals only
    if (ip + 2 > src.length) throw new BatchError('lz4 block ends inside a match offset');
    const offset = src[ip] | (src[ip + 1] << 8);
    ip += 2;
    const matchLength = length(token & 15) + 4;
    if (offset === 0 || offset > op) throw new BatchError(`lz4 match offset ${offset} points before the output`);
    if (op + matchLength > out.length) throw new BatchError('lz4 match runs past the frame size');
    for (let k = 0; k < matchLength; k++, op++) out[op] = out[op - offset]; // may overlap itself
  }
  return op;
}

/** The content of a body that must be exactly one lz4 frame. */
function lz4Frame(body) {
  if (body.length < 7 || body.readUInt32LE(0) !== 0x184d2204) throw new BatchError('lz4 body does not start with an lz4 frame header');
  const flg = body[4];
  if (flg >>> 6 !== 1) throw new BatchError('lz4 frame version is not 01');
  const blockChecksum = (flg >>> 4) & 1;
  const hasContentSize = (flg >>> 3) & 1;
  const contentChecksum = (flg >>> 2) & 1;
  let pos = 6 + (hasContentSize ? 8 : 0) + (flg & 1 ? 4 : 0) + 1; // FLG BD [size] [dict id] HC
  const declared = hasContentSize ? Number(body.readBigUInt64LE(6)) : null;
  if (declared !== null && declared > BODY_DECOMPRESSED_MAX) throw new BatchError(`lz4 body declares ${declared} bytes, over the limit`);
  let out = Buffer.alloc(declared ?? Math.min(BODY_DECOMPRESSED_MAX, 1 << 20));
  let outPos = 0;
  for (;;) {
    if (pos + 4 > body.length) throw new BatchError('lz4 frame ends without an end mark');
    const word = body.readUInt32LE(pos);
    pos += 4;
    if (word === 0) break;
    const size = word & 0x7fffffff;
    if (pos + size + 4 * blockChecksum > body.length) throw new BatchError('lz4 block runs past the body');
    const block = body.subarray(pos, pos + size);
    pos += size + 4 * blockChecksum;
    if (declared === null) out = grown(out, outPos + (word >>> 31 ? size : 255 * size));
    if (word >>> 31) {
      if (outPos + size > out.length) throw new BatchError('lz4 block runs past the frame size');
      block.copy(out, outPos);
      outPos += size;
    } else {
      outPos = lz4Block(block, out, outPos);
    }
  }
  pos += 4 * contentChecksum;
  if (pos !== body.length) throw new BatchError('lz4 body is not exactly one lz4 frame');
  if (declared !== null && outPos !== declared) throw new BatchError(`lz4 frame holds ${outPos} bytes, declares ${declared}`);
  return out.subarray(0, outPos);
}

function grown(out, needed) {
  if (needed <= out.length) return out;
  const size = Math.min(BODY_DECOMPRESSED_MAX, Math.max(needed, 2 * out.length));
  const bigger = Buffer.alloc(size);
  out.copy(bigger);
  return bigger;
}

// ------------------------------------------------------------------------- zstd frame

/** Bytes taken by the zstd frame at the start of body (header, blocks, checksum). */
function zstdFrameLength(body) {
  if (body.length < 6 || body.readUInt32LE(0) !== 0xfd2fb528) throw new BatchError('zstd body does not start with a zstd frame header');
  const fhd = body[4];
  const singleSegment = (fhd >>> 5) & 1;
  const contentSizeBytes = [singleSegment, 2, 4, 8][fhd >>> 6];
  let pos = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][fhd & 3] + contentSizeBytes;
  for (;;) {
    if (pos + 3 > body.length) throw new BatchError('zstd frame ends inside a block header');
    const header = body[pos] | (body[pos + 1] << 8) | (body[pos + 2] << 16);
    const type = (header >>> 1) & 3;
    pos += 3 + (type === 1 ? 1 : header >>> 3); // an RLE block holds one byte
    if (header & 1) break;
  }
  return pos + ((fhd >>> 2) & 1 ? 4 : 0);
}

function zstdFrame(body) {
  if (typeof zlib.zstdDecompressSync !== 'function') throw new BatchError(`zstd needs Node.js >= 22.15 (this is ${process.version})`);
  if (zstdFrameLength(body) !== body.length) throw new BatchError('zstd body is not exactly one zstd frame');
  try {
    return zlib.zstdDecompressSync(body, { maxOutputLength: BODY_DECOMPRESSED_MAX });
  } catch (err) {
    throw new BatchError(`zstd body does not decompress (${err.message})`);
  }
}

// ------------------------------------------------------------------------- batches

/** The validated header of the batch at pos (structure and CRC). */
function checkedHeader(buf, pos) {
  if (buf.length - pos < HEADER_SIZE) throw new BatchError(`only ${buf.length - pos} bytes left at ${pos}, a header needs ${HEADER_SIZE}`);
  const h = readHeader(buf, pos);
  if (h.magic !== MAGIC) throw new BatchError(`magic ${h.magic}, expected ${MAGIC}`);
  if (h.batch_length < HEADER_SIZE || h.batch_length > buf.length - pos) throw new BatchError(`batch_length ${h.batch_length} does not fit`);
  if (h.record_count < 1 || h.last_offset_delta !== h.record_count - 1) throw new BatchError('record_count and last_offset_delta disagree');
  h.compression = COMPRESSION[h.attributes & 7];
  if (h.compression === undefined) throw new BatchError(`unknown compression code ${h.attributes & 7}`);
  h.timestamp_type = (h.attributes >>> 3) & 1;
  const crc = crc32(buf.subarray(pos + 21, pos + h.batch_length));
  if (crc !== h.crc) throw new BatchError(`CRC ${crc} does not match stored ${h.crc}`);
  return h;
}

/** Cut count items out of body, lengths at lengthsAt (int32, -1 = null), items from blobAt. */
function column(body, lengthsAt, count, blobAt) {
  const items = [];
  let at = blobAt;
  for (let i = 0; i < count; i++) {
    const length = body.readInt32LE(lengthsAt + 4 * i);
    if (length < -1) throw new BatchError(`length ${length} below -1`);
    if (length === -1) {
      items.push(null);
      continue;
    }
    if (at + length > body.length) throw new BatchError('lengths run past the body');
    items.push(body.subarray(at, at + length));
    at += length;
  }
  return { items, end: at };
}

/** Decode the batch at pos: { header, records: [{ offset, timestamp_ms, key, value, headers: [{ key, value }] }] }. */
function decodeBatch(buf, pos = 0) {
  const h = checkedHeader(buf, pos);
  let body = buf.subarray(pos + HEADER_SIZE, pos + h.batch_length);
  if (h.compression === 'lz4') body = lz4Frame(body);
  if (h.compression === 'zstd') body = zstdFrame(body);
  const n = h.record_count;
  if (16 * n > body.length) throw new BatchError('body too short for its length columns');
  let headerTotal = 0;
  for (let i = 0; i < n; i++) {
    const count = body.readInt32LE(12 * n + 4 * i);
    if (count < 0) throw new BatchError('negative header count');
    headerTotal += count;
  }
  const lengthsEnd = 16 * n + 8 * headerTotal;
  if (lengthsEnd > body.length) throw new BatchError('body too short for its header length columns');
  const keys = column(body, 4 * n, n, lengthsEnd);
  const values = column(body, 8 * n, n, keys.end);
  const names = column(body, 16 * n, headerTotal, values.end);
  const headerValues = column(body, 16 * n + 4 * headerTotal, headerTotal, names.end);
  if (headerValues.end !== body.length) throw new BatchError(`lengths add up to ${headerValues.end} bytes, the body holds ${body.length}`);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const records = [];
  let headerIndex = 0;
  for (let i = 0; i < n; i++) {
    const count = body.readInt32LE(12 * n + 4 * i);
    const headers = [];
    for (let k = 0; k < count; k++, headerIndex++) {
      const name = names.items[headerIndex];
      if (name === null) throw new BatchError('a header key is null');
      let key;
      try {
        key = decoder.decode(name);
      } catch {
        throw new BatchError('a header key is not utf-8');
      }
      headers.push({ key, value: headerValues.items[headerIndex] });
    }
    const delta = body.readInt32LE(4 * i);
    records.push({
      offset: h.base_offset + i,
      timestamp_ms: h.timestamp_type === 1 ? h.max_timestamp : h.first_timestamp + delta,
      key: keys.items[i],
      value: values.items[i],
      headers,
    });
  }
  return { header: h, records, body };
}

// ------------------------------------------------------------------------- encoding

/**
 * The uncompressed body of records [{ key, value, headers: [{ key, value }], timestamp_ms }]
 * (key, value and header values Buffers or null; header keys strings), deltas from firstTimestamp.
 */
function encodeBody(records, firstTimestamp) {
  const n = records.length;
  const headers = records.flatMap((r) => r.headers);
  const h = headers.length;
  const names = headers.map((x) => Buffer.from(x.key, 'utf8'));
  const columns = Buffer.alloc(4 * (4 * n + 2 * h));
  const length = (item) => (item === null ? -1 : item.length);
  records.forEach((r, i) => {
    columns.writeInt32LE(r.timestamp_ms - firstTimestamp, 4 * i);
    columns.writeInt32LE(length(r.key), 4 * (n + i));
    columns.writeInt32LE(length(r.value), 4 * (2 * n + i));
    columns.writeInt32LE(r.headers.length, 4 * (3 * n + i));
  });
  headers.forEach((x, k) => {
    columns.writeInt32LE(names[k].length, 4 * (4 * n + k));
    columns.writeInt32LE(length(x.value), 4 * (4 * n + h + k));
  });
  const present = (items) => items.filter((item) => item !== null);
  return Buffer.concat([
    columns,
    ...present(records.map((r) => r.key)),
    ...present(records.map((r) => r.value)),
    ...names,
    ...present(headers.map((x) => x.value)),
  ]);
}

/**
 * One uncompressed batch as a producer sends it: base_offset 0, leader_epoch -1, CRC set.
 * options: producerId, producerEpoch, baseSequence (default -1: not idempotent).
 */
function encodeBatch(records, { producerId = -1, producerEpoch = -1, baseSequence = -1 } = {}) {
  const first = records[0].timestamp_ms;
  const body = encodeBody(records, first);
  const out = Buffer.alloc(HEADER_SIZE + body.length);
  out.writeBigInt64LE(0n, 0);
  out.writeInt32LE(out.length, 8);
  out.writeInt32LE(-1, 12);
  out.writeInt8(MAGIC, 16);
  out.writeInt16LE(0, 21);
  out.writeInt32LE(records.length - 1, 23);
  out.writeBigInt64LE(BigInt(first), 27);
  out.writeBigInt64LE(BigInt(Math.max(...records.map((r) => r.timestamp_ms))), 35);
  out.writeBigInt64LE(BigInt(producerId), 43);
  out.writeInt16LE(producerEpoch, 51);
  out.writeInt32LE(baseSequence, 53);
  out.writeInt32LE(records.length, 57);
  body.copy(out, HEADER_SIZE);
  out.writeUInt32LE(crc32(out.subarray(21)), 17);
  return out;
}

/** What a leader writes on append: base offset and leader epoch, outside the CRC. */
function stampBatch(buf, baseOffset, leaderEpoch) {
  buf.writeBigInt64LE(BigInt(baseOffset), 0);
  buf.writeInt32LE(leaderEpoch, 12);
}

/** What a leader of a LogAppendTime topic also writes: bit 3, max_timestamp, and a new CRC. */
function setLogAppendTime(buf, timestampMs) {
  buf.writeInt16LE(buf.readInt16LE(21) | 0x08, 21);
  buf.writeBigInt64LE(BigInt(timestampMs), 35);
  buf.writeUInt32LE(crc32(buf.subarray(21, buf.readInt32LE(8))), 17);
}

/** Every batch of a `batches` field, in order. */
function decodeBatches(buf) {
  const batches = [];
  for (let pos = 0; pos < buf.length; ) {
    const batch = decodeBatch(buf, pos);
    batches.push(batch);
    pos += batch.header.batch_length;
  }
  return batches;
}

module.exports = { BatchError, HEADER_SIZE, crc32, decodeBatch, decodeBatches, encodeBody, encodeBatch, stampBatch, setLogAppendTime };
