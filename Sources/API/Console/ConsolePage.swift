/// The web console served at `GET /`: one self-contained page (no external assets: many clusters have no
/// internet), embedded in the binary so nothing has to ship beside it.
///
/// It reads only public routes and the admin routes the operator unlocks with a token: `GET /v2/models` (models,
/// versions, states), `POST /v2/repository/index` (failure reasons, traffic), `GET /v2/models/{m}/config`
/// (cascade), `POST /v2/models/{m}/classify` (the image panel) and `GET /metrics` (live figures, every 3 s).
public enum ConsolePage {
    /// The page's Content-Type.
    public static let contentType = "text/html; charset=utf-8"

    /// The page's bytes.
    public static let bytes: [UInt8] = Array(html.utf8)

    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Osprey console</title>
<style>
  :root { --fg: #1d2330; --muted: #667085; --line: #e4e7ec; --accent: #2e6fdb; --bad: #c4320a; --ok: #067647; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #f7f8fa; }
  header { display: flex; align-items: center; gap: 16px; padding: 12px 24px; background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; }
  header .status { color: var(--muted); }
  header label { margin-left: auto; color: var(--muted); }
  main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; padding: 16px 24px; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
  section h2 { font-size: 15px; margin: 0 0 10px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; }
  .state-READY { color: var(--ok); font-weight: 600; }
  .state-UNAVAILABLE, .state-FAILED { color: var(--bad); font-weight: 600; }
  .reason { color: var(--bad); font-size: 12px; }
  .muted { color: var(--muted); }
  button { font: inherit; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: #fff; cursor: pointer; }
  button:hover { border-color: var(--accent); }
  input[type=text], input[type=password], input[type=number], select { font: inherit; padding: 3px 6px; border: 1px solid var(--line); border-radius: 6px; }
  #drop { border: 2px dashed var(--line); border-radius: 8px; padding: 18px; text-align: center; color: var(--muted); margin: 10px 0; }
  #drop.over { border-color: var(--accent); color: var(--accent); }
  #preview { max-width: 160px; max-height: 160px; display: none; margin: 8px auto; image-rendering: pixelated; }
  .bar { display: grid; grid-template-columns: 150px 1fr 60px; gap: 8px; align-items: center; margin: 4px 0; }
  .bar .track { background: #eef2f6; border-radius: 4px; height: 14px; overflow: hidden; }
  .bar .fill { background: var(--accent); height: 100%; }
  .bar .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .figures { display: grid; grid-template-columns: repeat(3, 1fr); gap: 10px; }
  .figure { border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
  .figure .value { font-size: 20px; font-weight: 600; }
  .figure .label { color: var(--muted); font-size: 12px; }
  #log { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; color: var(--muted); max-height: 120px; overflow: auto; }
  .error { color: var(--bad); }
  .traffic { margin-top: 4px; white-space: nowrap; }
  svg { display: block; width: 100%; height: 40px; }
</style>
</head>
<body>
<header>
  <h1>Osprey</h1>
  <span class="status" id="server-status">connecting…</span>
  <label>Admin token <input type="password" id="token" size="22" placeholder="(none on loopback)"></label>
</header>
<main>
  <div>
    <section>
      <h2>Models</h2>
      <table>
        <thead><tr><th>Model</th><th>Version</th><th>State</th><th>Routing</th><th>Actions</th></tr></thead>
        <tbody id="models"><tr><td colspan="5" class="muted">loading…</td></tr></tbody>
      </table>
      <p class="muted" id="admin-note"></p>
      <div id="log"></div>
    </section>
  </div>
  <div>
    <section>
      <h2>Classify an image</h2>
      <label>Model <select id="classify-model"></select></label>
      <label>top k <input type="number" id="top-k" value="5" min="1" max="100" style="width: 60px"></label>
      <div id="drop">Drop an image here, or <input type="file" id="file" accept="image/png,image/jpeg"></div>
      <img id="preview" alt="">
      <div id="result" aria-live="polite"></div>
    </section>
    <section style="margin-top: 16px">
      <h2>Live figures <span class="muted" id="figures-age"></span></h2>
      <div class="figures">
        <div class="figure"><div class="value" id="fig-rps">–</div><div class="label">requests/s</div></div>
        <div class="figure"><div class="value" id="fig-p50">–</div><div class="label">p50 latency</div></div>
        <div class="figure"><div class="value" id="fig-p99">–</div><div class="label">p99 latency</div></div>
        <div class="figure"><div class="value" id="fig-queue">–</div><div class="label">queue depth</div></div>
        <div class="figure"><div class="value" id="fig-cache">–</div><div class="label">cache hit rate</div></div>
        <div class="figure"><div class="value" id="fig-cascade">–</div><div class="label">cascade rate</div></div>
      </div>
      <svg id="spark" viewBox="0 0 100 40" preserveAspectRatio="none"><polyline id="spark-line" fill="none" stroke="#2e6fdb" stroke-width="1.5" points=""></polyline></svg>
    </section>
  </div>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const tokenField = $("token");
tokenField.value = sessionStorage.getItem("osprey-token") || "";
tokenField.addEventListener("change", () => { sessionStorage.setItem("osprey-token", tokenField.value); refreshModels(); });

function adminHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (tokenField.value) headers["Authorization"] = "Bearer " + tokenField.value;
  return headers;
}

function log(text, isError) {
  const line = document.createElement("div");
  line.textContent = new Date().toLocaleTimeString() + "  " + text;
  if (isError) line.className = "error";
  $("log").prepend(line);
}

async function errorText(response) {
  try { const body = await response.json(); if (body && body.error) return body.error; } catch (e) { /* not JSON */ }
  return "HTTP " + response.status;
}

function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value; else if (key.startsWith("on")) node.addEventListener(key.slice(2), value); else node.setAttribute(key, value);
  }
  for (const child of children || []) node.append(child);
  return node;
}

// Admin extras (failure reasons, traffic) come from the repository index; without access they are simply absent.
async function repositoryIndex() {
  try {
    const response = await fetch("/v2/repository/index", { method: "POST", headers: adminHeaders({ "Content-Type": "application/json" }), body: "{}" });
    if (!response.ok) { $("admin-note").textContent = "Admin routes: " + (await errorText(response)) + " (failure reasons and actions need the admin token)."; return null; }
    $("admin-note").textContent = "";
    return await response.json();
  } catch (e) { return null; }
}

async function modelConfig(name) {
  try { const response = await fetch("/v2/models/" + encodeURIComponent(name) + "/config"); return response.ok ? await response.json() : null; } catch (e) { return null; }
}

async function admin(method, path, body, what) {
  const init = { method, headers: adminHeaders(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.ok) log(what + ": done"); else log(what + ": " + (await errorText(response)), true);
  refreshModels();
}

function routingText(model, config, indexEntries) {
  const parts = [];
  const traffic = indexEntries.map((e) => e.traffic).find((t) => t);
  const source = indexEntries.map((e) => e.traffic_source).find((t) => t);
  if (traffic) parts.push("traffic " + Object.entries(traffic).map(([v, w]) => "v" + v + ": " + w).join(", ") + (source === "override" ? " (run-time)" : ""));
  if (model.pinned) parts.push("pinned v" + model.default_version);
  if (config && config.cascade) parts.push("cascade → " + config.cascade.model + (config.cascade.version ? " v" + config.cascade.version : "") + " below " + config.cascade.min_confidence);
  return parts.join("; ") || "–";
}

// "set traffic": weights typed as 2:90, 3:10 (or config.json's {"2": 90, "3": 10}); "reset" returns to config.json's split.
function parseWeights(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) return JSON.parse(trimmed);
  const weights = {};
  for (const part of trimmed.split(",").map((p) => p.trim()).filter(Boolean)) {
    const match = /^v?(\d+)\s*[:=]\s*(\d+(?:\.\d+)?)$/.exec(part);
    if (!match) throw new Error("expected version:weight pairs like 2:90, 3:10, got '" + part + "'");
    weights[match[1]] = Number(match[2]);
  }
  return weights;
}

function trafficControls(name, indexEntries) {
  const path = "/v2/repository/models/" + encodeURIComponent(name) + "/traffic";
  const current = indexEntries.map((e) => e.traffic).find((t) => t);
  const field = el("input", { type: "text", size: "12", class: "traffic-input", placeholder: "2:90, 3:10", "aria-label": "traffic split of " + name });
  if (current) field.value = Object.entries(current).map(([v, w]) => v + ":" + w).join(", ");
  const set = el("button", { text: "set traffic", class: "set-traffic", onclick: () => {
    let weights;
    try { weights = parseWeights(field.value); } catch (e) { log("set traffic " + name + ": " + e.message, true); return; }
    admin("POST", path, weights, "set traffic " + name);
  } });
  const reset = el("button", { text: "reset", class: "reset-traffic", onclick: () => admin("DELETE", path, undefined, "reset traffic " + name) });
  return el("div", { class: "traffic" }, [field, " ", set, " ", reset]);
}

function actionButtons(name, version, isDefault) {
  const base = "/v2/repository/models/" + encodeURIComponent(name);
  const buttons = [];
  if (version) {
    buttons.push(el("button", { text: isDefault ? "unpin" : "pin", onclick: () => isDefault
      ? admin("DELETE", base + "/default", undefined, "unpin " + name)
      : admin("POST", base + "/default", { version: String(version) }, "pin " + name + " v" + version) }));
  }
  buttons.push(el("button", { text: "load", onclick: () => admin("POST", base + "/load", {}, "load " + name) }));
  buttons.push(el("button", { text: "unload", onclick: () => admin("POST", base + "/unload", {}, "unload " + name) }));
  const cell = el("td");
  buttons.forEach((b, i) => { if (i) cell.append(" "); cell.append(b); });
  return cell;
}

async function refreshModels() {
  let list;
  try {
    const response = await fetch("/v2/models");
    if (!response.ok) throw new Error(await errorText(response));
    list = (await response.json()).models || [];
    const ready = await fetch("/v2/health/ready");
    $("server-status").textContent = ready.ok ? "ready" : "not ready";
  } catch (e) { $("server-status").textContent = "unreachable: " + e.message; return; }
  const index = (await repositoryIndex()) || [];
  const body = $("models");
  body.replaceChildren();
  const select = $("classify-model");
  const selected = select.value;
  select.replaceChildren();
  if (list.length === 0) body.append(el("tr", {}, [el("td", { colspan: "5", class: "muted", text: "no models in the repository" })]));
  for (const model of list) {
    const config = await modelConfig(model.name);
    const entries = index.filter((e) => e.name === model.name);
    const versions = model.versions.length ? model.versions : [{ version: null, state: "UNAVAILABLE" }];
    versions.forEach((v, i) => {
      const entry = entries.find((e) => e.version === v.version) || {};
      const stateCell = el("td", {}, [el("span", { class: "state-" + v.state, text: v.state })]);
      if (entry.reason) stateCell.append(el("div", { class: "reason", text: entry.reason }));
      const isDefault = model.pinned && model.default_version === v.version;
      body.append(el("tr", {}, [
        el("td", { text: i === 0 ? model.name : "" }),
        el("td", { text: v.version ? v.version + (v.version === model.default_version ? " (default)" : "") : "–" }),
        stateCell,
        el("td", { class: "routing" }, i === 0 ? [routingText(model, config, entries), trafficControls(model.name, entries)] : []),
        actionButtons(model.name, v.version, isDefault),
      ]));
    });
    if (model.versions.some((v) => v.state === "READY")) select.append(el("option", { value: model.name, text: model.name }));
  }
  if ([...select.options].some((o) => o.value === selected)) select.value = selected;
}

// Classification: the picked or dropped file is posted as is; the server decodes and preprocesses it.
async function classify(file) {
  const model = $("classify-model").value;
  const result = $("result");
  if (!model) { result.replaceChildren(el("p", { class: "error", text: "no READY model to classify with" })); return; }
  $("preview").src = URL.createObjectURL(file);
  $("preview").style.display = "block";
  result.replaceChildren(el("p", { class: "muted", text: "classifying…" }));
  const topK = Math.max(1, parseInt($("top-k").value, 10) || 5);
  const started = performance.now();
  let response;
  try {
    response = await fetch("/v2/models/" + encodeURIComponent(model) + "/classify?top_k=" + topK,
      { method: "POST", headers: { "Content-Type": file.type || "application/octet-stream" }, body: file });
  } catch (e) { result.replaceChildren(el("p", { class: "error", text: "request failed: " + e.message })); return; }
  const milliseconds = performance.now() - started;
  if (!response.ok) { result.replaceChildren(el("p", { class: "error", text: await errorText(response) })); return; }
  const answer = await response.json();
  const rows = (answer.classifications && answer.classifications[0]) || [];
  const params = answer.parameters || {};
  const answeredBy = Array.isArray(params.answered_by) ? params.answered_by[0] : (params.answered_by || answer.model_name + "/" + answer.model_version);
  const nodes = [el("p", {}, [el("strong", { id: "top-label", text: rows.length ? String(rows[0].label ?? rows[0].index) : "(no classes)" }),
    " · " + milliseconds.toFixed(1) + " ms · answered by " + answeredBy + (params.cascaded ? " (cascaded)" : "")])];
  for (const row of rows) {
    const score = typeof row.score === "number" ? row.score : 0;
    nodes.push(el("div", { class: "bar" }, [
      el("span", { class: "name", text: String(row.label ?? row.index) }),
      el("div", { class: "track" }, [el("div", { class: "fill", style: "width:" + (Math.max(0, Math.min(1, score)) * 100).toFixed(1) + "%" })]),
      el("span", { text: (score * 100).toFixed(1) + "%" }),
    ]));
  }
  result.replaceChildren(...nodes);
}

$("file").addEventListener("change", (event) => { if (event.target.files[0]) classify(event.target.files[0]); });
const drop = $("drop");
drop.addEventListener("dragover", (event) => { event.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (event) => { event.preventDefault(); drop.classList.remove("over"); if (event.dataTransfer.files[0]) classify(event.dataTransfer.files[0]); });

// Live figures from the Prometheus text: rates and quantiles over the interval between two scrapes.
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    if (match[3]) for (const pair of match[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    samples.push({ name: match[1], labels, value: parseFloat(match[4]) });
  }
  return samples;
}
const sum = (samples, name, filter) => samples.filter((s) => s.name === name && (!filter || filter(s.labels))).reduce((a, s) => a + s.value, 0);
function buckets(samples, name) {
  const byBound = new Map();
  for (const s of samples) if (s.name === name + "_bucket") { const le = s.labels.le === "+Inf" ? Infinity : parseFloat(s.labels.le); byBound.set(le, (byBound.get(le) || 0) + s.value); }
  return [...byBound.entries()].sort((a, b) => a[0] - b[0]);
}
function quantile(q, previous, current) {
  const before = new Map(previous), rows = current.map(([le, count]) => [le, count - (before.get(le) || 0)]);
  const total = rows.length ? rows[rows.length - 1][1] : 0;
  if (total <= 0) return null;
  let lowerBound = 0, lowerCount = 0;
  for (const [le, count] of rows) {
    if (count >= q * total) {
      if (le === Infinity) return lowerBound;
      return lowerBound + (le - lowerBound) * ((q * total - lowerCount) / Math.max(count - lowerCount, 1e-9));
    }
    lowerBound = le; lowerCount = count;
  }
  return lowerBound;
}
const formatSeconds = (s) => s === null ? "–" : s < 1 ? (s * 1000).toFixed(1) + " ms" : s.toFixed(2) + " s";
const percent = (a, b) => b > 0 ? (100 * a / b).toFixed(1) + "%" : "–";
// The response cache's hit rate over the interval; "off" when the server runs without one (--cache-bytes 0 exports
// no osprey_cache_bytes).
function cacheHitRate(samples, hits, lookups) {
  if (!samples.some((s) => s.name === "osprey_cache_bytes")) return "off";
  return percent(hits, lookups);
}
let previousScrape = null;
const rpsHistory = [];
async function refreshFigures() {
  let samples;
  try { const response = await fetch("/metrics"); if (!response.ok) return; samples = parseMetrics(await response.text()); } catch (e) { return; }
  const now = performance.now();
  const current = {
    time: now,
    requests: sum(samples, "osprey_inference_requests_total"),
    durations: buckets(samples, "osprey_inference_request_duration_seconds"),
    hits: sum(samples, "osprey_cache_hits_total"), misses: sum(samples, "osprey_cache_misses_total"),
    escalated: sum(samples, "osprey_cascade_requests_total", (l) => l.outcome === "escalated"),
    cascaded: sum(samples, "osprey_cascade_requests_total"),
  };
  $("fig-queue").textContent = String(sum(samples, "osprey_inference_queue_depth"));
  if (previousScrape) {
    const seconds = (now - previousScrape.time) / 1000;
    const rps = Math.max(0, (current.requests - previousScrape.requests) / seconds);
    $("fig-rps").textContent = rps.toFixed(1);
    $("fig-p50").textContent = formatSeconds(quantile(0.5, previousScrape.durations, current.durations));
    $("fig-p99").textContent = formatSeconds(quantile(0.99, previousScrape.durations, current.durations));
    const hits = current.hits - previousScrape.hits, lookups = hits + current.misses - previousScrape.misses;
    $("fig-cache").textContent = cacheHitRate(samples, hits, lookups);
    $("fig-cascade").textContent = percent(current.escalated - previousScrape.escalated, current.cascaded - previousScrape.cascaded);
    rpsHistory.push(rps);
    if (rpsHistory.length > 40) rpsHistory.shift();
    const peak = Math.max(1, ...rpsHistory);
    $("spark-line").setAttribute("points", rpsHistory.map((v, i) => (i * 100 / 39).toFixed(1) + "," + (38 - 36 * v / peak).toFixed(1)).join(" "));
  }
  $("figures-age").textContent = "· every 3 s";
  previousScrape = current;
}

refreshModels();
refreshFigures();
setInterval(refreshFigures, 3000);
// Not while the operator is typing a split (the refresh rebuilds the table).
setInterval(() => { if (!document.activeElement || !document.activeElement.classList.contains("traffic-input")) refreshModels(); }, 15000);
</script>
</body>
</html>
"""#
}
