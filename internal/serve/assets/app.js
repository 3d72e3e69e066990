// The ralph serve dashboard: the status document (/api/status), the
// journal as Server-Sent Events (/api/events) and the receipts
// (/api/receipts) of one workspace, and the control API (/api/control).
// Everything is drawn with the DOM and inline SVG; text from the run goes
// in through textContent only, never as HTML.
"use strict";

const KINDS = ["transition", "run", "iteration", "agent_output", "heartbeat", "check", "verdict", "commit",
  "blocker", "limit", "wait", "warning", "note", "summary", "control", "sandbox_denied"];
const KEEP_LINES = 400;

const $ = (id) => document.getElementById(id);
let ws = new URLSearchParams(location.search).get("ws") || "";
let source = null;
let refreshTimer = null;
let lastStatus = null;

// The token comes in the URL's fragment, which browsers never send to a
// server; it is kept for this tab only and taken out of the address bar.
(function takeToken() {
  const m = location.hash.match(/token=([0-9A-Za-z._~-]+)/);
  if (m) {
    sessionStorage.setItem("ralph-token", m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
})();
const token = () => sessionStorage.getItem("ralph-token") || "";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) if (k != null) e.append(k instanceof Node ? k : String(k));
  return e;
}
function api(path) {
  return path + (ws ? (path.includes("?") ? "&" : "?") + "ws=" + encodeURIComponent(ws) : "");
}
function dur(ms) {
  if (ms == null) return "–";
  if (ms < 1000) return Math.round(ms) + "ms";
  const s = Math.round(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
}
const fmtInt = (n) => (n || 0).toLocaleString("en-US");
const money = (c) => "$" + (c >= 1 ? c.toFixed(2) : c.toFixed(4));
const tokTotal = (t) => t ? (t.input || 0) + (t.output || 0) + (t.cache_read || 0) + (t.cache_write || 0) : 0;
// A story done on the agent's word is never shown as verified.
const stateWords = { done_agent_word: "done, agent's word", awaiting_landing: "verified, not landed", needs_review: "needs review", merge_queue: "merge queue" };
const stateTag = (s) => el("span", { class: "state s-" + s }, stateWords[s] || s.replaceAll("_", " "));

// ---- controls ----

async function steer(cmd) {
  const out = $("result");
  if (!token()) {
    out.className = "err";
    out.textContent = "read-only: open the address ralph serve printed (it ends in #token=…) to steer";
    return false;
  }
  out.className = "";
  out.textContent = "sending " + cmd.command + "…";
  try {
    const r = await fetch(api("/api/control"), {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token() },
      body: JSON.stringify(cmd),
    });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      out.className = "err";
      out.textContent = body.error || ("HTTP " + r.status);
      return false;
    }
    out.className = "ok";
    out.textContent = body.status + ": " + body.message;
    scheduleRefresh();
    return true;
  } catch (e) {
    out.className = "err";
    out.textContent = "could not reach ralph serve: " + e;
    return false;
  }
}

for (const id of ["pause", "resume", "stop"]) {
  $(id).addEventListener("click", () => {
    if (id === "stop" && !confirm("Stop the run as Ctrl+C would? `ralph build` resumes it.")) return;
    steer({ command: id });
  });
}
$("hint-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("hint").value.trim();
  if (!text) return;
  if (await steer({ command: "hint", text })) $("hint").value = "";
});

// ---- rendering ----

function renderRun(st) {
  const m = st.metrics || {};
  const rows = [
    ["State", st.running ? (st.state || "running") : (st.finished ? "finished" + (st.outcome ? " · " + st.outcome : "") : (st.state || (st.run_id ? "stopped" : "no run going")))],
    ["Run", st.run_id || "–"],
    ["Iteration", st.iteration + (st.max_iterations ? " / " + st.max_iterations : "")],
    ["Elapsed", dur(st.elapsed_ms)],
    ["Task", st.current_task ? st.current_task + (st.current_story ? " · " + st.current_story : "") : "–"],
    ["Agent", (st.last_iteration && st.last_iteration.agent) || "–"],
    ["Stories", st.stories_done + " / " + st.stories + " done"],
    ["Tokens", fmtInt(tokTotal(m.tokens)) + (m.cost_usd_estimate ? " · " + money(m.cost_usd_estimate) : "")],
  ];
  if (st.reason) rows.push(["Reason", st.reason]);
  if (st.paused) rows.push(["Paused", "by " + st.paused.by + " since " + new Date(st.paused.time).toLocaleTimeString()]);
  if (st.breaker && st.breaker.state && st.breaker.state.toLowerCase() !== "closed") rows.push(["Breaker", st.breaker.state + (st.breaker.reason ? " · " + st.breaker.reason : "")]);
  for (const [agent, until] of Object.entries(st.cooldowns || {})) {
    const left = new Date(until) - Date.now();
    rows.push(["Cooldown", agent + (left > 0 ? " · " + dur(left) + " left" : " · " + until)]);
  }
  if (st.budget && Object.keys(st.budget).length) rows.push(["Budget", Object.entries(st.budget).map(([k, v]) => k + " " + v).join(" · ")]);
  if (st.pending_context_hints) rows.push(["Hints waiting", st.pending_context_hints]);
  // Commands given and not taken yet: a run takes them at its next step.
  for (const c of st.queued_controls || []) rows.push(["Queued", c.command + (c.task ? " " + c.task : "") + " by " + c.by + " at " + new Date(c.time).toLocaleTimeString()]);
  $("run").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const steerable = (st.steerable_runs || []).length > 0;
  $("pause").disabled = !steerable || !!st.paused;
  $("resume").disabled = !st.paused;
  $("stop").disabled = !steerable;
}

function renderBoard(st) {
  const rows = (st.board || []).map((s) => {
    const acts = el("td", { class: "acts" });
    if (s.state === "blocked") acts.append(el("button", { class: "small", onclick: () => steer({ command: "unblock", task: s.id }) }, "unblock"));
    else if (s.state === "needs_review") acts.append(el("button", { class: "small", onclick: () => steer({ command: "approve", task: s.id }) }, "approve"), " ",
      el("button", { class: "small", onclick: () => steer({ command: "unblock", task: s.id }) }, "redo"));
    else if (!["done", "verified", "done_agent_word", "landed"].includes(s.state)) {
      acts.append(el("button", { class: "small", onclick: () => steer({ command: "skip", task: s.id }) }, "skip"), " ",
        el("button", { class: "small", onclick: () => {
          const why = prompt("Why block " + s.id + "?", "");
          if (why !== null) steer({ command: "block", task: s.id, text: why });
        } }, "block"));
    }
    const evidence = (s.evidence || []).length ? el("div", { class: "muted" }, "evidence: " + s.evidence.join("; ")) : null;
    return el("tr", { "data-story": s.id, "data-state": s.state }, el("td", {}, s.id), el("td", {}, s.title, s.reason ? el("div", { class: "muted" }, s.reason) : null, evidence),
      el("td", {}, stateTag(s.state), s.worker ? " " + s.worker : ""), el("td", {}, s.attempts || ""), acts);
  });
  $("board").tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no stories yet"))]));
}

function renderWaiting(st) {
  const items = (st.waiting || []).map((w) => {
    const li = el("li", {}, el("strong", {}, w.kind + " " + w.id), ": ", w.text);
    if (w.kind === "question") {
      const input = el("input", { type: "text", placeholder: "your answer" });
      li.append(el("form", { class: "row", onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) steer({ command: "answer", session: w.session || "", question: w.id, text: input.value.trim() }); } },
        input, el("button", { type: "submit" }, "Answer")));
    } else if (w.kind === "checkpoint") {
      const row = el("div", { class: "row" });
      for (const step of w.steps || []) {
        row.append(el("button", { class: "small", onclick: () => {
          let text = "";
          if (step === "request-changes") { text = prompt("What should change?", ""); if (!text) return; }
          steer({ command: "checkpoint", thread: w.id, step, text });
        } }, step));
      }
      li.append(row);
    } else if (w.kind === "blocked") {
      li.append(" ", el("button", { class: "small", onclick: () => steer({ command: "unblock", task: w.id }) }, "unblock"));
    }
    if (w.hint) li.append(el("div", { class: "hint" }, w.hint));
    return li;
  });
  $("waiting").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "nothing waits for a person")]));
}

function renderWorkers(st) {
  const p = st.parallel;
  $("workers-card").hidden = !p;
  if (!p) return;
  $("workers").tBodies[0].replaceChildren(...(p.working || []).map((w) =>
    el("tr", {}, el("td", {}, w.worker), el("td", {}, w.task), el("td", {}, w.state), el("td", {}, w.attempt), el("td", {}, dur(w.elapsed_ms)))));
  $("queue").textContent = `merge queue: ${(p.queue || []).length} waiting · ${p.landed} landed · ${(p.needs_review || []).length} need review`;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}

function renderStates(st) {
  const sm = (st.metrics && st.metrics.time_in_state_ms) || {};
  const waits = (st.metrics && st.metrics.waiting_ms) || {};
  const rows = Object.entries(sm).concat(Object.entries(waits).map(([k, v]) => ["wait: " + k, v])).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  const box = $("states-chart");
  if (!rows.length) { box.replaceChildren(el("p", { class: "muted" }, "no time recorded yet")); return; }
  const W = 400, bar = 16, gap = 6, label = 130, max = Math.max(...rows.map((r) => r[1]));
  const s = svg("svg", { viewBox: `0 0 ${W} ${rows.length * (bar + gap)}`, role: "img", "aria-label": "time in each state" });
  rows.forEach(([name, ms], i) => {
    const y = i * (bar + gap), w = Math.max(1, (W - label - 60) * ms / max);
    s.append(svg("text", { x: 0, y: y + bar - 4 }, name), svg("rect", { x: label, y, width: w, height: bar, rx: 2, fill: "#58a6ff" }),
      svg("text", { x: label + w + 4, y: y + bar - 4 }, dur(ms)));
  });
  box.replaceChildren(s);
}

function renderTokens(rc) {
  const its = (rc.iterations || []).filter((i) => i.end);
  const box = $("tokens-chart");
  if (!its.length) { box.replaceChildren(el("p", { class: "muted" }, "no iterations yet")); return; }
  let tok = 0, cost = 0;
  const pts = its.map((i) => ({ t: new Date(i.end).getTime(), tok: (tok += tokTotal(i.tokens)), cost: (cost += i.cost_usd_estimate || 0) }));
  const W = 400, H = 160, L = 50, R = 50, T = 10, B = 20;
  const t0 = new Date(its[0].start).getTime(), t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const yTok = (v) => H - B - (H - T - B) * v / Math.max(tok, 1);
  const yCost = (v) => H - B - (H - T - B) * v / Math.max(cost, 1e-9);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "tokens and cost over time" });
  s.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#2a2f3a" }));
  s.append(svg("path", { d: "M" + x(t0) + "," + yTok(0) + pts.map((p) => ` L${x(p.t).toFixed(1)},${yTok(p.tok).toFixed(1)}`).join(""), fill: "none", stroke: "#58a6ff", "stroke-width": 2 }));
  if (cost > 0) s.append(svg("path", { d: "M" + x(t0) + "," + yCost(0) + pts.map((p) => ` L${x(p.t).toFixed(1)},${yCost(p.cost).toFixed(1)}`).join(""), fill: "none", stroke: "#3fb950", "stroke-width": 2, "stroke-dasharray": "4 3" }));
  s.append(svg("text", { x: 0, y: T + 8 }, fmtInt(tok)), svg("text", { x: 0, y: H - B }, "0"),
    svg("text", { x: W - R + 4, y: T + 8 }, money(cost)),
    svg("text", { x: L, y: H - 4 }, new Date(t0).toLocaleTimeString()), svg("text", { x: W - R - 60, y: H - 4 }, new Date(t1).toLocaleTimeString()),
    svg("text", { x: L + 6, y: T + 8 }, "tokens (blue), cost (green)"));
  box.replaceChildren(s);
}

function renderReceipts(rc) {
  const rows = (rc.stories || []).map((r) => el("tr", { "data-receipt": r.task },
    el("td", {}, r.task), el("td", {}, stateTag(r.state)), el("td", {}, r.attempts), el("td", {}, dur(r.duration_ms)),
    el("td", {}, fmtInt(tokTotal(r.tokens))), el("td", {}, r.cost_usd_estimate ? money(r.cost_usd_estimate) : "–"),
    el("td", {}, (r.checks || []).map((c) => `${c.last === "passed" ? "✓" : "✗"} ${c.name} (${c.passed}/${c.passed + c.failed})`).join(", ") || "–"),
    el("td", {}, r.commit || "–")));
  $("receipts").tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "no story worked on yet"))]));
}

// ---- live data ----

async function refresh() {
  refreshTimer = null;
  try {
    const [st, rc] = await Promise.all([fetch(api("/api/status")).then((r) => r.json()), fetch(api("/api/receipts")).then((r) => r.json())]);
    if (st.error) throw new Error(st.error);
    lastStatus = st;
    renderRun(st); renderBoard(st); renderWaiting(st); renderWorkers(st); renderStates(st);
    if (!rc.error) { renderTokens(rc); renderReceipts(rc); }
  } catch (e) {
    $("result").className = "err";
    $("result").textContent = "could not read the status: " + e.message;
  }
}
// Events come in bursts (an agent prints many lines at once): one
// refresh a quarter second after the burst is plenty.
function scheduleRefresh() {
  if (!refreshTimer) refreshTimer = setTimeout(refresh, 250);
}

function append(pre, line, cls) {
  const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.append(el("span", cls ? { class: cls } : {}, line));
  while (pre.childNodes.length > KEEP_LINES) pre.firstChild.remove();
  if (stick) pre.scrollTop = pre.scrollHeight;
}

function onEvent(msg) {
  let ev;
  try { ev = JSON.parse(msg.data); } catch { return; }
  if (ev.kind === "agent_output") {
    append($("output"), (ev.worker ? "[" + ev.worker + "] " : "") + (ev.text || ((ev.data && ev.data.line) || "") + "\n"));
  } else if (ev.kind !== "heartbeat") {
    const t = new Date(ev.time).toLocaleTimeString();
    const text = ev.text ? ev.text.replace(/^\n+/, "") : (ev.kind === "transition" ? `${ev.from} → ${ev.to} (${ev.trigger})\n` : ev.kind + "\n");
    append($("journal"), t + " " + (ev.worker ? "[" + ev.worker + "] " : "") + text, "k-" + ev.kind);
  }
  scheduleRefresh();
}

function connect() {
  if (source) source.close();
  $("output").replaceChildren();
  $("journal").replaceChildren();
  // EventSource reconnects by itself and sends Last-Event-ID, so the
  // page misses nothing across a dropped connection.
  source = new EventSource(api("/api/events"));
  for (const k of KINDS) source.addEventListener(k, onEvent);
  source.onopen = () => { $("conn").className = "pill on"; $("conn").textContent = "live"; };
  source.onerror = () => { $("conn").className = "pill off"; $("conn").textContent = "reconnecting…"; };
}

async function start() {
  $("auth").textContent = token() ? "can steer" : "read-only";
  $("auth").className = "pill " + (token() ? "on" : "off");
  try {
    const list = await fetch("/api/workspaces").then((r) => r.json());
    if (!ws && list.length) ws = list[0].name;
    $("ws").replaceChildren(...list.map((w) => el("option", { value: w.name, title: w.dir }, w.name)));
    $("ws").value = ws;
    $("ws").hidden = list.length < 2;
  } catch { /* the page still works on the default workspace */ }
  $("ws").addEventListener("change", () => {
    ws = $("ws").value;
    history.replaceState(null, "", "?ws=" + encodeURIComponent(ws));
    connect(); refresh();
  });
  connect();
  refresh();
  // Countdowns and elapsed time move without events.
  setInterval(refresh, 5000);
}
start();
