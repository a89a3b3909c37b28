// sentkit explore: plain JavaScript, no build step, nothing loaded from the network.
// Every text from the corpus or a results file is inserted with textContent, never as HTML.
"use strict";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

const fmtInt = (n) => Number(n).toLocaleString("en-US");
const shortName = (m) => m.replace(/\/+$/, "").split("/").pop() || m;

// The server's token (Jupyter's scheme), made at each start and printed in the page's URL
// (?token=...). The page keeps it in sessionStorage (this tab and this origin, port included; never
// a cookie, which every server on 127.0.0.1 the browser visits would receive) and sends it in a
// header on every API request. It leaves the address bar, so that a copied link or a screenshot
// does not hold it; a reload reads it back from sessionStorage.
const TOKEN_KEY = "sentkit-explore-token";
const TOKEN = (() => {
  const given = new URLSearchParams(location.search).get("token");
  if (given !== null) {
    try { sessionStorage.setItem(TOKEN_KEY, given); } catch (e) { /* storage switched off: this load only */ }
    history.replaceState(null, "", location.pathname + location.hash);
    return given;
  }
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
})();
const NO_TOKEN = "This page needs the token of the server: open the URL sentkit explore printed when it " +
  "started (it ends in ?token=...).";

async function api(path, body) {
  const headers = { "X-Sentkit-Token": TOKEN };
  const opts = body === undefined ? { headers } :
    { method: "POST", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify(body) };
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    throw new Error("the server does not answer: is `sentkit explore` still running?");
  }
  let data;
  try {
    data = await res.json();
  } catch (e) {
    throw new Error(`the server sent an answer that is not JSON (HTTP ${res.status})`);
  }
  if (!res.ok || data.error) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

function showMessage(id, text, kind) {
  const m = $(id);
  m.textContent = text || "";
  m.hidden = !text;
  m.className = "message " + (kind || "error");
}

const S = {
  state: null,
  selected: new Set(),   // models ticked in the Neighbours view
  known: new Set(),      // models seen (new ones start ticked)
  lastQuery: "",
  columns: new Map(),    // model -> {seq, col}: its latest answer
  seq: 0,
  poll: null,
  docsFor: null,
  res: { sources: [], picked: new Set(), sortKey: null, sortDir: -1, modelsAsRows: true, metric: null, details: false },
};

// ------------------------------------------------------------------ tabs
function showView(name) {
  if (!["neighbours", "spans", "results"].includes(name)) name = "neighbours";
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${name}`;
  for (const b of document.querySelectorAll("#tabs button")) b.setAttribute("aria-selected", String(b.dataset.view === name));
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (name === "spans") loadDocuments();
}

// ------------------------------------------------------------------ state and polling
async function refreshState() {
  let data;
  try {
    data = await api("/api/state");
  } catch (e) {
    showMessage("#neighbours-message", e.message);
    clearTimeout(S.poll);
    S.poll = setTimeout(refreshState, 2000);  // keep asking: the server may be busy or restarting
    return;
  }
  S.state = data;
  for (const m of data.models) if (!S.known.has(m)) { S.known.add(m); S.selected.add(m); }
  renderModelList();
  renderStartupMessages(data.messages);
  if (data.corpus && !$("#corpus").value) $("#corpus").value = data.corpus;
  renderTokenizers();
  if (!S.lastQuery) renderColumns(statusColumns());
  schedulePoll(data.building);
  // Whichever request sees the build end (a poll, or the search that just got a "building" column) asks
  // the query again, so the columns that showed progress get their neighbours.
  if (!data.building && S.lastQuery && columnsWaiting()) search(true);
  return data;
}

// Whether a column of the latest query shows a build in progress instead of neighbours.
function columnsWaiting() {
  return [...S.columns.values()].some(({ seq, col }) => seq === S.seq && !["ready", "error"].includes(col.status));
}

function schedulePoll(building) {
  clearTimeout(S.poll);
  if (!building) return;
  S.poll = setTimeout(async () => {
    const data = await refreshState();
    if (S.lastQuery && data && data.building) search(true);  // the columns' progress
  }, 600);
}

function renderStartupMessages(messages) {
  const box = $("#startup-messages");
  box.replaceChildren(...(messages || []).map((m) => el("p", { class: "message error", text: m })));
}

// ------------------------------------------------------------------ neighbours
function renderModelList() {
  const list = $("#model-list");
  list.replaceChildren(...S.state.models.map((m) => {
    const box = el("input", { type: "checkbox", value: m, checked: S.selected.has(m) });
    box.addEventListener("change", () => {
      if (box.checked) S.selected.add(m); else S.selected.delete(m);
      if (S.lastQuery) search(); else renderColumns(statusColumns());
    });
    return el("label", { title: m }, box, " ", shortName(m));
  }));
}

function chosenModels() {
  return S.state ? S.state.models.filter((m) => S.selected.has(m)) : [];
}

function statusColumns() {
  const byModel = new Map((S.state.indexes || []).map((j) => [j.model, j]));
  return chosenModels().map((m) => byModel.get(m) ||
    { model: m, status: S.state.corpus ? "queued" : "no corpus" });
}

function statusLine(col) {
  const s1 = Number(col.seconds || 0).toFixed(1);
  const secs = col.seconds ? ` (${s1} s)` : "";
  switch (col.status) {
    case "queued": return "waiting for another index to finish";
    case "loading model": return `loading the model${secs}`;
    case "reading corpus": return `reading the corpus or its cached index${secs}`;
    case "embedding":
      return `building the index: ${fmtInt(col.done)} sentences embedded` +
        (col.limit ? ` of at most ${fmtInt(col.limit)}` : "") + secs;
    case "ready":
      return `index: ${fmtInt(col.sentences)} sentences (${col.sparse ? "sparse " : ""}${fmtInt(col.dim)}-d), ` +
        (col.built ? `built in ${s1} s` : "read from the cache");
    case "no corpus": return "no corpus yet: enter a corpus path above";
    case "searching": return "searching…";
    default: return col.status;
  }
}

function neighbourItem(row) {
  const text = el("span", { class: "text" });
  for (const [piece, mark] of row.segments) {
    if (mark === 2) text.append(el("mark", { class: "shared", text: piece }));
    else if (mark === 1) text.append(el("mark", { class: "shared-fn", text: piece }));
    else text.append(piece);
  }
  return el("li", { class: "neighbour" },
    el("span", { class: "score", title: "cosine similarity", text: row.score.toFixed(3) }), text);
}

function renderColumns(cols) {
  $("#columns").replaceChildren(...cols.map((col) => {
    const box = el("div", { class: "column" + (col.stale ? " stale" : ""), "data-model": col.model, "data-status": col.status },
      el("h2", { title: col.model, text: shortName(col.model) }));
    if (col.status === "error") {
      box.append(el("p", { class: "message error", text: col.error }));
    } else if (col.neighbours) {
      box.append(el("p", { class: "meta", text: `${statusLine(col)} · query ${col.ms} ms` }));
      box.append(el("ol", { class: "neighbours" }, ...col.neighbours.map(neighbourItem)));
    } else {
      const running = !["ready", "no corpus"].includes(col.status);
      if (running) {
        const pct = col.limit && col.done ? Math.min(100, (100 * col.done) / col.limit) : null;
        const fill = el("div", { class: "fill" });
        if (pct !== null) fill.style.width = `${pct}%`;
        box.append(el("div", { class: "progress" + (pct === null ? " indeterminate" : ""), role: "progressbar" }, fill));
      }
      box.append(el("p", { class: "status-text", text: statusLine(col) }));
    }
    return box;
  }));
}

// One request per model, all at once: each column shows as soon as its model has answered.
async function search(quiet) {
  const q = $("#query").value.trim();
  if (!q) {
    S.lastQuery = "";
    showMessage("#neighbours-message", "");
    if (S.state) renderColumns(statusColumns());
    return;
  }
  S.lastQuery = q;
  const seq = ++S.seq;
  const kIn = parseInt($("#k").value, 10);
  const k = Number.isNaN(kIn) ? 10 : kIn;
  const models = chosenModels();
  const ask = (which) => api("/api/neighbours", { query: q, models: which, k });
  const show = () => renderColumns(models.map((m) => {
    const got = S.columns.get(m);
    if (!got) return { model: m, status: "searching" };
    return got.seq === seq ? got.col : { ...got.col, stale: true };
  }));
  try {
    if (!models.length) {
      await ask([]);  // the server says what is missing
      return;
    }
    let building = false;
    await Promise.all(models.map(async (m) => {
      const data = await ask([m]);
      if (seq !== S.seq) return;  // a newer query was sent meanwhile
      const col = data.columns[0];
      S.columns.set(m, { seq, col });
      building = building || !["ready", "error"].includes(col.status);
      showMessage("#neighbours-message", "");
      show();
    }));
    if (seq === S.seq && building && !quiet) await refreshState();
  } catch (e) {
    if (seq === S.seq) showMessage("#neighbours-message", e.message);
  }
}

let typing = null;
function onType() {
  clearTimeout(typing);
  typing = setTimeout(() => search(), 350);
}

async function addModel(ev) {
  ev.preventDefault();
  const name = $("#add-model").value.trim();
  try {
    await api("/api/models", { name });
    $("#add-model").value = "";
    S.known.add(name);
    S.selected.add(name);
    showMessage("#neighbours-message", "");
    await refreshState();
    if (S.lastQuery) search();
  } catch (e) {
    showMessage("#neighbours-message", e.message);
  }
}

async function setCorpus(ev) {
  ev.preventDefault();
  try {
    await api("/api/corpus", { path: $("#corpus").value });
    showMessage("#neighbours-message", "");
    S.docsFor = null;
    await refreshState();
    if (S.lastQuery) search();
  } catch (e) {
    showMessage("#neighbours-message", e.message);
  }
}

// ------------------------------------------------------------------ spans
function renderTokenizers() {
  const sel = $("#span-tokenizer");
  const names = [...new Set([...(S.state.span_models || []), ...S.state.models])];
  const current = sel.value;
  if (sel.options.length === names.length && [...sel.options].every((o, i) => o.value === names[i])) return;
  sel.replaceChildren(...names.map((m) => el("option", { value: m, text: shortName(m), title: m })));
  sel.value = names.includes(current) ? current : (S.state.span_models || names)[0];
}

async function loadDocuments() {
  if (!S.state || S.docsFor === S.state.corpus) return;
  const sel = $("#doc-select");
  try {
    const data = await api("/api/documents");
    S.docsFor = data.corpus;
    if (!data.documents.length) {
      sel.replaceChildren(el("option", { value: "", text: "(no corpus: paste a text below)" }));
      return;
    }
    sel.replaceChildren(...data.documents.map((d) =>
      el("option", { value: String(d.index), text: `${d.id} — ${d.preview}` })));
  } catch (e) {
    showMessage("#spans-message", e.message);
  }
}

function intOf(id) {
  return parseInt($(id).value, 10);
}

async function sampleSpans(ev) {
  if (ev) ev.preventDefault();
  const text = $("#span-text").value;
  const doc = $("#doc-select").value;
  const body = {
    tokenizer: $("#span-tokenizer").value,
    seed: intOf("#seed") || 0,
    num_anchors: intOf("#num-anchors"), num_positives: intOf("#num-positives"),
    min_span_len: intOf("#min-span-len"), max_span_len: intOf("#max-span-len"),
    strategy: $("#strategy").value,
  };
  if (text.trim()) body.text = text; else if (doc !== "") body.document = parseInt(doc, 10);
  try {
    const data = await api("/api/spans", body);
    showMessage("#spans-message", "");
    renderSpans(data);
  } catch (e) {
    $("#spans-out").replaceChildren();
    showMessage("#spans-message", e.message);
  }
}

function regionNode(region, positives) {
  const p = el("p", { class: "region" });
  if (region.before) p.append("… ");
  for (const seg of region.segments) {
    let node = document.createTextNode(seg.text);
    // The positive's number fixes its underline's depth, so a line never jumps between pieces.
    seg.positives.slice().reverse().forEach((j) => {
      node = el("span", { class: `pos rel-${positives[j].relation} lvl-${Math.min(j, 3)}`,
        title: `positive ${j + 1}: ${positives[j].relation}` }, node);
    });
    if (seg.anchor) node = el("span", { class: "anchor-text" }, node);
    p.append(node);
  }
  if (region.after) p.append(" …");
  return p;
}

function spanItem(cls, kind, text) {
  const t = el("span", { class: "clamp", title: "click to show all", text });
  t.addEventListener("click", () => t.classList.toggle("clamp"));
  return el("li", { class: cls }, el("span", { class: "kind", text: kind }), t);
}

function renderSpans(data) {
  const out = [el("p", { class: "hint", text:
    `${data.document}: ${fmtInt(data.tokens)} tokens (${data.tokenizer}); seed ${data.seed}; ` +
    `spans of ${data.settings.min_span_len}–${data.settings.max_span_len} tokens need documents of at least ` +
    `${fmtInt(data.min_doc_tokens)} tokens.` })];
  for (const a of data.anchors) {
    const list = el("ul", { class: "span-list" },
      spanItem("anchor", `anchor [${a.start}:${a.end}] (${a.tokens} tokens)`, a.text),
      ...a.positives.map((p) => spanItem(`positive rel-${p.relation}`,
        `positive [${p.start}:${p.end}] ${p.relation}`, p.text)),
      ...a.hard_negatives.map((h) => spanItem("negative hard",
        `hard negative (same document) [${h.start}:${h.end}]`, h.text)));
    if (a.easy_negative) {
      list.append(spanItem("negative easy", `easy negative (other document: ${data.easy_negative_from})`, a.easy_negative.text));
    }
    out.push(el("div", { class: "anchor-block", "data-anchor": String(a.index) },
      el("h3", { text: `Anchor ${a.index + 1} [${a.start}:${a.end}], ${a.tokens} tokens` }),
      regionNode(a.region, a.positives), list));
  }
  $("#spans-out").replaceChildren(...out);
}

// ------------------------------------------------------------------ results
const modelId = (si, label) => `${si}\u0000${label}`;

function pickedModels() {
  const out = [];
  const many = S.res.sources.length > 1;
  S.res.sources.forEach((src, si) => {
    for (const m of src.models) {
      if (!S.res.picked.has(modelId(si, m.label))) continue;
      out.push({ id: modelId(si, m.label), name: many ? `${m.label} · ${src.name}` : m.label,
        seeds: m.seeds, group: m.group, scores: src.scores[m.label] || {} });
    }
  });
  return out;
}

function keysOf(models) {
  const avg = [], tasks = [], help = {};
  for (const src of S.res.sources) {
    for (const a of src.averages) if (!avg.includes(a)) avg.push(a);
    for (const t of src.tasks) if (!tasks.includes(t)) tasks.push(t);
    if (S.res.details) for (const t of src.details || []) if (!tasks.includes(t)) tasks.push(t);
    Object.assign(help, src.average_help || {});
  }
  const present = (k) => models.some((m) => m.scores[k]);
  return { averages: avg.filter(present), tasks: tasks.filter(present), help };
}

const keyLabel = (k) => (k.startsWith("avg:") ? k.slice(4) : k);

function scoreCell(v, best, isAvg) {
  const td = el("td", { class: (isAvg ? "avg " : "") + (v && best !== null && v[0] === best ? "best" : "") });
  if (!v) { td.textContent = "—"; return td; }
  td.append(v[0].toFixed(1));
  if (v[2] > 1) td.append(" ", el("span", { class: "std", text: `± ${v[1].toFixed(1)}` }));
  td.title = v[2] > 1 ? `mean ± std over ${v[2]} seeds` : "one run";
  td.dataset.value = String(v[0]);
  return td;
}

function header(key, text, title, isAvg) {
  const th = el("th", { "data-key": key, title, class: isAvg ? "avg" : null, text });
  if (S.res.sortKey === key) th.classList.add(S.res.sortDir > 0 ? "sorted-asc" : "sorted-desc");
  th.addEventListener("click", () => {
    if (S.res.sortKey === key) S.res.sortDir = -S.res.sortDir;
    else { S.res.sortKey = key; S.res.sortDir = key === "__name" ? 1 : -1; }
    if (S.res.modelsAsRows && !key.startsWith("__")) S.res.metric = key;  // the chart follows
    renderResults();
  });
  return th;
}

function sortRows(rows, valueOf) {
  const key = S.res.sortKey;
  if (!key) return rows;
  const dir = S.res.sortDir;
  return rows.slice().sort((a, b) => {
    const x = valueOf(a, key), y = valueOf(b, key);
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
}

function bestOf(models, key) {
  const vals = models.map((m) => m.scores[key]).filter(Boolean).map((v) => v[0]);
  return vals.length > 1 ? Math.max(...vals) : null;
}

function renderTable(models, keys) {
  const table = $("#results-table");
  const all = [...keys.averages, ...keys.tasks];
  const isAvg = (k) => k.startsWith("avg:");
  if (S.res.modelsAsRows) {
    const head = el("tr", {}, header("__name", "model", "sort by name"), header("__seeds", "seeds", "seeds"),
      ...all.map((k) => header(k, keyLabel(k), keys.help[k] || k, isAvg(k))));
    const best = Object.fromEntries(all.map((k) => [k, bestOf(models, k)]));
    const rows = sortRows(models, (m, k) => (k === "__name" ? m.name.toLowerCase() : k === "__seeds" ? m.seeds :
      (m.scores[k] ? m.scores[k][0] : null)));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows.map((m) =>
      el("tr", { "data-model": m.name }, el("td", { title: m.group || "", text: m.name }), el("td", { text: String(m.seeds) }),
        ...all.map((k) => scoreCell(m.scores[k], best[k], isAvg(k)))))));
  } else {
    const head = el("tr", {}, header("__name", "score", "sort by name"),
      ...models.map((m) => header(m.id, m.name, m.group || m.name)));
    const byId = Object.fromEntries(models.map((m) => [m.id, m]));
    const rows = sortRows(all, (k, key) => (key === "__name" ? keyLabel(k).toLowerCase() :
      (byId[key].scores[k] ? byId[key].scores[k][0] : null)));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows.map((k) => {
      const best = bestOf(models, k);
      return el("tr", { "data-key": k }, el("td", { title: keys.help[k] || "", class: isAvg(k) ? "avg" : null, text: keyLabel(k) }),
        ...models.map((m) => scoreCell(m.scores[k], best, isAvg(k))));
    })));
  }
}

function renderChart(models, keys) {
  const sel = $("#chart-metric");
  const all = [...keys.averages, ...keys.tasks];
  if (!all.includes(S.res.metric)) S.res.metric = all[0] || null;
  sel.replaceChildren(...all.map((k) => el("option", { value: k, text: keyLabel(k) })));
  if (S.res.metric) sel.value = S.res.metric;
  const box = $("#chart");
  const key = S.res.metric;
  const data = models.filter((m) => m.scores[key]).map((m) => ({ name: m.name, v: m.scores[key] }))
    .sort((a, b) => b.v[0] - a.v[0]);
  if (!key || !data.length) { box.replaceChildren(); return; }
  const ns = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const vals = data.map((d) => d.v[0]);
  // Zoomed as the report's chart is: the differences that matter are a few points.
  const lo = Math.max(0, Math.floor(Math.min(...vals) - 5)), hi = Math.ceil(Math.max(...vals) + 3);
  const labelW = 230, barW = 480, rowH = 22, top = 24;
  const W = labelW + barW + 70, H = top + rowH * data.length + 24;
  const x = (v) => labelW + ((Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo || 1)) * barW;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `bar chart of ${keyLabel(key)}` });
  root.append(svg("text", { x: labelW, y: 14 }, `${keyLabel(key)} (points; axis from ${lo} to ${hi})`));
  for (let t = Math.ceil(lo / 5) * 5; t <= hi; t += 5) {
    root.append(svg("line", { class: "axis", x1: x(t), x2: x(t), y1: top - 4, y2: H - 20 }));
    root.append(svg("text", { x: x(t) - 6, y: H - 6 }, String(t)));
  }
  data.forEach((d, i) => {
    const y = top + i * rowH;
    const name = d.name.length > 34 ? d.name.slice(0, 33) + "…" : d.name;
    root.append(svg("text", { x: labelW - 8, y: y + 15, "text-anchor": "end" }, name));
    const bar = svg("rect", { class: "bar-rect", x: labelW, y: y + 3, width: Math.max(1, x(d.v[0]) - labelW), height: rowH - 7 });
    bar.append(svg("title", {}, `${d.name}: ${d.v[0].toFixed(2)}${d.v[2] > 1 ? ` ± ${d.v[1].toFixed(2)} (${d.v[2]} seeds)` : ""}`));
    root.append(bar);
    if (d.v[2] > 1 && d.v[1] > 0) {
      root.append(svg("line", { x1: x(d.v[0] - d.v[1]), x2: x(d.v[0] + d.v[1]), y1: y + 11, y2: y + 11, stroke: "#1f2933" }));
    }
    root.append(svg("text", { x: x(d.v[0]) + 6, y: y + 15 }, d.v[0].toFixed(1)));
  });
  box.replaceChildren(root);
}

function renderClaims() {
  const out = [];
  for (const src of S.res.sources) {
    if (!src.claims.length) continue;
    out.push(el("h3", { text: `Claims of ${src.name}` }));
    for (const c of src.claims) {
      const slug = c.verdict.replace(/\s+/g, "-");
      const box = el("div", { class: "claim", "data-verdict": c.verdict },
        el("h4", {}, `${c.paper}: ${c.claim}`, el("span", { class: `verdict verdict-${slug}`, text: c.verdict })),
        el("p", { class: "rule", text: `Rule: ${c.kind} on ${c.metric}; ${c.reason}.` }));
      if (c.rows.length) {
        box.append(el("table", {}, el("thead", {}, el("tr", {}, ...["score", "claim side", "other side", "difference ± s.e."]
          .map((h) => el("th", { text: h })))), el("tbody", {}, ...c.rows.map((r) =>
          el("tr", {}, ...r.map((v) => el("td", { text: v })))))));
      }
      if (c.note) box.append(el("p", { class: "note", text: c.note }));
      out.push(box);
    }
  }
  $("#claims").replaceChildren(...out);
}

function renderSources() {
  $("#sources").replaceChildren(...S.res.sources.map((src, si) => {
    const boxes = src.models.map((m) => {
      const id = modelId(si, m.label);
      const box = el("input", { type: "checkbox", checked: S.res.picked.has(id) });
      box.addEventListener("change", () => {
        if (box.checked) S.res.picked.add(id); else S.res.picked.delete(id);
        renderResults();
      });
      return el("label", { title: m.group || "" }, box, " ", m.label);
    });
    const setAll = (on) => () => {
      for (const m of src.models) { if (on) S.res.picked.add(modelId(si, m.label)); else S.res.picked.delete(modelId(si, m.label)); }
      renderResults(); renderSources();
    };
    return el("fieldset", { class: "source" },
      el("legend", {}, `${src.name} (${src.kind}, ${src.models.length} models)`, el("span", { class: "path", text: src.path })),
      el("button", { type: "button", class: "plain", onclick: setAll(true), text: "all" }),
      el("button", { type: "button", class: "plain", onclick: setAll(false), text: "none" }), ...boxes);
  }));
}

function renderResults() {
  const models = pickedModels();
  const keys = keysOf(models);
  $("#results-tools").hidden = !models.length;
  if (!models.length) {
    $("#results-table").replaceChildren();
    $("#chart").replaceChildren();
  } else {
    renderTable(models, keys);
    renderChart(models, keys);
  }
  renderClaims();
  $("#results-notes").replaceChildren(...S.res.sources.flatMap((s) => s.notes.map((n) => el("li", { text: `${s.name}: ${n}` }))));
}

function addSource(src) {
  const old = S.res.sources.findIndex((s) => s.path === src.path);
  if (old >= 0) S.res.sources[old] = src; else S.res.sources.push(src);
  const si = old >= 0 ? old : S.res.sources.length - 1;
  for (const m of src.models) S.res.picked.add(modelId(si, m.label));
}

async function openResults(ev) {
  ev.preventDefault();
  try {
    const src = await api("/api/results", { path: $("#results-path").value });
    showMessage("#results-message", "");
    addSource(src);
    renderSources();
    renderResults();
  } catch (e) {
    showMessage("#results-message", e.message);
  }
}

// ------------------------------------------------------------------ start
async function start() {
  if (!TOKEN) {  // opened without the printed URL, in a tab that never had it: no request is sent
    document.body.replaceChildren(el("p", { class: "message error", text: NO_TOKEN }));
    document.body.dataset.ready = "1";
    return;
  }
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showView(b.dataset.view));
  $("#neighbours-form").addEventListener("submit", (ev) => { ev.preventDefault(); clearTimeout(typing); search(); });
  $("#query").addEventListener("input", onType);
  $("#add-model-form").addEventListener("submit", addModel);
  $("#corpus-form").addEventListener("submit", setCorpus);
  $("#spans-form").addEventListener("submit", sampleSpans);
  $("#results-form").addEventListener("submit", openResults);
  $("#transpose").addEventListener("click", () => { S.res.modelsAsRows = !S.res.modelsAsRows; S.res.sortKey = null; renderResults(); });
  $("#show-details").addEventListener("change", (ev) => { S.res.details = ev.target.checked; renderResults(); });
  $("#chart-metric").addEventListener("change", (ev) => { S.res.metric = ev.target.value; renderResults(); });
  const data = await refreshState();
  if (data) {
    for (const src of data.sources) addSource(src);
    renderSources();
    renderResults();
  }
  showView(location.hash.slice(1));
  document.body.dataset.ready = "1";
}

start();
