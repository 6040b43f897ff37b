// Sidekick's web page: one WebSocket in events mode, a card per request, no dependencies.
// Everything the server sends is shown with textContent, never parsed as HTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const log = $("log");
  const state = {
    config: { auth_required: false, max_message_chars: 20000 },
    token: sessionStorage.getItem("sidekick.token") || "",
    session: localStorage.getItem("sidekick.session") || newId(),
    ws: null,
    ready: false,
    retry: 0,
    cards: new Map(),
    lastSent: null,
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

  // ---- cards -------------------------------------------------------------------------------

  function card(requestId, userText, criteria) {
    let c = state.cards.get(requestId);
    if (c) return c;
    const node = $("turn-template").content.firstElementChild.cloneNode(true);
    node.dataset.requestId = requestId;
    const q = (sel) => node.querySelector(sel);
    c = {
      id: requestId,
      node,
      answer: q(".answer"),
      assistant: q(".assistant"),
      steps: q(".steps"),
      progress: q(".progress"),
      status: q(".status"),
      cancel: q(".cancel"),
      clarify: q(".clarify"),
      done: false,
      fromHistory: false,
    };
    q(".user .text").textContent = userText || "(an earlier request)";
    if (criteria) {
      q(".criteria").hidden = false;
      q(".criteria").textContent = "Success criteria: " + criteria;
    }
    c.cancel.addEventListener("click", () => {
      send({ cancel: requestId });
      c.cancel.disabled = true;
      c.status.textContent = "Cancelling…";
    });
    q(".copy").addEventListener("click", () => copyTrace(c));
    c.clarify.addEventListener("submit", (ev) => {
      ev.preventDefault();
      answerClarification(c);
    });
    state.cards.set(requestId, c);
    log.appendChild(node);
    $("empty").hidden = true;
    return c;
  }

  function busy(c, on) {
    c.assistant.setAttribute("aria-busy", on ? "true" : "false");
    c.cancel.hidden = !on;
    c.cancel.disabled = false;
    if (on) {
      c.status.className = "status";
      c.status.textContent = "Working…";
    }
  }

  // A progress line; `parts` are strings or [cssClass, text] pairs for emphasis.
  function step(c, ...parts) {
    c.progress.hidden = false;
    const li = document.createElement("li");
    for (const part of parts) {
      if (typeof part === "string") {
        li.append(part);
      } else {
        const em = document.createElement("strong");
        em.className = part[0];
        em.textContent = part[1];
        li.append(em);
      }
    }
    c.steps.appendChild(li);
  }

  function onProgress(f) {
    const c = card(f.request_id);
    const n = f.attempt;
    const worker = f.worker_type ? f.worker_type : "a worker";
    switch (f.stage) {
      case "direct":
        step(c, "Answered directly" + (f.detail ? ": " + f.detail : ""));
        break;
      case "routed":
        step(c, "Routed to the orchestrator" + (f.detail ? ": " + f.detail : ""));
        break;
      case "decided":
        step(c, "Decided on " + worker + (f.detail ? " (" + f.detail + ")" : ""));
        break;
      case "attempt_started":
        step(c, "Attempt " + n + " with " + worker);
        break;
      case "evaluated": {
        let text = ", score " + f.score + "/100.";
        if (f.feedback) text += " Feedback: " + f.feedback;
        if (f.suggestions && f.suggestions.length) {
          text += " Suggestions: " + f.suggestions.join("; ");
        }
        const verdict = f.passed ? ["verdict-pass", "passed"] : ["verdict-fail", "not passed"];
        step(c, "Attempt " + n + " judged: ", verdict, text);
        break;
      }
      default:
        step(c, f.stage.replace(/_/g, " ") + (f.detail ? ": " + f.detail : ""));
    }
  }

  function onEnd(f) {
    const c = card(f.request_id);
    busy(c, false);
    const status = f.status || "completed";
    const meta = f.metadata || {};
    c.status.className = "status " + status;
    const label = {
      completed: "Completed",
      partial: "Partial answer: attempts ran out",
      failed: "Failed",
      cancelled: "Cancelled",
      awaiting_clarification: "Waiting for your answers",
      rejected: "Not sent",
    }[status] || status;
    let text = label;
    if (meta.attempts) text += " · " + meta.attempts + (meta.attempts === 1 ? " attempt" : " attempts");
    if (meta.score !== undefined && meta.score !== null) text += " · score " + meta.score + "/100";
    if (meta.route === "cached") text += " · from the cache";
    c.status.textContent = text;
    if (status === "partial" && meta.feedback) {
      const note = c.node.querySelector(".note");
      note.hidden = false;
      note.textContent = "Final note: the evaluator still found this lacking: " + meta.feedback;
    }
    if (meta.trace_id) {
      c.node.querySelector(".trace").hidden = false;
      c.node.querySelector(".trace-id").textContent = meta.trace_id;
    }
    c.done = status !== "awaiting_clarification";
    announce(status === "awaiting_clarification" ? "Sidekick asks for more information." : "Answer " + label.toLowerCase() + ".");
  }

  function onClarification(f) {
    const c = card(f.request_id);
    const box = c.clarify.querySelector(".questions");
    box.replaceChildren();
    for (const q of f.questions) {
      const id = "answer-" + f.request_id + "-" + q.id;
      const wrap = document.createElement("div");
      wrap.className = "q";
      const label = document.createElement("label");
      label.htmlFor = id;
      label.textContent = q.question;
      const input = document.createElement("input");
      input.id = id;
      input.required = true;
      input.dataset.question = q.question;
      wrap.append(label, input);
      box.appendChild(wrap);
    }
    c.clarify.hidden = false;
    const first = box.querySelector("input");
    if (first) first.focus();
  }

  function answerClarification(c) {
    const inputs = Array.from(c.clarify.querySelectorAll("input"));
    const message = inputs.map((i) => i.dataset.question + " " + i.value.trim()).join("\n");
    if (!send({ uuid: state.session, message, reply_to: c.id })) return;
    state.lastSent = { id: c.id, text: message };
    c.clarify.hidden = true;
    step(c, "You answered: " + inputs.map((i) => i.value.trim()).join("; "));
    busy(c, true);
  }

  function onError(f) {
    const err = f.error;
    if (err.request_id && state.cards.has(err.request_id)) {
      const c = state.cards.get(err.request_id);
      const p = c.node.querySelector(".failure");
      p.hidden = false;
      p.textContent = err.message + " (" + err.code + ")";
    } else {
      $("alert").textContent = err.message + " (" + err.code + ")";
    }
  }

  async function copyTrace(c) {
    const id = c.node.querySelector(".trace-id").textContent;
    const button = c.node.querySelector(".copy");
    try {
      await navigator.clipboard.writeText(id);
      button.textContent = "Copied";
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents(c.node.querySelector(".trace-id"));
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      button.textContent = "Selected: press Ctrl+C";
    }
  }

  // ---- the socket --------------------------------------------------------------------------

  function send(frame) {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN || !state.ready) {
      $("alert").textContent = "Not connected yet; please try again in a moment.";
      return false;
    }
    $("alert").textContent = "";
    state.ws.send(JSON.stringify(frame));
    return true;
  }

  function onFrame(f) {
    if (f.authenticated) {
      state.ws.send(JSON.stringify({ init: true, uuid: state.session, events: true }));
    } else if (f.event === "ready") {
      state.ready = true;
      state.retry = 0;
      setConnection("Connected", "up");
      $("send").disabled = false;
    } else if (f.event === "ack") {
      if (f.action === "answer" && state.lastSent && state.lastSent.id !== f.request_id) {
        // A plain message in a session with an open question answers that question.
        const placeholder = state.cards.get(state.lastSent.id);
        if (placeholder) placeholder.node.remove();
        state.cards.delete(state.lastSent.id);
        const c = card(f.request_id);
        c.clarify.hidden = true;
        step(c, "You answered: " + state.lastSent.text);
      }
      if (f.action !== "cancel") busy(card(f.request_id), true);
    } else if (f.event === "replay") {
      // What ended while we were away comes whole: drop any half-streamed text first.
      const c = card(f.request_id);
      c.answer.textContent = "";
      c.fromHistory = false;
      c.done = false;
    } else if (f.event === "progress") {
      onProgress(f);
    } else if (f.event === "clarification") {
      onClarification(f);
    } else if ("on_chat_model_stream" in f) {
      const c = card(f.request_id);
      if (!c.fromHistory || !c.done) c.answer.textContent += f.on_chat_model_stream;
    } else if ("on_chat_model_end" in f) {
      if (f.request_id) onEnd(f);
    } else if (f.error) {
      onError(f);
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

  // ---- history, session, login ----------------------------------------------------------------

  async function loadHistory() {
    const resp = await fetch("/api/sessions/" + encodeURIComponent(state.session) + "/history", {
      headers: authHeaders(),
    });
    if (resp.status === 401) {
      showLogin("Please sign in.");
      return false;
    }
    if (!resp.ok) return true; // a new session has no history yet
    const body = await resp.json();
    let current = null;
    for (const turn of body.turns) {
      const id = turn.request_id || newId();
      if (turn.role === "user") {
        current = card(id, turn.content);
      } else {
        current = current && current.id === id ? current : card(id);
        current.answer.textContent = turn.content;
        current.status.textContent = "Earlier answer";
      }
      current.fromHistory = true;
      current.done = true;
    }
    if (body.parked) {
      const c = card(body.parked.request_id, body.parked.text);
      onClarification({ request_id: body.parked.request_id, questions: body.parked.questions });
      c.status.textContent = "Waiting for your answers";
    }
    return true;
  }

  function showLogin(message) {
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").focus();
  }

  async function start() {
    $("session-id").textContent = state.session;
    $("send").disabled = true;
    try {
      const resp = await fetch("/api/config");
      state.config = await resp.json();
    } catch (e) {
      setConnection("The gateway is not reachable.", "down");
      return;
    }
    if (state.config.auth_required && !state.token) {
      showLogin();
      return;
    }
    if (await loadHistory()) connect();
  }

  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("sidekick.token", state.token);
    $("login").hidden = true;
    $("token").value = "";
    start();
  });

  $("new-session").addEventListener("click", () => {
    state.session = newId();
    localStorage.setItem("sidekick.session", state.session);
    state.cards.clear();
    log.replaceChildren();
    $("empty").hidden = false;
    const old = state.ws;
    state.ws = null;
    if (old) old.close();
    start();
    announce("Started a new session.");
    $("message").focus();
  });

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
    state.lastSent = { id: requestId, text };
    const c = card(requestId, text, criteria);
    busy(c, true);
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
})();
