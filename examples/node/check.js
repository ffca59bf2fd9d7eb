'use strict';
/**
 * Compares the records a run produced with what it fetched back. Pure: no I/O, so a test can
 * feed it a tampered fetch and see it complain (the negative control of the example's check).
 *
 * A produced record is { index, partition, offset, key, value, headers } where offset is the
 * one its Produce answer acknowledged. A fetched record is the decoded `Record` message.
 */

/** Buffers, strings or null as one comparable string ('null' stays apart from ''). */
function show(bytes) {
  return bytes === null || bytes === undefined ? 'null' : JSON.stringify(Buffer.from(bytes).toString('utf8'));
}

function sameHeaders(sent, got) {
  if (sent.length !== got.length) return false;
  return sent.every((h, i) => h.key === got[i].key && show(h.value) === show(got[i].value));
}

/**
 * Every acknowledged record must be at its acknowledged offset with its key, value and headers.
 * A record found at an offset no answer acknowledged is a duplicate: a retry wrote it twice,
 * which an idempotent producer must never do, whatever outcomes were unknown on the way.
 *
 * @param {Array} sent produced records with acknowledged offsets
 * @param {Map<number, Map<number, object>>} fetched partition -> offset -> fetched Record
 * @returns {{problems: string[], duplicates: number, checked: number}}
 */
function checkRecords(sent, fetched) {
  const problems = [];
  const wanted = new Map(sent.map((r) => [`${r.partition}:${r.offset}`, r]));
  let checked = 0;
  for (const record of sent) {
    const got = (fetched.get(record.partition) || new Map()).get(record.offset);
    const where = `record ${record.index} (partition ${record.partition}, offset ${record.offset})`;
    if (got === undefined) {
      problems.push(`${where} is missing from the fetched records`);
      continue;
    }
    if (show(got.key) !== show(record.key)) problems.push(`${where}: key ${show(got.key)}, expected ${show(record.key)}`);
    if (show(got.value) !== show(record.value)) problems.push(`${where}: value ${show(got.value)}, expected ${show(record.value)}`);
    if (!sameHeaders(record.headers, got.headers)) problems.push(`${where}: headers differ from those sent`);
    checked += 1;
  }
  let duplicates = 0;
  for (const [partition, byOffset] of fetched) {
    for (const [offset, got] of byOffset) {
      if (!wanted.has(`${partition}:${offset}`)) duplicates += 1;
    }
  }
  if (duplicates > 0) {
    problems.push(`${duplicates} fetched records were never acknowledged: a retry wrote records twice, which idempotence must prevent`);
  }
  return { problems, duplicates, checked };
}

module.exports = { checkRecords };
