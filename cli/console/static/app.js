// The kraftlog console page: Preact + htm (no build step), uPlot charts. Every view reads
// the console's JSON API; live views follow /api/stream/... (server-sent events), closed
// while the tab is hidden. Every change sends the session's CSRF token (docs/console.md).
import { h, render } from "preact";
import { useState, useEffect, useRef } from "preact/hooks";
import htm from "htm";
import uPlot from "uplot";

const html = htm.bind(h);
let csrf = null;

async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

// A live view: the stream while the tab is visible, closed while hidden (no work for a tab nobody looks at).
function useLive(path) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let source = null;
    const open = () => {
      if (source || document.visibilityState === "hidden") return;
      source = new EventSource(`/api/stream/${path}`);
      source.onmessage = (e) => { const m = JSON.parse(e.data); setState({ data: m.data ?? null, error: m.error ?? null }); };
    };
    const close = () => { if (source) { source.close(); source = null; } };
    const onVisibility = () => (document.visibilityState === "hidden" ? close() : open());
    setState({ data: null, error: null });
    open();
    document.addEventListener("visibilitychange", onVisibility);
    return () => { close(); document.removeEventListener("visibilitychange", onVisibility); };
  }, [path]);
  return state;
}

function useOnce(path, deps = []) {
  const [state, setState] = useState({ data: null, error: null, n: 0 });
  const reload = () => setState((s) => ({ ...s, n: s.n + 1 }));
  useEffect(() => { api("GET", path).then((data) => setState((s) => ({ ...s, data, error: null })), (e) => setState((s) => ({ ...s, error: e.message }))); }, [path, state.n, ...deps]);
  return [state, reload];
}

function Confirm({ text, onYes, onNo }) {
  return html`<div class="modal" role="dialog"><div><p data-testid="confirm-text">${text}</p>
    <div class="toolbar"><button class="primary" data-testid="confirm-yes" onClick=${onYes}>Yes, do it</button><button onClick=${onNo}>Cancel</button></div></div></div>`;
}

// An action button that asks first, saying what will happen, then runs `run` and reports.
function useAction() {
  const [pending, setPending] = useState(null);
  const [message, setMessage] = useState(null);
  const ask = (text, run) => setPending({ text, run });
  const modal = pending && html`<${Confirm} text=${pending.text} onNo=${() => setPending(null)} onYes=${async () => {
    const p = pending; setPending(null);
    try { setMessage({ ok: await p.run() || "done" }); } catch (e) { setMessage({ error: e.message }); }
  }} />`;
  const note = message && (message.error ? html`<div class="error" data-testid="action-error">${message.error}</div>` : html`<div class="note" data-testid="action-ok">${message.ok}</div>`);
  return [ask, html`${modal}${note}`];
}

function Chart({ title, series, rows }) {
  const box = useRef(null), plot = useRef(null);
  useEffect(() => {
    const opts = { width: 420, height: 180, title, series: [{}, ...series.map((s, i) => ({ label: s, stroke: ["#2f6fde", "#e07b00", "#2e7d32", "#c62828"][i], spanGaps: true }))], axes: [{}, { size: 60 }] };
    plot.current = new uPlot(opts, [[], ...series.map(() => [])], box.current);
    return () => plot.current.destroy();
  }, []);
  useEffect(() => { if (plot.current && rows) plot.current.setData(rows); }, [rows]);
  return html`<div class="chart" ref=${box}></div>`;
}

const columns = (points, keys) => [points.map((p) => p.t), ...keys.map((k) => points.map((p) => p[k]))];

function Overview() {
  const { data, error } = useLive("overview");
  if (error) return html`<div class="error">${error}</div>`;
  if (!data) return html`<p>loading…</p>`;
  const h = data.health, rates = data.rates || [];
  const card = (n, label, id) => html`<div class=${`card ${n ? "bad" : ""}`}><div class="n" data-testid=${id}>${n}</div><div class="l">${label}</div></div>`;
  return html`<h1>Overview</h1>
    <div class="cards">
      <div class="card"><div class="n">${data.brokers.length}</div><div class="l">brokers</div></div>
      <div class="card"><div class="n">${data.topics}</div><div class="l">topics, ${data.partitions} partitions</div></div>
      ${card(h.under_replicated, "under-replicated", "under-replicated")}${card(h.under_min_isr, "under min ISR", "under-min-isr")}${card(h.offline, "offline", "offline")}
      <div class="card"><div class="n" data-testid="active-controller">${data.active_controller ?? "none"}</div><div class="l">active controller</div></div>
    </div>
    <h2>Brokers</h2>
    <table data-testid="brokers"><tr><th>id</th><th>address</th><th>status</th><th>epoch</th><th>replicas</th></tr>
      ${data.brokers.map((b) => html`<tr><td>${b.broker_id}</td><td>${b.address}</td><td class=${`state-${b.state}`} data-testid=${`broker-${b.broker_id}-state`}>${b.state}</td><td class="num">${b.broker_epoch}</td><td class="num">${b.replicas}${b.max_replicas ? ` / ${b.max_replicas}` : ""}</td></tr>`)}</table>
    <h2>Controllers</h2>
    <table data-testid="controllers"><tr><th>id</th><th>address</th><th>Raft state</th><th>term</th><th>commit index</th><th>applied</th><th>lag</th><th>serves reads</th></tr>
      ${data.controllers.map((c) => html`<tr><td>${c.controller_id}</td><td>${c.grpc_address}</td><td class=${c.reachable ? "" : "bad"}>${c.reachable ? c.state : "unreachable"}</td><td class="num">${c.raft_term}</td><td class="num">${c.commit_index}</td><td class="num">${c.last_applied}</td><td class="num">${c.lag ?? "-"}</td><td>${c.serves_reads ? "yes" : "no"}</td></tr>`)}</table>
    <h2>Traffic</h2>
    ${data.metrics ? "" : html`<p class="note">No metrics endpoints known: start the cluster with --metrics, or give the console --metrics-url.</p>`}
    <div class="charts">
      <${Chart} title="records/s" series=${["in", "out"]} rows=${columns(rates, ["records_in", "records_out"])} />
      <${Chart} title="latency (ms, mean)" series=${["produce", "fetch"]} rows=${columns(rates, ["produce_ms", "fetch_ms"])} />
      <${Chart} title="request errors/s" series=${["errors"]} rows=${columns(rates, ["errors"])} />
    </div>`;
}

// Rows the topic list draws at once: a person reads a few hundred and searches for the rest;
// drawing 10,000 table rows costs the browser seconds on every live update.
const LIST_ROWS_MAX = 500;
const bytes = (n) => (n == null ? "-" : n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

function Topics() {
  const { data, error } = useLive("topics");
  const [filter, setFilter] = useState("");
  const [form, setForm] = useState({ name: "", partitions: 3, replication_factor: 3 });
  const [ask, feedback] = useAction();
  const create = (e) => {
    e.preventDefault();
    ask(`Create topic "${form.name}" with ${form.partitions} partitions, replication factor ${form.replication_factor}?`,
      async () => { await api("POST", "/api/topics", { ...form, partitions: +form.partitions, replication_factor: +form.replication_factor }); return `created ${form.name}`; });
  };
  const matching = (data || []).filter((t) => t.name.includes(filter));
  const rows = matching.slice(0, LIST_ROWS_MAX);
  return html`<h1>Topics</h1>
    <form class="inline" onSubmit=${create}>
      <label>new topic<input data-testid="new-topic-name" required value=${form.name} onInput=${(e) => setForm({ ...form, name: e.target.value })} /></label>
      <label>partitions<input type="number" min="1" data-testid="new-topic-partitions" value=${form.partitions} onInput=${(e) => setForm({ ...form, partitions: e.target.value })} /></label>
      <label>replication factor<input type="number" min="1" data-testid="new-topic-rf" value=${form.replication_factor} onInput=${(e) => setForm({ ...form, replication_factor: e.target.value })} /></label>
      <button class="primary" data-testid="create-topic">Create…</button>
    </form>${feedback}
    <div class="toolbar"><label>search<input data-testid="topic-search" value=${filter} onInput=${(e) => setFilter(e.target.value)} /></label></div>
    ${error && html`<div class="error">${error}</div>`}
    ${data && html`<p class="note" data-testid="topics-count">${matching.length > rows.length ? `showing ${rows.length} of ${matching.length} topics: search to narrow` : `${matching.length} topics`}</p>`}
    ${!data ? html`<p>loading…</p>` : html`<table data-testid="topics"><tr><th>topic</th><th>partitions</th><th>RF</th><th>size</th><th>records/s in</th><th>under-replicated</th><th>offline</th></tr>
      ${rows.map((t) => html`<tr data-testid="topic-row"><td><a href=${`#/topics/${encodeURIComponent(t.name)}`}>${t.name}</a></td><td class="num">${t.partitions}</td><td class="num">${t.replication_factor}</td><td class="num">${bytes(t.size_bytes)}</td><td class="num">${t.records_per_s ?? "-"}</td><td class=${`num ${t.under_replicated ? "bad" : ""}`}>${t.under_replicated}</td><td class=${`num ${t.offline ? "bad" : ""}`}>${t.offline}</td></tr>`)}</table>`}`;
}

const ids = (xs) => (xs && xs.length ? xs.join(",") : "-");

function Topic({ name }) {
  const { data, error } = useLive(`topic/${encodeURIComponent(name)}`);
  const [ask, feedback] = useAction();
  const [total, setTotal] = useState("");
  const [cfg, setCfg] = useState({ key: "", value: "" });
  if (error) return html`<h1>${name}</h1><div class="error">${error}</div>`;
  if (!data) return html`<h1>${name}</h1><p>loading…</p>`;
  const n = data.partitions.length;
  return html`<h1>Topic ${name}</h1>
    <div class="toolbar">
      <a href=${`#/messages/${encodeURIComponent(name)}`}>browse messages</a>
      <label>total partitions<input data-testid="total-partitions" type="number" min=${n + 1} value=${total} onInput=${(e) => setTotal(e.target.value)} /></label>
      <button data-testid="add-partitions" onClick=${() => ask(`Grow ${name} from ${n} to ${total} partitions? Partitions cannot be removed again, and keyed records will map to other partitions.`, async () => { await api("POST", `/api/topics/${encodeURIComponent(name)}/partitions`, { total: +total }); return `${name} now has ${total} partitions`; })}>Add partitions…</button>
      <button class="danger" data-testid="delete-topic" onClick=${() => ask(`Delete topic ${name} and all its records on every broker? This cannot be undone.`, async () => { await api("DELETE", `/api/topics/${encodeURIComponent(name)}`); location.hash = "#/topics"; return `deleted ${name}`; })}>Delete topic…</button>
    </div>${feedback}
    <h2>Partitions</h2>
    <table data-testid="partitions"><tr><th>partition</th><th>leader</th><th>epoch</th><th>replicas</th><th>ISR</th><th>ELR</th><th>HW</th><th>log end</th><th>LEO (lag) per replica</th><th>status</th></tr>
      ${data.partitions.map((p) => html`<tr><td class="num">${p.partition}</td><td class=${p.leader < 0 ? "bad" : ""}>${p.leader < 0 ? "none" : p.leader}</td><td class="num">${p.leader_epoch}</td><td>${ids(p.replicas)}</td><td>${ids(p.isr)}</td><td>${ids(p.eligible_leader_replicas)}</td><td class="num">${p.high_watermark ?? "-"}</td><td class="num">${p.log_end_offset ?? "-"}</td>
        <td>${p.replica_state.map((r) => html`<span class=${r.in_sync ? "" : "bad"}>${r.broker_id}:${r.log_end_offset ?? r.status}${r.lag ? `(${r.lag})` : ""} </span>`)}</td>
        <td class=${p.offline || p.under_replicated ? "bad" : "ok"}>${p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok"}</td></tr>`)}</table>
    <h2>Configs</h2>
    <form class="inline" onSubmit=${(e) => { e.preventDefault(); ask(cfg.value ? `Set ${cfg.key}=${cfg.value} on ${name}?` : `Remove the override of ${cfg.key} on ${name} (back to the default)?`, async () => { await api("POST", `/api/topics/${encodeURIComponent(name)}/configs`, cfg); return `altered ${cfg.key}`; }); }}>
      <label>key<input data-testid="config-key" value=${cfg.key} onInput=${(e) => setCfg({ ...cfg, key: e.target.value })} /></label>
      <label>value (empty: default)<input data-testid="config-value" value=${cfg.value} onInput=${(e) => setCfg({ ...cfg, value: e.target.value })} /></label>
      <button data-testid="alter-config">Alter config…</button></form>
    <table data-testid="configs"><tr><th>key</th><th>value</th><th>source</th></tr>${data.configs.map((c) => html`<tr><td>${c.key}</td><td>${c.value}</td><td>${c.source}</td></tr>`)}</table>`;
}

// How a key, value or header is shown: text, pretty JSON or hex; the choice is remembered.
function decode(field, format) {
  if (!field) return "null";
  const raw = atob(field.b64);
  if (format === "hex") return Array.from(raw, (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join(" ");
  const text = new TextDecoder().decode(Uint8Array.from(raw, (c) => c.charCodeAt(0)));
  if (format === "json") { try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; } }
  return text;
}

function Messages({ name }) {
  const [q, setQ] = useState({ partition: "all", start: "beginning", value: "", limit: 500, read_committed: false, key: "", contains: "", header: "" });
  const [format, setFormat] = useState(localStorage.getItem("kraftlog.format") || "text");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [tail, setTail] = useState(false);
  const { data: topics } = useOnce("/api/view/topics")[0];
  // a timestamp may be typed as milliseconds or as a date (2026-11-28T17:00:00Z)
  const when = (v) => (q.start === "timestamp" && v && isNaN(+v) && !isNaN(Date.parse(v)) ? String(Date.parse(v)) : v);
  const query = (over = {}) => { const p = { ...q, value: when(q.value), ...over }; return new URLSearchParams({ ...p, read_committed: String(p.read_committed) }).toString(); };
  const load = async (over) => {
    try { const r = await api("GET", `/api/topics/${encodeURIComponent(name)}/records?${query(over)}`); setResult(r); setError(null); return r; } catch (e) { setError(e.message); }
  };
  useEffect(() => {  // the live tail: from where the last read ended, once a second while visible
    if (!tail) return;
    let next = result ? result.next : null, stop = false;
    const tick = async () => {
      if (stop) return;
      if (document.visibilityState !== "hidden") {
        const parts = next ? Object.keys(next) : [];
        const offset = next && parts.length === 1 ? next[parts[0]] : undefined;
        const r = await api("GET", `/api/topics/${encodeURIComponent(name)}/records?${query(offset === undefined ? { start: "end", limit: 50 } : { start: "offset", value: offset, partition: parts[0] })}`).catch(() => null);
        if (r && !stop) { next = r.next; if (r.records.length) setResult((old) => ({ ...r, records: [...(old ? old.records : []), ...r.records].slice(-1000) })); }
      }
      setTimeout(tick, 1000);
    };
    tick();
    return () => { stop = true; };
  }, [tail]);
  const chooseFormat = (f) => { localStorage.setItem("kraftlog.format", f); setFormat(f); };
  const download = () => {
    const blob = new Blob([JSON.stringify(result.records.map((r) => ({ ...r, key: decode(r.key, "text"), value: decode(r.value, "text") })), null, 2)], { type: "application/json" });
    const a = document.createElement("a"); a.href = URL.createObjectURL(blob); a.download = `${name}-records.json`; a.click();
  };
  const set = (k) => (e) => setQ({ ...q, [k]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  const topic = (topics || []).find((t) => t.name === name);
  return html`<h1>Messages in ${name}</h1>
    <form class="inline" onSubmit=${(e) => { e.preventDefault(); load(); }}>
      <label>partition<select data-testid="partition" value=${q.partition} onChange=${set("partition")}><option value="all">all</option>${topic && Array.from({ length: topic.partitions }, (_, i) => html`<option value=${i}>${i}</option>`)}</select></label>
      <label>from<select data-testid="start" value=${q.start} onChange=${set("start")}><option value="beginning">beginning</option><option value="offset">offset</option><option value="timestamp">timestamp (ms or date)</option><option value="end">end</option></select></label>
      <label>offset / timestamp<input data-testid="start-value" value=${q.value} onInput=${set("value")} /></label>
      <label>max records<input type="number" min="1" max="2000" value=${q.limit} onInput=${set("limit")} /></label>
      <label>key contains<input data-testid="key-filter" value=${q.key} onInput=${set("key")} /></label>
      <label>value contains<input data-testid="value-filter" value=${q.contains} onInput=${set("contains")} /></label>
      <label>header (name=text)<input data-testid="header-filter" placeholder="trace-id=abc" value=${q.header} onInput=${set("header")} /></label>
      <label>read_committed<input type="checkbox" data-testid="read-committed" checked=${q.read_committed} onChange=${set("read_committed")} /></label>
      <button class="primary" data-testid="read">Read</button>
      <label>live tail<input type="checkbox" data-testid="tail" checked=${tail} onChange=${(e) => setTail(e.target.checked)} /></label>
      <label>show as<select data-testid="format" value=${format} onChange=${(e) => chooseFormat(e.target.value)}><option>text</option><option>json</option><option>hex</option></select></label>
      ${result && html`<button type="button" onClick=${download}>Download</button>`}
    </form>
    ${error && html`<div class="error">${error}</div>`}
    ${result && html`<p class="note" data-testid="records-summary">${result.records.length} records${result.took_ms != null ? ` in ${result.took_ms} ms` : ""}</p>
      <table data-testid="records"><tr><th>partition</th><th>offset</th><th>timestamp</th><th>key</th><th>value</th><th>headers</th><th></th></tr>
      ${result.records.map((r) => html`<tr data-testid="record"><td class="num">${r.partition}</td><td class="num" data-testid="record-offset">${r.offset}</td><td>${new Date(r.timestamp_ms).toISOString()}</td>
        <td><pre class="value">${decode(r.key, format)}</pre></td><td><pre class="value" data-testid="record-value">${decode(r.value, format)}</pre></td>
        <td>${r.headers.map((hd) => html`<div>${hd.key}=${decode(hd.value, format)}</div>`)}</td>
        <td><button onClick=${() => navigator.clipboard.writeText(JSON.stringify({ ...r, key: decode(r.key, "text"), value: decode(r.value, "text") }))}>copy</button></td></tr>`)}</table>`}`;
}

function Groups() {
  const { data, error } = useLive("groups");
  return html`<h1>Consumer groups</h1>${error && html`<div class="error">${error}</div>`}
    ${!data ? html`<p>loading…</p>` : data.length === 0 ? html`<p>no consumer groups</p>` : html`<table data-testid="groups"><tr><th>group</th><th>state</th><th>coordinator</th><th>members</th></tr>
      ${data.map((g) => html`<tr><td><a href=${`#/groups/${encodeURIComponent(g.group_id)}`}>${g.group_id}</a></td><td>${g.state}</td><td>${g.coordinator_id}</td><td class="num">${g.member_count}</td></tr>`)}</table>`}`;
}

function Group({ name }) {
  const { data, error } = useLive(`group/${encodeURIComponent(name)}`);
  const [reset, setReset] = useState({ topic: "", kind: "to-earliest", value: "" });
  const [plan, setPlan] = useState(null);
  const [ask, feedback] = useAction();
  if (error) return html`<h1>${name}</h1><div class="error">${error}</div>`;
  if (!data) return html`<h1>${name}</h1><p>loading…</p>`;
  const dryRun = async (e) => { e.preventDefault(); try { setPlan(await api("POST", `/api/groups/${encodeURIComponent(name)}/reset`, { ...reset, execute: false })); } catch (err) { setPlan({ error: err.message }); } };
  return html`<h1>Group ${name}</h1>
    <p>state <b data-testid="group-state">${data.state}</b>, epoch ${data.group_epoch}, coordinator broker ${data.coordinator_id}, total lag <b data-testid="group-lag">${data.total_lag}</b></p>
    <${Chart} title="total lag (last 10 minutes, as the console saw it)" series=${["lag"]} rows=${columns(data.lag_history.map(([t, lag]) => ({ t, lag })), ["lag"])} />
    <h2>Members</h2>
    <table><tr><th>member</th><th>client id</th><th>host</th><th>epoch</th><th>assignment</th></tr>${data.members.map((m) => html`<tr><td>${m.member_id.slice(0, 12)}</td><td>${m.client_id}</td><td>${m.host}</td><td>${m.member_epoch}</td><td>${m.assignment.join(" ")}</td></tr>`)}</table>
    <h2>Partitions</h2>
    <table data-testid="group-partitions"><tr><th>topic</th><th>partition</th><th>committed</th><th>log end</th><th>lag</th></tr>${data.partitions.map((p) => html`<tr><td>${p.topic}</td><td class="num">${p.partition}</td><td class="num">${p.committed ?? "-"}</td><td class="num">${p.log_end ?? "-"}</td><td class="num">${p.lag ?? "-"}</td></tr>`)}</table>
    <h2>Reset offsets</h2>
    <form class="inline" onSubmit=${dryRun}>
      <label>topic<input data-testid="reset-topic" value=${reset.topic} onInput=${(e) => setReset({ ...reset, topic: e.target.value })} /></label>
      <label>to<select value=${reset.kind} onChange=${(e) => setReset({ ...reset, kind: e.target.value })}><option value="to-earliest">earliest</option><option value="to-latest">latest</option><option value="to-datetime">timestamp (ms)</option><option value="to-offset">offset</option></select></label>
      <label>value<input value=${reset.value} onInput=${(e) => setReset({ ...reset, value: e.target.value })} /></label>
      <button data-testid="reset-dry-run">Dry run</button></form>
    ${plan && (plan.error ? html`<div class="error">${plan.error}</div>` : html`<table data-testid="reset-plan"><tr><th>topic</th><th>partition</th><th>current</th><th>new</th></tr>${plan.plan.map((s) => html`<tr><td>${s.topic}</td><td>${s.partition}</td><td>${s.current ?? "-"}</td><td>${s.target}</td></tr>`)}</table>
      <button class="primary" data-testid="reset-apply" onClick=${() => ask(`Commit the new offsets of ${plan.plan.length} partition${plan.plan.length === 1 ? "" : "s"} for group ${name}? Its consumers must be stopped.`, async () => { await api("POST", `/api/groups/${encodeURIComponent(name)}/reset`, { ...reset, execute: true }); setPlan(null); return "offsets committed"; })}>Apply…</button>`)}
    <div class="toolbar"><button class="danger" onClick=${() => ask(`Delete group ${name} and its committed offsets?`, async () => { await api("DELETE", `/api/groups/${encodeURIComponent(name)}`); location.hash = "#/groups"; return "deleted"; })}>Delete group…</button></div>${feedback}`;
}

function Transactions() {
  const { data, error } = useLive("transactions");
  const [ask, feedback] = useAction();
  return html`<h1>Transactions</h1>${error && html`<div class="error">${error}</div>`}${feedback}
    ${!data ? html`<p>loading…</p>` : data.length === 0 ? html`<p>no transactional ids</p>` : html`<table data-testid="transactions"><tr><th>transactional id</th><th>state</th><th>producer id</th><th>epoch</th><th>open for</th><th>timeout</th><th>partitions</th><th></th></tr>
      ${data.map((t) => html`<tr><td>${t.transactional_id}</td><td>${t.state}</td><td>${t.producer_id}</td><td>${t.producer_epoch}</td><td class="num">${t.open_for_ms == null ? "-" : `${(t.open_for_ms / 1000).toFixed(1)} s`}</td><td class="num">${t.timeout_ms} ms</td><td>${t.partitions.join(" ")}</td>
        <td>${t.state === "Ongoing" && html`<button class="danger" onClick=${() => ask(`Abort the open transaction of ${t.transactional_id}? Its producer is fenced and must initialize again.`, async () => { await api("POST", `/api/transactions/${encodeURIComponent(t.transactional_id)}/abort`); return "aborted"; })}>Abort…</button>`}</td></tr>`)}</table>`}`;
}

function Security() {
  const [{ data, error }, reload] = useOnce("/api/security");
  const [user, setUser] = useState({ name: "", password: "" });
  const [acl, setAcl] = useState({ principal: "User:", host: "*", resource_type: "topic", resource_name: "", pattern_type: "literal", operation: "read", permission: "allow" });
  const [quota, setQuota] = useState({ user: "", client_id: "", key: "producer_byte_rate", value: "" });
  // An entity dimension left blank is left out; "<default>" names that dimension's default (docs/quotas.md).
  const dimension = (v) => (v === "" ? null : v === "<default>" ? "" : v);
  const entityText = (u, c) => [u !== null && `user ${u === "" ? "<default>" : u}`, c !== null && `client id ${c === "" ? "<default>" : c}`].filter(Boolean).join(", ");
  const changeQuota = (user, client_id, key, value) => ask(
    value === null ? `Remove ${key} from ${entityText(user, client_id)}?` : `Set ${key}=${value} for ${entityText(user, client_id)}? Clients over it are throttled from their next request.`,
    async () => { await api("POST", "/api/quotas", { user, client_id, key, value }); return done(value === null ? "quota removed" : "quota set")(); });
  const [ask, feedback] = useAction();
  const done = (text) => () => { reload(); return text; };
  return html`<h1>Users, ACLs and quotas</h1>${error && html`<div class="error">${error}</div>`}${feedback}
    <h2>Users</h2>
    <form class="inline" onSubmit=${(e) => { e.preventDefault(); ask(`Create user ${user.name} (or change its password)?`, async () => { await api("POST", "/api/users", user); setUser({ name: "", password: "" }); return done(`user ${user.name} saved`)(); }); }}>
      <label>name<input data-testid="user-name" value=${user.name} onInput=${(e) => setUser({ ...user, name: e.target.value })} /></label>
      <label>password<input data-testid="user-password" type="password" autocomplete="new-password" value=${user.password} onInput=${(e) => setUser({ ...user, password: e.target.value })} /></label><button data-testid="create-user">Create user…</button></form>
    ${data && html`<table data-testid="users"><tr><th>user</th><th>mechanism</th><th></th></tr>${data.users.map((u) => html`<tr><td>${u.name}</td><td>${u.mechanism}</td><td><button class="danger" onClick=${() => ask(`Delete user ${u.name}? Its open calls are refused from the next one.`, async () => { await api("DELETE", `/api/users/${encodeURIComponent(u.name)}`); return done("deleted")(); })}>delete…</button></td></tr>`)}</table>`}
    <h2>ACLs</h2>
    <form class="inline" onSubmit=${(e) => { e.preventDefault(); ask(`${acl.permission} ${acl.principal} ${acl.operation} on ${acl.resource_type} ${acl.resource_name} (${acl.pattern_type})?`, async () => { await api("POST", "/api/acls/create", { acl }); return done("ACL created")(); }); }}>
      ${["principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission"].map((k) => html`<label>${k}<input data-testid=${`acl-${k}`} value=${acl[k]} onInput=${(e) => setAcl({ ...acl, [k]: e.target.value })} /></label>`)}<button data-testid="create-acl">Create ACL…</button></form>
    ${data && html`<table data-testid="acls"><tr><th>principal</th><th>host</th><th>resource</th><th>pattern</th><th>operation</th><th>permission</th><th></th></tr>${data.acls.map((a) => html`<tr><td>${a.principal}</td><td>${a.host}</td><td>${a.resource_type} ${a.resource_name}</td><td>${a.pattern_type}</td><td>${a.operation}</td><td>${a.permission}</td><td><button class="danger" onClick=${() => ask(`Delete this ACL of ${a.principal}?`, async () => { await api("POST", "/api/acls/delete", { acl: a }); return done("ACL deleted")(); })}>delete…</button></td></tr>`)}</table>`}
    <h2>Client quotas</h2>
    <form class="inline" onSubmit=${(e) => { e.preventDefault(); changeQuota(dimension(quota.user), dimension(quota.client_id), quota.key, quota.value); }}>
      <label>user<input data-testid="quota-user" placeholder="blank: any; <default>" value=${quota.user} onInput=${(e) => setQuota({ ...quota, user: e.target.value })} /></label>
      <label>client id<input data-testid="quota-client" value=${quota.client_id} onInput=${(e) => setQuota({ ...quota, client_id: e.target.value })} /></label>
      <label>quota<select data-testid="quota-key" value=${quota.key} onChange=${(e) => setQuota({ ...quota, key: e.target.value })}>${["producer_byte_rate", "consumer_byte_rate", "request_rate"].map((k) => html`<option>${k}</option>`)}</select></label>
      <label>value<input data-testid="quota-value" type="number" min="0" required value=${quota.value} onInput=${(e) => setQuota({ ...quota, value: e.target.value })} /></label>
      <button data-testid="quota-set">Set quota…</button></form>
    ${data && (data.quotas.length === 0 ? html`<p class="note">no quotas</p>` : html`<table data-testid="quotas"><tr><th>user</th><th>client id</th><th>quota</th><th>value</th><th></th></tr>${data.quotas.flatMap((q) => Object.entries(q.values).map(([k, v]) => html`<tr><td>${q.user === null ? "-" : q.user === "" ? "<default>" : q.user}</td><td>${q.client_id === null ? "-" : q.client_id === "" ? "<default>" : q.client_id}</td><td>${k}</td><td class="num">${v}</td><td><button class="danger" onClick=${() => changeQuota(q.user, q.client_id, k, null)}>remove…</button></td></tr>`))}</table>`)}`;
}

function Chaos() {
  const [{ data, error }] = useOnce("/api/chaos");
  return html`<h1>Chaos reports</h1>${error && html`<div class="error">${error}</div>`}
    ${data && (data.runs.length === 0 ? html`<p class="note">no chaos runs${data.directory ? ` in ${data.directory}` : ": start the console with --chaos-dir DIR (kraftlog chaos run --report-dir DIR)"}</p>`
      : html`<table data-testid="chaos-runs"><tr><th>run</th><th>verdict</th><th>when</th><th></th></tr>${data.runs.map((r) => html`<tr><td>${r.name}</td><td class=${r.outcome === "pass" ? "ok" : "bad"}>${r.outcome} <span class="note">${r.sentence}</span></td><td>${new Date(r.modified_s * 1000).toISOString()}</td><td>${r.has_timeline && html`<a target="_blank" rel="noopener" href=${`/chaos/${encodeURIComponent(r.name)}/report.html`}>timeline</a>`}</td></tr>`)}</table>`)}`;
}

function Login({ onDone }) {
  const [form, setForm] = useState({ username: "", password: "" });
  const [error, setError] = useState(null);
  const submit = async (e) => { e.preventDefault(); try { const s = await api("POST", "/api/login", form); csrf = s.csrf; onDone(s); } catch (err) { setError(err.message); } };
  return html`<form class="login" onSubmit=${submit}><h1>Sign in</h1><p class="note">with your SCRAM user of this cluster</p>
    <label>user<input data-testid="login-user" autocomplete="username" value=${form.username} onInput=${(e) => setForm({ ...form, username: e.target.value })} /></label>
    <label>password<input data-testid="login-password" type="password" autocomplete="current-password" value=${form.password} onInput=${(e) => setForm({ ...form, password: e.target.value })} /></label>
    <button class="primary" data-testid="login-submit">Sign in</button>${error && html`<div class="error">${error}</div>`}</form>`;
}

const PAGES = [["overview", "Overview"], ["topics", "Topics"], ["groups", "Consumer groups"], ["transactions", "Transactions"], ["security", "Users & ACLs"], ["chaos", "Chaos reports"]];

function route(hash) {
  const [page, arg] = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  return { page: page || "overview", arg };
}

function App() {
  const [session, setSession] = useState(null);
  const [where, setWhere] = useState(route(location.hash));
  // A failed /api/session (console busy, restarting) is tried again rather than leaving the page at "loading…".
  useEffect(() => {
    let timer = null;
    const load = () => api("GET", "/api/session").then((s) => { csrf = s.csrf; setSession(s); }).catch(() => { timer = setTimeout(load, 500); });
    load();
    return () => clearTimeout(timer);
  }, []);
  // Effects run after the first paint: a hash changed before then fired its event with no one
  // listening, so the listener is added and the hash read again at once.
  useEffect(() => { const on = () => setWhere(route(location.hash)); addEventListener("hashchange", on); on(); return () => removeEventListener("hashchange", on); }, []);
  if (!session) return html`<p>loading…</p>`;
  if (!session.principal) return html`<${Login} onDone=${setSession} />`;
  const { page, arg } = where;
  const body = page === "topics" && arg ? html`<${Topic} name=${arg} />` : page === "messages" ? html`<${Messages} name=${arg} />`
    : page === "groups" && arg ? html`<${Group} name=${arg} />` : { overview: Overview, topics: Topics, groups: Groups, transactions: Transactions, security: Security, chaos: Chaos }[page];
  const logout = async () => { await api("POST", "/api/logout"); location.reload(); };
  return html`<header><b>kraftlog</b>${PAGES.map(([id, label]) => html`<a href=${`#/${id}`} class=${page === id || (page === "messages" && id === "topics") ? "active" : ""}>${label}</a>`)}
      <span class="who" data-testid="principal">${session.principal}</span>${session.login_required && html`<button onClick=${logout}>Sign out</button>`}</header>
    <main>${typeof body === "function" ? html`<${body} />` : body || html`<p>no page ${page}</p>`}</main>`;
}

const root = document.getElementById("app");
root.textContent = "";  // the "loading…" shown until this module runs
render(html`<${App} />`, root);
