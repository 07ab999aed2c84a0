// mule serve's page: the job list and one job's live transcript, all pushed over /ws.
// Plain DOM, no build step; untrusted text only ever goes through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  token: null,
  ws: null,
  ready: false,
  retryMs: 500,
  current: null, // the selected job id
  jobs: [],
  messages: new Map(), // message id -> {el, blocks: Map(contentIndex -> element)}
  tools: new Map(), // tool call id -> {el, args}
  usage: null,
  dialogs: [], // open extension requests of the current job, oldest first
  shown: null, // the request in the modal
};

function readToken() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash.slice(1));
  if (m) {
    sessionStorage.setItem("muleToken", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname); // keep the token out of the address bar
  }
  return sessionStorage.getItem("muleToken");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: { Authorization: "Bearer " + state.token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status === 401) {
    showAuth("The token was refused.");
    throw new Error("unauthorized");
  }
  return [r.status, await r.json()];
}

function showAuth(why) {
  $("auth").hidden = false;
  $("start-error").textContent = why || "";
}

function setConn(kind, text) {
  $("conn").dataset.state = kind;
  $("conn").textContent = text;
}

// -- the job list (pushed by the server) -----------------------------------------------------

function renderJobs() {
  const list = $("jobs");
  list.replaceChildren();
  $("no-jobs").hidden = state.jobs.length > 0;
  for (const job of state.jobs.slice().reverse()) {
    const li = el("li");
    li.dataset.jobId = job.id;
    li.tabIndex = 0;
    li.append(el("div", "p", job.prompt.slice(0, 120)));
    const st = el("div", "st");
    const badge = el("span", "badge", job.status);
    badge.dataset.status = job.status;
    st.append(badge, el("span", "", job.id));
    if (job.pendingUi.length) st.append(el("span", "pending", `⚑ ${job.pendingUi.length} waiting`));
    li.append(st);
    if (job.id === state.current) li.classList.add("selected");
    li.addEventListener("click", () => select(job.id));
    li.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        select(job.id);
      }
    });
    list.append(li);
  }
  const remembered = sessionStorage.getItem("muleJob");
  if (!state.current && remembered && state.jobs.some((j) => j.id === remembered)) {
    select(remembered); // a reload comes back to the job it showed
  }
}

async function startJob(ev) {
  ev.preventDefault();
  const body = { prompt: $("prompt").value };
  const agent = $("agent").value;
  if (agent) body.agent = agent;
  const model = $("model").value.trim();
  if (model) {
    const [provider, ...rest] = model.split("/");
    body.config = { provider, model: rest.join("/") };
  }
  $("start-error").textContent = "";
  const [status, job] = await api("POST", "/jobs", body);
  if (status !== 201) {
    $("start-error").textContent = job.error || `HTTP ${status}`;
    return;
  }
  $("prompt").value = "";
  select(job.id);
}

async function loadAgents() {
  // The owner's agent profiles, picked by name (GET /agents); none: the row stays hidden.
  const [status, data] = await api("GET", "/agents");
  if (status !== 200 || !data.agents.length) return;
  const select = $("agent");
  const chosen = select.value || data.default || "";
  select.replaceChildren();
  if (data.default === null) select.append(new Option("(server default)", ""));
  for (const a of data.agents) {
    select.append(new Option(a.description ? `${a.name} — ${a.description}` : a.name, a.name));
  }
  select.value = chosen;
  $("agent-row").hidden = false;
}

function resetView() {
  state.messages.clear();
  state.tools.clear();
  state.usage = { input: 0, output: 0, cache: 0, cost: 0 };
  state.dialogs = [];
  closeModal();
  $("transcript").replaceChildren();
  $("answer").replaceChildren();
  renderUsage();
}

function select(jobId) {
  if (state.current && state.current !== jobId) send({ type: "unsubscribe", job: state.current });
  state.current = jobId;
  sessionStorage.setItem("muleJob", jobId);
  resetView();
  $("job-title").textContent = jobId;
  setStatus("…");
  for (const li of $("jobs").children) li.classList.toggle("selected", li.dataset.jobId === jobId);
  send({ type: "subscribe", job: jobId, replay: true });
}

// -- socket ----------------------------------------------------------------------------------

const outbox = [];

function send(msg) {
  if (state.ws && state.ready) state.ws.send(JSON.stringify(msg));
  else outbox.push(msg);
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws`);
  state.ws = ws;
  state.ready = false;
  setConn("connecting", "connecting…");
  ws.addEventListener("open", () => ws.send(JSON.stringify({ type: "auth", token: state.token })));
  ws.addEventListener("message", (e) => onFrame(JSON.parse(e.data)));
  ws.addEventListener("close", (e) => {
    if (state.ws !== ws) return;
    state.ready = false;
    if (e.code === 4401) {
      setConn("refused", "token refused");
      showAuth("The token was refused.");
      return;
    }
    const wait = state.retryMs;
    state.retryMs = Math.min(wait * 2, 8000);
    setConn("reconnecting", `reconnecting in ${(wait / 1000).toFixed(1)} s (${e.code})`);
    setTimeout(() => {
      connect();
      // the server replays the job from its start: the view is rebuilt from it
      if (state.current) outbox.push({ type: "subscribe", job: state.current, replay: true });
    }, wait);
  });
}

function onFrame(f) {
  switch (f.type) {
    case "ready":
      state.ready = true;
      state.retryMs = 500;
      setConn("live", "live");
      while (outbox.length) state.ws.send(JSON.stringify(outbox.shift()));
      loadAgents().catch((e) => notice(`agents: ${e}`, "error"));
      return;
    case "jobs":
      state.jobs = f.jobs;
      renderJobs();
      return;
    case "subscribed":
      if (f.job === state.current) {
        resetView(); // a (re)subscription replays the job from the start
        setStatus(f.status);
      }
      return;
    case "error":
      notice(`server: ${f.error}`, "error");
      return;
    case "event":
      if (f.job === state.current) onEvent(f.event);
      return;
    case "ui_resolved":
      if (f.job === state.current) resolveDialog(f.id);
      return;
    case "job_status":
      if (f.job === state.current) setStatus(f.status);
      return;
    case "job_end":
      if (f.job === state.current) endJob(f);
      return;
    default:
      return;
  }
}

function setStatus(s) {
  $("status").textContent = s;
  $("status").dataset.status = s;
  $("cancel").hidden = !["starting", "running", "…"].includes(s);
}

function endJob(f) {
  setStatus(f.status);
  state.dialogs = [];
  closeModal();
  for (const m of state.messages.values()) m.el.classList.remove("streaming");
  for (const t of state.tools.values()) {
    if (t.el.dataset.state !== "running") continue;
    t.el.dataset.state = "failed"; // it never reported an end: say so rather than "running"
    t.el.querySelector(".state").textContent = `✗ not finished (job ${f.status})`;
  }
  const box = $("answer");
  box.replaceChildren(el("h2", "", "Result"));
  const text = f.result ? f.result.text : "";
  if (text) box.append(el("div", "msg final", text));
  if (f.error) box.append(el("div", "notice error", f.error));
}

function notice(text, cls) {
  $("transcript").append(el("div", "notice" + (cls ? " " + cls : ""), text));
}

function renderUsage() {
  const u = state.usage;
  $("usage").hidden = !u || (u.input === 0 && u.output === 0 && u.cost === 0);
  if (!u) return;
  const fmt = (n) => n.toLocaleString("en-US");
  const q = (k) => $("usage").querySelector(`[data-k=${k}]`);
  q("input").textContent = fmt(u.input);
  q("output").textContent = fmt(u.output);
  q("cache").textContent = fmt(u.cache);
  q("cost").textContent = `$${u.cost.toFixed(4)}`;
}

// -- transcript ------------------------------------------------------------------------------

function messageView(id, role) {
  let m = state.messages.get(id);
  if (!m) {
    const box = el("div", `msg ${role}`);
    box.dataset.messageId = id;
    $("transcript").append(box);
    m = { el: box, blocks: new Map() };
    state.messages.set(id, m);
  }
  return m;
}

function makeBlock(kind) {
  if (kind === "thinking") {
    const d = el("details", "thinking");
    d.open = true; // open while it streams; closed once the message ends
    d.append(el("summary", "", "Thinking"), el("div", "thinking-text"));
    return d;
  }
  return el("div", kind);
}

function block(m, index, kind) {
  let b = m.blocks.get(index);
  if (!b) {
    b = makeBlock(kind);
    // keep blocks in content order even if they start out of order
    const after = [...m.blocks.keys()].filter((k) => k > index).sort((a, c) => a - c)[0];
    if (after === undefined) m.el.append(b);
    else m.el.insertBefore(b, m.blocks.get(after));
    m.blocks.set(index, b);
  }
  return kind === "thinking" ? b.querySelector(".thinking-text") : b;
}

function callText(c) {
  return `→ ${c.name}(${JSON.stringify(c.arguments)})`;
}

function renderContent(m, content) {
  content.forEach((c, i) => {
    if (c.type === "text") block(m, i, "text").textContent = c.text;
    else if (c.type === "thinking") block(m, i, "thinking").textContent = c.thinking;
    else if (c.type === "toolCall") block(m, i, "toolcall").textContent = callText(c);
  });
}

function textOf(content) {
  return (content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

function addUsage(u) {
  if (!u) return;
  state.usage.input += u.input || 0;
  state.usage.output += u.output || 0;
  state.usage.cache += (u.cacheRead || 0) + (u.cacheWrite || 0);
  state.usage.cost += (u.cost && u.cost.total) || 0;
  renderUsage();
}

function onUpdate(m, e) {
  switch (e.type) {
    case "text_start": block(m, e.contentIndex, "text"); break;
    case "text_delta": block(m, e.contentIndex, "text").textContent += e.delta; break;
    case "text_end": block(m, e.contentIndex, "text").textContent = e.content; break;
    case "thinking_start": block(m, e.contentIndex, "thinking"); break;
    case "thinking_delta": block(m, e.contentIndex, "thinking").textContent += e.delta; break;
    case "thinking_end": block(m, e.contentIndex, "thinking").textContent = e.content; break;
    case "toolcall_start": block(m, e.contentIndex, "toolcall").textContent = "→ "; break;
    case "toolcall_delta": block(m, e.contentIndex, "toolcall").textContent += e.delta; break;
    case "toolcall_end": block(m, e.contentIndex, "toolcall").textContent = callText(e.toolCall); break;
    default: break;
  }
}

function toolCard(ev) {
  const card = el("div", "tool");
  card.dataset.toolCallId = ev.call.id;
  card.dataset.state = "running";
  const head = el("div", "head");
  head.append(el("span", "", "⚙"), el("span", "name", ev.call.name), el("span", "state", "running…"));
  const args = el("pre", "args", JSON.stringify(ev.call.arguments, null, 2));
  card.append(head, args, el("pre", "output"));
  return card;
}

function onTool(ev) {
  const id = ev.toolCall.value;
  let t = state.tools.get(id);
  if (!t) {
    t = { el: toolCard(ev) };
    state.tools.set(id, t);
    $("transcript").append(t.el);
  }
  if (ev.type === "tool_execution_start") return;
  t.el.querySelector("pre.output").textContent = textOf(ev.result.content);
  if (ev.type !== "tool_execution_end") return;
  const failed = ev.result.isError === true;
  t.el.dataset.state = failed ? "failed" : "done";
  const why = textOf(ev.result.content).trim().split("\n").filter(Boolean).pop() || "";
  t.el.querySelector(".state").textContent = failed ? `✗ failed${why ? ": " + why : ""}` : "✓ done";
}

function onEvent(ev) {
  switch (ev.type) {
    case "message_start": {
      const v = ev.value;
      if (v.role === "toolResult") return; // its tool card shows the result
      const m = messageView(ev.message.value, v.role);
      if (v.role === "user") m.el.textContent = textOf(v.content);
      else if (v.role === "assistant") {
        m.el.classList.add("streaming");
        renderContent(m, v.content);
      }
      return;
    }
    case "message_update": {
      const m = messageView(ev.message.value, "assistant");
      m.el.classList.add("streaming");
      if (ev.value) renderContent(m, ev.value.content); // a snapshot: the whole response so far
      else onUpdate(m, ev.event);
      return;
    }
    case "message_end": {
      const v = ev.value;
      if (v.role !== "assistant") return;
      const m = messageView(ev.message.value, v.role);
      m.el.classList.remove("streaming");
      renderContent(m, v.content); // the final message is authoritative
      for (const d of m.el.querySelectorAll("details.thinking")) d.open = false;
      if (v.stopReason === "error") m.el.append(el("div", "error", `model error: ${v.errorMessage || "unknown"}`));
      if (v.stopReason === "aborted") m.el.append(el("div", "error", "aborted"));
      addUsage(v.usage);
      return;
    }
    case "tool_execution_start":
    case "tool_execution_update":
    case "tool_execution_end":
      onTool(ev);
      return;
    case "extension_ui_request":
      if (ev.expectsAnswer) openDialog(ev);
      else if (ev.data && ev.data.message) notice(`extension: ${ev.data.message}`);
      return;
    case "extension_error":
      notice(`extension error: ${ev.error}`, "error");
      return;
    case "auto_retry_start":
      notice(`retrying (${ev.attempt}/${ev.maxAttempts}) in ${ev.delayMs} ms after: ${ev.errorMessage}`);
      return;
    case "compaction_start":
      notice("compacting the context…");
      return;
    case "run_end":
      notice(`run ${ev.outcome}`, ev.outcome === "completed" ? "" : "error");
      return;
    default:
      return;
  }
}

// -- extension dialogs: one modal at a time, keyboard first ---------------------------------

function openDialog(ev) {
  if (state.dialogs.some((d) => d.id === ev.id)) return;
  state.dialogs.push(ev);
  if (!state.shown) showNext();
}

function resolveDialog(id) {
  state.dialogs = state.dialogs.filter((d) => d.id !== id);
  if (state.shown && state.shown.id === id) {
    closeModal();
    showNext();
  }
}

function closeModal() {
  state.shown = null;
  const dlg = $("ui-dialog");
  if (dlg.open) dlg.close();
}

function answer(ev, fields) {
  send({ type: "ui_response", job: state.current, id: ev.id, ...fields });
  resolveDialog(ev.id); // the server confirms with ui_resolved (or says why not)
}

function actionButton(label, cls, onClick) {
  const b = el("button", cls, label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function showNext() {
  const ev = state.dialogs[0];
  if (!ev) return;
  state.shown = ev;
  const dlg = $("ui-dialog");
  dlg.dataset.uiId = ev.id;
  dlg.dataset.method = ev.method;
  $("ui-title").textContent = ev.data.title || ev.method;
  $("ui-message").textContent = ev.data.message || "";
  const body = $("ui-body");
  const actions = $("ui-actions");
  body.replaceChildren();
  actions.replaceChildren();
  let focus = null;
  const dismiss = actionButton("Cancel", "dismiss", () => answer(ev, { cancelled: true }));
  if (ev.method === "confirm") {
    const no = actionButton("No", "no", () => answer(ev, { confirmed: false }));
    const yes = actionButton("Yes", "yes primary", () => answer(ev, { confirmed: true }));
    actions.append(el("span", "hint", "Esc cancels"), dismiss, no, yes);
    focus = yes;
  } else if (ev.method === "select") {
    const list = el("div", "options");
    list.setAttribute("role", "listbox");
    const options = ev.data.options || [];
    options.forEach((o, i) => {
      const b = actionButton(o, "option", () => answer(ev, { value: o }));
      b.setAttribute("role", "option");
      b.dataset.value = o;
      b.addEventListener("keydown", (e) => {
        const step = e.key === "ArrowDown" ? 1 : e.key === "ArrowUp" ? -1 : 0;
        if (!step) return;
        e.preventDefault();
        const next = list.children[(i + step + options.length) % options.length];
        next.focus();
      });
      b.addEventListener("focus", () => {
        for (const x of list.children) x.setAttribute("aria-selected", String(x === b));
      });
      list.append(b);
    });
    body.append(list);
    actions.append(el("span", "hint", "↑↓ to move · Enter to pick · Esc cancels"), dismiss);
    focus = list.children[0] || dismiss;
  } else {
    const editor = ev.method === "editor";
    const input = editor ? el("textarea") : el("input");
    if (!editor) input.type = "text";
    input.id = "ui-input";
    input.value = ev.data.prefill || "";
    input.placeholder = ev.data.placeholder || "";
    const ok = actionButton("OK", "ok primary", () => answer(ev, { value: input.value }));
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (!editor || e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        ok.click();
      }
    });
    body.append(input);
    actions.append(el("span", "hint", editor ? "Ctrl+Enter to send · Esc cancels" : "Enter to send · Esc cancels"), dismiss, ok);
    focus = input;
  }
  if (!dlg.open) dlg.showModal();
  focus.focus();
}

$("ui-dialog").addEventListener("cancel", (e) => {
  e.preventDefault(); // Escape: dismiss the request, not just the window
  if (state.shown) answer(state.shown, { cancelled: true });
});
$("ui-form").addEventListener("submit", (e) => e.preventDefault());

// -- boot ------------------------------------------------------------------------------------

$("start-form").addEventListener("submit", (ev) => startJob(ev).catch((e) => {
  $("start-error").textContent = String(e);
}));
$("cancel").addEventListener("click", async () => {
  if (!state.current) return;
  $("cancel").disabled = true;
  try {
    await api("POST", `/jobs/${encodeURIComponent(state.current)}/cancel`);
  } finally {
    $("cancel").disabled = false;
  }
});
$("save-token").addEventListener("click", () => {
  state.token = $("token").value.trim();
  sessionStorage.setItem("muleToken", state.token);
  $("auth").hidden = true;
  $("start-error").textContent = "";
  if (state.ws && state.ws.readyState <= WebSocket.OPEN) state.ws.close();
  connect();
});

state.token = readToken();
resetView();
if (!state.token) {
  setConn("refused", "no token");
  showAuth("Paste the token `mule serve` printed.");
} else connect();
