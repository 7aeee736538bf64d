// Handoff console. Every view is drawn with DOM calls and textContent, never
// innerHTML: whatever a task, a peer or a tool says is shown as text.
"use strict";

const api = "api/";
let me = null; // {principal, approver, csrf}
let source = null; // the live EventSource
const states = ["", "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED",
  "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"];

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function status(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text || "";
  s.className = bad ? "error" : "";
}

async function call(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-CSRF-Token"] = me ? me.csrf : "";
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(api + path, opts);
  if (resp.status === 401 && path !== "session") {
    signedOut();
    throw new Error("signed out");
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = {};
  try {
    data = text ? JSON.parse(text) : {};
  } catch (e) {
    data = { error: text.trim() }; // the agent's own handlers answer errors as text
  }
  if (!resp.ok) {
    const e = data.error;
    throw new Error(typeof e === "string" ? e : (e && e.message) || resp.statusText);
  }
  return data;
}

function stateBadge(s) {
  return el("span", { class: "state state-" + s, text: (s || "").replace("TASK_STATE_", "").toLowerCase().replace("_", "-") });
}

function when(t) {
  return t ? new Date(t).toLocaleString() : "";
}

function table(columns, rows, rowAttrs) {
  const head = el("tr", {}, ...columns.map((c) => el("th", { text: c.title })));
  const body = rows.map((r) => el("tr", rowAttrs ? rowAttrs(r) : {}, ...columns.map((c) => {
    const v = c.cell(r);
    return el("td", { class: c.mono ? "mono" : "" }, v instanceof Node ? v : String(v === undefined || v === null ? "" : v));
  })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

// ---- session ----

function signedOut() {
  me = null;
  if (source) source.close();
  source = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  document.getElementById("view").replaceChildren();
  document.getElementById("signin-view").hidden = false;
  setLive(false);
}

function signedIn(who) {
  me = who;
  document.getElementById("signin-view").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  document.getElementById("who").textContent = who.principal + (who.approver ? " (approver)" : "");
  startStream();
  route();
  refreshApprovalCount();
}

async function signIn(ev) {
  ev.preventDefault();
  const kind = document.getElementById("credential-kind").value;
  const input = document.getElementById("credential");
  const body = {};
  body[kind] = input.value;
  try {
    const who = await call("POST", "session", body);
    input.value = "";
    document.getElementById("signin-error").textContent = "";
    signedIn(who);
  } catch (e) {
    document.getElementById("signin-error").textContent = e.message;
  }
}

async function signOut() {
  try { await call("DELETE", "session"); } catch (e) { /* the session is gone either way */ }
  signedOut();
}

// ---- live stream ----

function setLive(on) {
  const l = document.getElementById("live");
  l.textContent = on ? "live" : "offline";
  l.className = on ? "live on" : "live";
}

function startStream() {
  if (source) source.close();
  source = new EventSource(api + "stream");
  source.onopen = () => setLive(true);
  source.onerror = () => setLive(false);
  source.addEventListener("task", (ev) => {
    const t = JSON.parse(ev.data);
    if (current.view === "tasks") upsertTaskRow(t);
    if (current.view === "task" && current.id === t.id) loadTimeline(t.id);
  });
  source.addEventListener("approvals", () => {
    refreshApprovalCount();
    if (current.view === "approvals") showApprovals();
  });
}

// ---- router ----

let current = { view: "", id: "" };

function route() {
  if (!me) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const view = parts[0] || "tasks";
  current = { view, id: decodeURIComponent(parts[1] || "") };
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === view || (view === "task" && a.dataset.view === "tasks"));
  }
  status("");
  const views = { tasks: showTasks, task: () => showTask(current.id), approvals: showApprovals, peers: showPeers,
    mcp: showMCP, push: showPush, ledger: showLedger };
  (views[view] || showTasks)();
}

// ---- tasks ----

let tasksQuery = { state: "", pages: [""] };

function taskRow(t) {
  const link = el("a", { href: "#/task/" + encodeURIComponent(t.id), text: t.id });
  return el("tr", { "data-task-id": t.id, class: "task-row" },
    el("td", { class: "mono" }, link), el("td", {}, stateBadge(t.state)), el("td", { text: when(t.updated) }),
    el("td", { text: t.message || "" }));
}

function upsertTaskRow(t) {
  const body = document.querySelector("#tasks-table tbody");
  if (!body) return;
  if (tasksQuery.state && t.state !== tasksQuery.state) {
    const old = body.querySelector(`tr[data-task-id="${CSS.escape(t.id)}"]`);
    if (old) old.remove();
    return;
  }
  const row = taskRow(t);
  row.classList.add("fresh");
  const old = body.querySelector(`tr[data-task-id="${CSS.escape(t.id)}"]`);
  if (old) old.replaceWith(row);
  else if (tasksQuery.pages.length === 1) { // new tasks belong on the first page
    body.prepend(row);
    const total = document.getElementById("tasks-total");
    total.dataset.n = String(Number(total.dataset.n) + 1);
    total.textContent = `${total.dataset.n} task(s)`;
  }
  const empty = document.getElementById("tasks-empty");
  if (empty) empty.remove();
}

async function showTasks() {
  const view = document.getElementById("view");
  const filter = el("select", { id: "state-filter", onchange: (e) => { tasksQuery = { state: e.target.value, pages: [""] }; showTasks(); } },
    ...states.map((s) => el("option", { value: s, text: s ? s.replace("TASK_STATE_", "").toLowerCase() : "any state" })));
  filter.value = tasksQuery.state;
  const page = tasksQuery.pages[tasksQuery.pages.length - 1];
  let data;
  try {
    data = await call("GET", "tasks?" + new URLSearchParams({ state: tasksQuery.state, page, size: "20" }));
  } catch (e) {
    status(e.message, true);
    return;
  }
  const head = el("tr", {}, el("th", { text: "Task" }), el("th", { text: "State" }), el("th", { text: "Updated" }), el("th", { text: "Status message" }));
  const tbl = el("table", { id: "tasks-table" }, el("thead", {}, head), el("tbody", {}, ...data.tasks.map(taskRow)));
  const prev = el("button", { type: "button", id: "prev-page", disabled: tasksQuery.pages.length === 1,
    onclick: () => { tasksQuery.pages.pop(); showTasks(); } }, "Newer");
  const next = el("button", { type: "button", id: "next-page", disabled: !data.next_page,
    onclick: () => { tasksQuery.pages.push(data.next_page); showTasks(); } }, "Older");
  view.replaceChildren(el("h1", { text: "Tasks" }),
    el("div", { class: "toolbar" }, el("label", {}, "State", filter), prev, next,
      el("span", { id: "tasks-total", class: "muted", "data-n": String(data.total), text: `${data.total} task(s)` })),
    tbl, data.tasks.length ? null : el("p", { id: "tasks-empty", class: "muted", text: "No tasks yet. New ones appear here as they start." }));
}

// ---- one task ----

async function showTask(id) {
  document.getElementById("view").replaceChildren(el("h1", { text: "Task " + id }), el("div", { id: "timeline" }));
  await loadTimeline(id);
}

function partView(p) {
  if (p.text !== undefined) return el("pre", { text: p.text });
  if (p.data !== undefined) return el("pre", { text: JSON.stringify(p.data, null, 2) });
  if (p.url !== undefined) return el("span", { class: "mono", text: p.url });
  if (p.raw !== undefined) return el("span", { class: "muted", text: `${p.mediaType || "bytes"} (download below)` });
  return el("pre", { text: JSON.stringify(p) });
}

function eventView(e) {
  const ev = e.event;
  let kind = "event", detail = null, state = null;
  if (ev.task) { kind = "task"; state = ev.task.status && ev.task.status.state; }
  else if (ev.statusUpdate) { kind = "status"; state = ev.statusUpdate.status.state; detail = ev.statusUpdate.status.message; }
  else if (ev.artifactUpdate) { kind = "artifact"; detail = { parts: ev.artifactUpdate.artifact.parts }; }
  else if (ev.message) { kind = "message"; detail = ev.message; }
  const parts = detail && detail.parts ? detail.parts.map(partView) : [];
  return el("tr", { class: "event-row" }, el("td", { text: String(e.seq) }), el("td", { text: kind }),
    el("td", {}, state ? stateBadge(state) : ""), el("td", {}, ...parts));
}

async function loadTimeline(id) {
  const box = document.getElementById("timeline");
  if (!box) return;
  let data;
  try {
    data = await call("GET", "tasks/" + encodeURIComponent(id));
  } catch (e) {
    box.replaceChildren(el("p", { class: "error", text: e.message }));
    return;
  }
  const t = data.task;
  const summary = el("div", { class: "card grid" },
    el("span", { class: "muted", text: "State" }), el("span", { id: "task-state" }, stateBadge(t.status.state)),
    el("span", { class: "muted", text: "Context" }), el("span", { class: "mono", text: t.contextId }),
    el("span", { class: "muted", text: "Updated" }), el("span", { text: when(t.status.timestamp) }));
  const events = el("table", { id: "events" }, el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "Event" }),
    el("th", { text: "State" }), el("th", { text: "Content" }))), el("tbody", {}, ...data.events.map(eventView)));
  const arts = (t.artifacts || []).flatMap((a) => (a.parts || []).map((p, i) => ({ a, p, i })));
  const artifacts = arts.length ? table([
    { title: "Artifact", cell: (r) => r.a.name || r.a.artifactId },
    { title: "Part", cell: (r) => partView(r.p) },
    { title: "", cell: (r) => el("a", { class: "download", href: api + "tasks/" + encodeURIComponent(id) + "/artifacts/" +
      encodeURIComponent(r.a.artifactId) + "/" + r.i, download: r.p.filename || "", text: "Download" }) },
  ], arts) : el("p", { class: "muted", text: "No artifacts." });
  const tools = el("div", { id: "tool-calls" }, el("p", { class: "muted", text: "Loading…" }));
  const dels = el("div", { id: "delegations" }, el("p", { class: "muted", text: "Loading…" }));
  box.replaceChildren(summary, el("h2", { text: "Events" }), events, el("h2", { text: "Tool calls" }), tools,
    el("h2", { text: "Delegations and gate decisions" }), dels, el("h2", { text: "Artifacts" }), artifacts);
  call("GET", "reports/audit?" + new URLSearchParams({ task: id })).then((d) => {
    const recs = d.records || [];
    tools.replaceChildren(recs.length ? table([
      { title: "When", cell: (r) => when(r.time) },
      { title: "Tool", cell: (r) => r.tool, mono: true },
      { title: "Decision", cell: (r) => r.decision || "" },
      { title: "Approver", cell: (r) => r.approver || "" },
      { title: "Outcome", cell: (r) => r.outcome },
      { title: "Reason", cell: (r) => r.reason || "" },
      { title: "Took", cell: (r) => (r.duration_ns / 1e6).toFixed(1) + " ms" },
    ], recs) : el("p", { class: "muted", text: "No tool calls." }));
  }).catch((e) => tools.replaceChildren(el("p", { class: "muted", text: e.message })));
  Promise.all([call("GET", "reports/delegations"), call("GET", "reports/ledger").catch(() => ({ entries: [] }))]).then(([d, l]) => {
    const mine = (d.delegations || []).filter((x) => x.task_id === id || x.task_id.startsWith(id + "#"));
    const commits = new Map((l.entries || []).map((e) => [e.delegation_id, e]));
    const checks = (r) => {
      const e = commits.get(r.task_id);
      if (!e) return r.reason || "";
      const list = (e.verifiers || []).map((c) => `${c.passed ? "\u2713" : "\u2717"} ${c.name}${c.reason ? ": " + c.reason : ""}`);
      return list.length ? list.join("; ") : "every check passed";
    };
    dels.replaceChildren(mine.length ? table([
      { title: "Delegation", cell: (r) => r.task_id, mono: true },
      { title: "Skill", cell: (r) => r.skill },
      { title: "Peer", cell: (r) => r.peer },
      { title: "Remote task", cell: (r) => r.remote_task_id || "", mono: true },
      { title: "Remote state", cell: (r) => r.remote_state ? stateBadge(r.remote_state) : "" },
      { title: "Gate", cell: (r) => r.outcome || "pending" },
      { title: "Checks and reasons", cell: checks },
    ], mine) : el("p", { class: "muted", text: "No delegations." }));
  }).catch((e) => dels.replaceChildren(el("p", { class: "muted", text: e.message })));
}

// ---- approvals ----

async function refreshApprovalCount() {
  try {
    const d = await call("GET", "approvals");
    const n = d.approvals.filter((a) => a.may_decide).length;
    const b = document.getElementById("approvals-count");
    b.textContent = String(n);
    b.hidden = n === 0;
  } catch (e) { /* shown on the page itself */ }
}

async function decide(a, decision) {
  let reason = "";
  if (decision === "deny") {
    const input = document.getElementById("reason-" + a.task_id);
    reason = input ? input.value : "";
  }
  try {
    const res = await call("POST", "approvals/" + encodeURIComponent(a.task_id), { decision, scope: "once", reason });
    status(`Task ${a.task_id}: ${decision === "approve" ? "approved" : "denied"}, now ${res.state.replace("TASK_STATE_", "").toLowerCase()}`);
  } catch (e) {
    status(e.message, true);
  }
  showApprovals();
  refreshApprovalCount();
}

async function showApprovals() {
  const view = document.getElementById("view");
  let data;
  try {
    data = await call("GET", "approvals");
  } catch (e) {
    status(e.message, true);
    return;
  }
  const cards = data.approvals.map((a) => el("div", { class: "card approval", "data-task-id": a.task_id },
    el("div", { class: "grid" },
      el("span", { class: "muted", text: "Tool" }), el("span", { class: "mono", text: a.tool }),
      el("span", { class: "muted", text: "Risk" }), el("span", { text: [a.risk, a.effect].filter(Boolean).join(", ") || "unclassified" }),
      el("span", { class: "muted", text: "Asked by" }), el("span", { class: "mono", text: a.requested_by + (a.tenant ? " (tenant " + a.tenant + ")" : "") }),
      el("span", { class: "muted", text: "Task" }), el("span", { class: "mono", text: a.task_id }),
      el("span", { class: "muted", text: "Waiting since" }), el("span", { text: when(a.since) }),
      el("span", { class: "muted", text: "Why" }), el("span", { text: a.reason || "" }),
      el("span", { class: "muted", text: "Arguments" }), el("pre", { text: JSON.stringify(a.arguments || {}, null, 2) })),
    a.may_decide ? el("div", { class: "toolbar" },
      el("button", { type: "button", class: "approve", onclick: () => decide(a, "approve") }, "Approve once"),
      el("label", {}, "Reason to deny", el("input", { id: "reason-" + a.task_id, type: "text", maxlength: "500" })),
      el("button", { type: "button", class: "deny", onclick: () => decide(a, "deny") }, "Deny"))
      : el("p", { class: "muted", text: "Waiting for an approver." })));
  view.replaceChildren(el("h1", { text: "Approvals" }),
    ...(cards.length ? cards : [el("p", { id: "approvals-empty", class: "muted", text: "Nothing waits for approval." })]));
}

// ---- reports ----

async function report(name, title, draw) {
  const view = document.getElementById("view");
  delete view.dataset.loaded;
  view.replaceChildren(el("h1", { text: title }), el("p", { class: "muted", text: "Loading…" }));
  try {
    const d = await call("GET", "reports/" + name);
    view.replaceChildren(el("h1", { text: title }), draw(d));
  } catch (e) {
    view.replaceChildren(el("h1", { text: title }), el("p", { class: "muted", text: e.message }));
  }
  view.dataset.loaded = name;
}

function showPeers() {
  report("peers", "Peers", (d) => (d.peers || []).length ? table([
    { title: "Peer", cell: (p) => p.name },
    { title: "URL", cell: (p) => p.url, mono: true },
    { title: "Trust", cell: (p) => p.state },
    { title: "Reason", cell: (p) => p.reason || "" },
    { title: "Key id", cell: (p) => p.key_id || "", mono: true },
    { title: "Card", cell: (p) => p.card_name ? `${p.card_name} ${p.card_version || ""}` : "" },
    { title: "Skills", cell: (p) => (p.skills || []).join(", ") },
    { title: "Fetched", cell: (p) => when(p.fetched_at) },
  ], d.peers) : el("p", { class: "muted", text: "This agent has no peers." }));
}

function showMCP() {
  report("mcp", "MCP servers", (d) => {
    const servers = d.servers || [];
    if (!servers.length) return el("p", { class: "muted", text: "This agent has no MCP servers." });
    return el("div", {}, el("p", { class: "muted mono", text: "catalog " + (d.catalog_version || "none") }), table([
      { title: "Server", cell: (s) => s.name },
      { title: "State", cell: (s) => s.state },
      { title: "Protocol", cell: (s) => s.protocol || "" },
      { title: "Connects", cell: (s) => s.connects },
      { title: "Last error", cell: (s) => s.error || "" },
      { title: "Tools", cell: (s) => (s.tools || []).join(", "), mono: true },
    ], servers));
  });
}

// retryPush asks the agent to send a dead letter once more, or to try the
// event being retried now (seq 0: every one of the config's); the delivery
// worker sends it, and the page is drawn again once it had time to.
async function retryPush(taskId, configId, seq) {
  try {
    await call("POST", "push/retry", { task_id: taskId, config_id: configId, seq });
    status(`Task ${taskId}, config ${configId}: retry requested` + (seq ? ` for event ${seq}` : ""));
  } catch (e) {
    status(e.message, true);
  }
  setTimeout(() => { if (location.hash === "#/push") showPush(); }, 500);
}

function retryButton(taskId, configId, seq) {
  return el("button", { type: "button", class: "retry", "data-task-id": taskId, "data-config-id": configId, "data-seq": String(seq),
    onclick: () => retryPush(taskId, configId, seq) }, "Retry now");
}

function showPush() {
  report("push", "Push deliveries", (d) => {
    const configs = d.configs || [];
    if (!configs.length) return el("p", { class: "muted", text: "No push configs." });
    const dead = configs.flatMap((c) => (c.dead || []).map((x) => Object.assign({ task_id: c.task_id, config_id: c.config_id }, x)));
    const asked = configs.flatMap((c) => (c.retries || []).map((x) => Object.assign({ task_id: c.task_id, config_id: c.config_id }, x)));
    return el("div", {}, table([
      { title: "Task", cell: (c) => c.task_id, mono: true },
      { title: "Config", cell: (c) => c.config_id, mono: true },
      { title: "Webhook", cell: (c) => c.url, mono: true },
      { title: "Delivered", cell: (c) => c.delivered },
      { title: "Pending", cell: (c) => c.pending },
      { title: "Retrying", cell: (c) => c.attempts ? el("span", {}, `attempt ${c.attempts}, next ${when(c.next_retry)} `,
        retryButton(c.task_id, c.config_id, 0)) : "" },
      { title: "Last error", cell: (c) => c.last_error || "" },
    ], configs), el("h2", { text: "Dead letters" }), dead.length ? table([
      { title: "Task", cell: (x) => x.task_id, mono: true },
      { title: "Config", cell: (x) => x.config_id, mono: true },
      { title: "Event", cell: (x) => x.seq },
      { title: "Attempts", cell: (x) => x.attempts },
      { title: "Reason", cell: (x) => x.reason },
      { title: "Given up", cell: (x) => when(x.at) },
      { title: "", cell: (x) => retryButton(x.task_id, x.config_id, x.seq) },
    ], dead, (x) => ({ class: "dead-letter", "data-task-id": x.task_id, "data-seq": String(x.seq) }))
      : el("p", { id: "dead-none", class: "muted", text: "None." }),
    asked.length ? el("div", {}, el("h2", { text: "Retries requested" }), table([
      { title: "Task", cell: (x) => x.task_id, mono: true },
      { title: "Config", cell: (x) => x.config_id, mono: true },
      { title: "Event", cell: (x) => x.seq || "all" },
      { title: "By", cell: (x) => x.by },
      { title: "At", cell: (x) => when(x.at) },
    ], asked)) : null);
  });
}

function showLedger() {
  report("ledger", "Ledger", (d) => (d.entries || []).length ? table([
    { title: "Committed", cell: (e) => when(e.committed_at) },
    { title: "Delegation", cell: (e) => e.delegation_id, mono: true },
    { title: "Skill", cell: (e) => e.skill },
    { title: "Contract", cell: (e) => e.contract_version, mono: true },
    { title: "Evidence", cell: (e) => Object.entries(e.evidence_digests || {}).map(([k, v]) => k + "=" + v.slice(0, 12)).join(", "), mono: true },
  ], d.entries) : el("p", { class: "muted", text: "Nothing committed." }));
}

// ---- start ----

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("signin").addEventListener("submit", signIn);
  document.getElementById("signout").addEventListener("click", signOut);
  try {
    signedIn(await call("GET", "session"));
  } catch (e) {
    signedOut();
  }
});
