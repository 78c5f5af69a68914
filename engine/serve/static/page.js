// The live page: polls /v1/kvtestbed/requests for requests finished since the last poll and adds a row
// per request (newest first); says so when --record stopped (a write failed). With an API key, open the
// page as /#key=KEY: the key is sent as a header.
"use strict";
const key = new URLSearchParams(location.hash.slice(1)).get("key");
const body = document.querySelector("#requests tbody");
let after = 0;

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function ms(seconds) {
  return seconds === undefined || seconds === null ? "" : `${(seconds * 1000).toFixed(0)} ms`;
}

// The text around a spot marked ⟂, 24 characters either side, line breaks shown as ↵.
function around(text) {
  const [before, after = ""] = text.split("⟂");
  return `${before.slice(-24)}⟂${after.slice(0, 24)}`.replaceAll("\n", "↵");
}

function strip(r) {
  const box = document.createElement("div");
  box.className = "strip";
  const n = Math.max(r.prompt_tokens, 1);
  const at = (token) => `${(100 * token) / n}%`;
  for (const [label, kind, start, end] of r.regions) {
    const d = document.createElement("div");
    d.className = `region kind-${kind}`;
    Object.assign(d.style, { left: at(start), width: at(end - start) });
    d.title = `${label}: tokens ${start}-${end}`;
    box.append(d);
  }
  for (const [cls, start, end] of [["cached", 0, r.cached_tokens], ["computed", r.cached_tokens, n]]) {
    const d = document.createElement("div");
    d.className = `cache ${cls}`;
    Object.assign(d.style, { left: at(start), width: at(end - start) });
    box.append(d);
  }
  if (r.divergence) {
    const d = document.createElement("div");
    d.className = "mark";
    d.style.left = at(r.divergence.token);
    d.title = `first change: token ${r.divergence.token} (${r.divergence.region})`;
    box.append(d);
  }
  return box;
}

function add(r) {
  const row = body.insertRow(0);
  row.dataset.session = r.session_id;
  cell(row, r.seq, "num");
  cell(row, new Date(r.time * 1000).toLocaleTimeString());
  cell(row, r.api);
  cell(row, r.session_id, "session");
  cell(row, r.prompt_tokens, "num");
  cell(row, `${r.cached_tokens} (${((100 * r.cached_tokens) / Math.max(r.prompt_tokens, 1)).toFixed(0)}%)`, "num cached-tokens");
  row.insertCell().append(strip(r)); // before the wide text columns: on a narrow window it stays in view
  cell(row, ms(r.timing.server_ttft_s), "num");
  cell(row, ms(r.timing.queue_s), "num");
  cell(row, (r.aborted ? "aborted (client left) · " : "") + (r.miss_reason || "-"), "reason");
  const spot = r.divergence || r.reuse_end;
  const where = cell(row, "", "where");
  where.append(Object.assign(document.createElement("b"), { textContent: `${spot.region}: ` }), around(spot.text));
  where.title = r.divergence ? "first change from the previous request" : "first token not served from the cache";
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    const reply = await fetch(`/v1/kvtestbed/requests?after=${after}`, { headers });
    if (!reply.ok) throw new Error(`HTTP ${reply.status}${reply.status === 401 ? ": open this page as /#key=KEY" : ""}`);
    const { requests, recording } = await reply.json();
    const stopped = document.getElementById("recording");
    stopped.hidden = !recording?.stopped;
    stopped.textContent = recording?.stopped ? `recording stopped: ${recording.stopped}` : "";
    for (const r of requests) add(r);
    if (requests.length) after = requests[requests.length - 1].seq;
    document.getElementById("empty").hidden = after > 0;
    status.textContent = `${after} requests; updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    status.textContent = `cannot reach the server (${e.message}); retrying`;
  }
  setTimeout(poll, 1000);
}
poll();
