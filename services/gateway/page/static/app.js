// Sidekick's web page: one WebSocket in events mode, a card per request (conversation.js),
// answers rendered as sanitized Markdown (render.js), past conversations in a sidebar.
import { Conversation } from "./conversation.js";
import { Sidebar } from "./sidebar.js";

const $ = (id) => document.getElementById(id);
const state = {
  config: { auth_required: false, max_message_chars: 20000 },
  token: sessionStorage.getItem("sidekick.token") || "",
  session: localStorage.getItem("sidekick.session") || newId(),
  ws: null,
  ready: false,
  retry: 0,
};
localStorage.setItem("sidekick.session", state.session);

function newId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function announce(text) {
  $("announce").textContent = text;
}

function setConnection(text, kind) {
  const el = $("connection");
  el.textContent = text;
  el.className = "connection " + (kind || "");
}

function authHeaders() {
  return state.token ? { Authorization: "Bearer " + state.token } : {};
}

function send(frame) {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN || !state.ready) {
    $("alert").textContent = "Not connected yet; please try again in a moment.";
    return false;
  }
  $("alert").textContent = "";
  state.ws.send(JSON.stringify(frame));
  return true;
}

const conversation = new Conversation($("log"), send, {
  answered(status, label) {
    announce(status === "awaiting_clarification"
      ? "Sidekick asks for more information."
      : "Answer " + label.toLowerCase() + ".");
    sidebar.refresh();
  },
  async timeline(requestId) {
    const resp = await fetch("/api/requests/" + encodeURIComponent(requestId) + "/timeline", {
      headers: authHeaders(),
    });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    return resp.json();
  },
});
const sidebar = new Sidebar((uuid) => openSession(uuid, "Opened an earlier conversation."),
  authHeaders);

// ---- the socket ----------------------------------------------------------------------------

function onFrame(f) {
  if (f.authenticated) {
    state.ws.send(JSON.stringify({ init: true, uuid: state.session, events: true }));
  } else if (f.event === "ready") {
    state.ready = true;
    state.retry = 0;
    setConnection("Connected", "up");
    $("send").disabled = false;
  } else if (f.event === "ack") {
    conversation.onAck(f);
  } else if (f.event === "queued") {
    conversation.onQueued(f);
  } else if (f.event === "replay") {
    conversation.onReplay(f);
  } else if (f.event === "progress") {
    conversation.onProgress(f);
  } else if (f.event === "clarification") {
    conversation.onClarification(f);
  } else if ("on_chat_model_stream" in f) {
    conversation.onChunk(f);
  } else if ("on_chat_model_end" in f) {
    if (f.request_id) conversation.onEnd(f);
  } else if (f.error) {
    conversation.onError(f);
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + location.host + "/ws");
  state.ws = ws;
  state.ready = false;
  setConnection("Connecting…");
  ws.addEventListener("open", () => {
    if (state.token) ws.send(JSON.stringify({ auth: state.token }));
    else ws.send(JSON.stringify({ init: true, uuid: state.session, events: true }));
  });
  ws.addEventListener("message", (ev) => {
    try {
      onFrame(JSON.parse(ev.data));
    } catch (e) {
      console.error("bad frame", e);
    }
  });
  ws.addEventListener("close", (ev) => {
    if (state.ws !== ws) return; // replaced on purpose
    state.ready = false;
    if (ev.code === 4401) {
      sessionStorage.removeItem("sidekick.token");
      state.token = "";
      showLogin("The token was not accepted.");
      setConnection("Signed out", "down");
      return;
    }
    const wait = Math.min(1000 * 2 ** state.retry, 10000);
    state.retry += 1;
    setConnection("Disconnected; reconnecting in " + Math.round(wait / 1000) + "s", "down");
    setTimeout(connect, wait);
  });
}

// ---- history, sessions, login --------------------------------------------------------------

async function loadHistory() {
  const resp = await fetch("/api/sessions/" + encodeURIComponent(state.session) + "/history", {
    headers: authHeaders(),
  });
  if (resp.status === 401) {
    showLogin("Please sign in.");
    return false;
  }
  if (!resp.ok) return true; // a new session has no history yet
  conversation.showHistory(await resp.json(), newId);
  return true;
}

function showLogin(message) {
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
}

async function start() {
  $("session-id").textContent = state.session;
  conversation.session = state.session;
  sidebar.select(state.session);
  $("send").disabled = true;
  try {
    const resp = await fetch("/api/config");
    state.config = await resp.json();
    if (state.config.model_notice) {
      $("model-notice").textContent = state.config.model_notice;
      $("model-notice").hidden = false;
    }
  } catch (e) {
    setConnection("The gateway is not reachable.", "down");
    return;
  }
  if (state.config.auth_required && !state.token) {
    showLogin();
    return;
  }
  sidebar.refresh();
  if (await loadHistory()) connect();
}

function openSession(uuid, message) {
  state.session = uuid;
  localStorage.setItem("sidekick.session", uuid);
  conversation.clear();
  const old = state.ws;
  state.ws = null;
  if (old) old.close();
  start();
  announce(message);
  $("message").focus();
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem("sidekick.token", state.token);
  $("login").hidden = true;
  $("token").value = "";
  start();
});

$("new-session").addEventListener("click", () => openSession(newId(), "Started a new session."));

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("message").value.trim();
  const criteria = $("criteria").value.trim();
  if (!text) return;
  if (text.length > state.config.max_message_chars) {
    $("alert").textContent = "Messages are limited to " + state.config.max_message_chars + " characters.";
    return;
  }
  const requestId = newId();
  const frame = { uuid: state.session, message: text, request_id: requestId };
  if (criteria) frame.success_criteria = criteria;
  if (!send(frame)) return;
  const c = conversation.sent(requestId, text, criteria);
  $("message").value = "";
  c.node.scrollIntoView({ block: "end" });
});

$("message").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $("composer").requestSubmit();
  }
});

start();
