// mule serve's page: list and start jobs, stream one job over /ws, answer extension dialogs.
// Plain DOM, no build step; untrusted text only ever goes through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  token: null,
  ws: null,
  ready: false,
  current: null, // the selected job id
  messages: new Map(), // message id -> {el, blocks: Map(contentIndex -> element)}
  tools: new Map(), // tool call id -> element
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

// -- jobs ------------------------------------------------------------------------------------

async function refreshJobs() {
  if (!state.token) return;
  let jobs;
  try {
    [, { jobs }] = await api("GET", "/jobs");
  } catch (e) {
    return;
  }
  const list = $("jobs");
  list.replaceChildren();
  for (const job of jobs.slice().reverse()) {
    const li = el("li");
    li.dataset.jobId = job.id;
    li.append(el("div", "p", job.prompt.slice(0, 80)));
    li.append(el("div", "st", `${job.id} · ${job.status}`));
    if (job.id === state.current) li.classList.add("selected");
    li.addEventListener("click", () => select(job.id));
    list.append(li);
  }
}

async function startJob(ev) {
  ev.preventDefault();
  const prompt = $("prompt").value;
  const body = { prompt };
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
  refreshJobs();
}

function select(jobId) {
  if (state.current && state.current !== jobId) send({ type: "unsubscribe", job: state.current });
  state.current = jobId;
  state.messages.clear();
  state.tools.clear();
  $("transcript").replaceChildren();
  $("dialogs").replaceChildren();
  $("answer").replaceChildren();
  $("job-title").textContent = jobId;
  $("status").textContent = "…";
  $("cancel").hidden = false;
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
  ws.addEventListener("open", () => ws.send(JSON.stringify({ type: "auth", token: state.token })));
  ws.addEventListener("message", (e) => onFrame(JSON.parse(e.data)));
  ws.addEventListener("close", (e) => {
    state.ready = false;
    $("conn").textContent = `disconnected (${e.code}${e.reason ? ": " + e.reason : ""})`;
    if (e.code === 4401) {
      showAuth("The token was refused.");
      return;
    }
    setTimeout(() => {
      connect();
      if (state.current) outbox.push({ type: "subscribe", job: state.current, replay: true });
    }, 1000);
  });
}

function onFrame(f) {
  switch (f.type) {
    case "ready":
      state.ready = true;
      $("conn").textContent = "";
      while (outbox.length) state.ws.send(JSON.stringify(outbox.shift()));
      return;
    case "subscribed":
      if (f.job === state.current) {
        // A (re)subscription replays the job from the start: render it afresh.
        state.messages.clear();
        state.tools.clear();
        $("transcript").replaceChildren();
        $("dialogs").replaceChildren();
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
      if (f.job === state.current) removeDialog(f.id);
      return;
    case "job_status":
      if (f.job === state.current) setStatus(f.status);
      return;
    case "job_end":
      if (f.job === state.current) {
        setStatus(f.status);
        $("dialogs").replaceChildren();
        const text = f.result ? f.result.text : "";
        const ans = el("div", "msg answer", text);
        ans.dataset.testid = "answer";
        $("answer").replaceChildren(el("h4", "", "Result"), ans);
        if (f.error) $("answer").append(el("div", "error", f.error));
      }
      refreshJobs();
      return;
    default:
      return;
  }
}

function setStatus(s) {
  $("status").textContent = s;
  $("cancel").hidden = !["starting", "running"].includes(s);
}

function notice(text, cls) {
  $("transcript").append(el("div", cls || "notice", text));
}

// -- events ----------------------------------------------------------------------------------

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

function block(m, index, kind) {
  let b = m.blocks.get(index);
  if (!b) {
    b = el("div", kind);
    // keep blocks in content order even if they start out of order
    const after = [...m.blocks.keys()].filter((k) => k > index).sort((a, b) => a - b)[0];
    if (after === undefined) m.el.append(b);
    else m.el.insertBefore(b, m.blocks.get(after));
    m.blocks.set(index, b);
  }
  return b;
}

function toolCallText(c) {
  return `→ ${c.name}(${JSON.stringify(c.arguments)})`;
}

function renderContent(m, content) {
  content.forEach((c, i) => {
    if (c.type === "text") block(m, i, "text").textContent = c.text;
    else if (c.type === "thinking") block(m, i, "thinking").textContent = c.thinking;
    else if (c.type === "toolCall") block(m, i, "toolcall").textContent = toolCallText(c);
  });
}

function textOf(content) {
  return (content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

function onEvent(ev) {
  switch (ev.type) {
    case "message_start": {
      const v = ev.value;
      const m = messageView(ev.message.value, v.role);
      if (v.role === "user") m.el.textContent = textOf(v.content);
      else if (v.role === "assistant") renderContent(m, v.content);
      return;
    }
    case "message_update": {
      const m = messageView(ev.message.value, "assistant");
      if (ev.value) {
        renderContent(m, ev.value.content); // a snapshot: the whole response so far
        return;
      }
      const e = ev.event;
      switch (e.type) {
        case "text_start": block(m, e.contentIndex, "text"); break;
        case "text_delta": block(m, e.contentIndex, "text").textContent += e.delta; break;
        case "text_end": block(m, e.contentIndex, "text").textContent = e.content; break;
        case "thinking_start": block(m, e.contentIndex, "thinking"); break;
        case "thinking_delta": block(m, e.contentIndex, "thinking").textContent += e.delta; break;
        case "thinking_end": block(m, e.contentIndex, "thinking").textContent = e.content; break;
        case "toolcall_start": block(m, e.contentIndex, "toolcall").textContent = "→ "; break;
        case "toolcall_delta": block(m, e.contentIndex, "toolcall").textContent += e.delta; break;
        case "toolcall_end":
          block(m, e.contentIndex, "toolcall").textContent = toolCallText(e.toolCall);
          break;
        default: break;
      }
      return;
    }
    case "message_end": {
      const v = ev.value;
      const m = messageView(ev.message.value, v.role);
      if (v.role === "assistant") {
        renderContent(m, v.content); // the final message is authoritative
        if (v.errorMessage) m.el.append(el("div", "error", v.errorMessage));
      } else if (v.role === "toolResult") {
        m.el.textContent = textOf(v.content);
      }
      return;
    }
    case "tool_execution_start": {
      const t = el("div", "tool", `⚙ ${ev.call.name} running…`);
      state.tools.set(ev.toolCall.value, t);
      $("transcript").append(t);
      return;
    }
    case "tool_execution_update":
    case "tool_execution_end": {
      const t = state.tools.get(ev.toolCall.value);
      if (!t) return;
      const done = ev.type === "tool_execution_end";
      t.textContent = `⚙ ${ev.call.name} ${done ? "done" : "…"}`;
      if (done && ev.result.isError) t.classList.add("error");
      return;
    }
    case "extension_ui_request":
      if (ev.expectsAnswer) showDialog(ev);
      else if (ev.data && ev.data.message) notice(`extension: ${ev.data.message}`);
      return;
    case "extension_error":
      notice(`extension error: ${ev.error}`, "error");
      return;
    case "auto_retry_start":
      notice(`retrying (${ev.attempt}/${ev.maxAttempts}) after: ${ev.errorMessage}`);
      return;
    case "run_end":
      notice(`run ${ev.outcome}`);
      return;
    default:
      return;
  }
}

// -- extension dialogs -----------------------------------------------------------------------

function answer(ev, fields) {
  send({ type: "ui_response", job: state.current, id: ev.id, ...fields });
}

function showDialog(ev) {
  if (document.querySelector(`.dialog[data-ui-id="${CSS.escape(ev.id)}"]`)) return;
  const d = el("div", "dialog");
  d.dataset.uiId = ev.id;
  d.dataset.method = ev.method;
  d.append(el("div", "title", ev.data.title || ev.method));
  if (ev.data.message) d.append(el("div", "body", ev.data.message));
  const button = (label, cls, fields) => {
    const b = el("button", cls, label);
    b.type = "button";
    b.addEventListener("click", () => {
      for (const x of d.querySelectorAll("button")) x.disabled = true;
      answer(ev, fields);
    });
    d.append(b);
  };
  if (ev.method === "confirm") {
    button("Yes", "yes", { confirmed: true });
    button("No", "no", { confirmed: false });
  } else if (ev.method === "select") {
    for (const o of ev.data.options || []) button(o, "option", { value: o });
  } else {
    const input = ev.method === "editor" ? el("textarea") : el("input");
    if (ev.method !== "editor") input.type = "text";
    input.value = ev.data.prefill || "";
    input.placeholder = ev.data.placeholder || "";
    d.append(input);
    const ok = el("button", "ok", "OK");
    ok.type = "button";
    ok.addEventListener("click", () => answer(ev, { value: input.value }));
    d.append(ok);
  }
  button("Dismiss", "dismiss", { cancelled: true });
  $("dialogs").append(d);
}

function removeDialog(id) {
  const d = document.querySelector(`.dialog[data-ui-id="${CSS.escape(id)}"]`);
  if (d) d.remove();
}

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
    refreshJobs();
  }
});
$("save-token").addEventListener("click", () => {
  state.token = $("token").value.trim();
  sessionStorage.setItem("muleToken", state.token);
  $("auth").hidden = true;
  $("start-error").textContent = "";
  if (state.ws && state.ws.readyState <= WebSocket.OPEN) state.ws.close(); // reconnects
  else connect();
  refreshJobs();
});

state.token = readToken();
if (!state.token) showAuth("Paste the token `mule serve` printed.");
else connect();
refreshJobs();
setInterval(refreshJobs, 3000);
