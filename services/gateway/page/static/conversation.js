// The conversation on the page: a card per request (the user's message, the answer as it
// streams, progress, verdicts, clarification questions, sources, status). Text from the server
// goes in as text nodes, except an answer, which goes through render.js (Markdown, sanitized).
import { StreamingAnswer, copyCode, renderSources, splitSources } from "./render.js";
import { offerTimeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);

// Of an action waiting for approval: the argument shown as a block, and names for the rest.
const BODY_OF = { "email.send": "body", notify: "message", python_run: "code" };
const LABELS = { to: "To", subject: "Subject", title: "Title", domain: "Domain" };

const STATUS_LABELS = {
  completed: "Completed",
  partial: "Partial answer: attempts ran out",
  failed: "Failed",
  cancelled: "Cancelled",
  awaiting_clarification: "Waiting for your answers",
  rejected: "Not sent",
};

export class Conversation {
  /** `send(frame)` puts a frame on the socket (false when it cannot); `events` is told about
   * what the rest of the page cares for (`answered`, `asked`) and reads a request's timeline
   * (`timeline(id)`, for "How this was made"). */
  constructor(log, send, events) {
    this.log = log;
    this.send = send;
    this.events = events;
    this.cards = new Map();
    this.lastSent = null;
    this.session = "";
    log.addEventListener("click", (ev) => {
      const button = ev.target.closest(".copy-code");
      if (button) copyCode(button);
    });
  }

  clear() {
    this.cards.clear();
    this.log.replaceChildren();
    $("empty").hidden = false;
  }

  card(requestId, userText, criteria) {
    let c = this.cards.get(requestId);
    if (c) return c;
    const node = $("turn-template").content.firstElementChild.cloneNode(true);
    node.dataset.requestId = requestId;
    const q = (sel) => node.querySelector(sel);
    c = {
      id: requestId,
      node,
      answer: new StreamingAnswer(q(".answer")),
      assistant: q(".assistant"),
      steps: q(".steps"),
      progress: q(".progress"),
      status: q(".status"),
      cancel: q(".cancel"),
      clarify: q(".clarify"),
      approve: q(".approve"),
      done: false,
      fromHistory: false,
    };
    q(".user .text").textContent = userText || "(an earlier request)";
    if (criteria) {
      q(".criteria").hidden = false;
      q(".criteria").textContent = "Success criteria: " + criteria;
    }
    c.cancel.addEventListener("click", () => {
      this.send({ cancel: requestId });
      c.cancel.disabled = true;
      c.status.textContent = "Cancelling…";
    });
    q(".copy").addEventListener("click", () => copyTrace(c));
    c.clarify.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.answerClarification(c);
    });
    c.approve.addEventListener("submit", (ev) => ev.preventDefault());
    c.approve.querySelector(".yes").addEventListener("click", () => this.decide(c, "yes"));
    c.approve.querySelector(".no").addEventListener("click", () => this.decide(c, "no"));
    this.cards.set(requestId, c);
    this.log.appendChild(node);
    $("empty").hidden = true;
    return c;
  }

  busy(c, on) {
    c.assistant.setAttribute("aria-busy", on ? "true" : "false");
    c.cancel.hidden = !on;
    c.cancel.disabled = false;
    if (on) {
      c.status.className = "status";
      c.status.textContent = "Working…";
    }
  }

  sent(requestId, text, criteria) {
    this.lastSent = { id: requestId, text };
    const c = this.card(requestId, text, criteria);
    this.busy(c, true);
    return c;
  }

  // ---- frames ----------------------------------------------------------------------------

  onAck(f) {
    const last = this.lastSent;
    const c = this.card(f.request_id);
    if (f.action === "answer" && last && last.id !== f.request_id) {
      // A plain message in a session with an open question answers that question.
      const placeholder = this.cards.get(last.id);
      if (placeholder) placeholder.node.remove();
      this.cards.delete(last.id);
      c.clarify.hidden = true;
      c.approve.hidden = true;
      step(c, "You answered: " + last.text);
    }
    // An ack says "taken", so it never reopens a request whose end has already come.
    if (f.action !== "cancel" && !c.done) this.busy(c, true);
  }

  onQueued(f) {
    // One conversation at a time: this message waits for the one before to be answered.
    step(this.card(f.request_id), "Queued: answered after the message before it (" +
      (f.position === 1 ? "next" : "number " + f.position + " in line") + ")");
  }

  onReplay(f) {
    // What ended while we were away comes whole: drop any half-streamed text first.
    const c = this.card(f.request_id);
    c.answer.set("");
    c.fromHistory = false;
    c.done = false;
  }

  onChunk(f) {
    const c = this.card(f.request_id);
    if (!c.fromHistory || !c.done) c.answer.append(f.on_chat_model_stream);
  }

  onProgress(f) {
    const c = this.card(f.request_id);
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

  onEnd(f) {
    const c = this.card(f.request_id);
    const meta = f.metadata || {};
    const old = c.node.querySelector(".sources");
    if (old) old.remove();
    if (Array.isArray(meta.sources) && meta.sources.length) {
      const split = splitSources(c.answer.text, meta.sources);
      c.answer.text = split.body;
      c.answer.element.after(renderSources(split.sources));
    }
    c.answer.flush();
    this.busy(c, false);
    const status = f.status || "completed";
    c.status.className = "status " + status;
    const label = STATUS_LABELS[status] || status;
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
    offerTimeline(c.node.querySelector(".made"), f.request_id || c.id, this.events.timeline);
    if (meta.trace_id) {
      c.node.querySelector(".trace").hidden = false;
      c.node.querySelector(".trace-id").textContent = meta.trace_id;
    }
    c.done = status !== "awaiting_clarification";
    this.events.answered(status, label);
  }

  /** An action waiting for approval: what it would do, as text only, and two buttons. */
  onApproval(c, approval) {
    const args = approval.arguments || {};
    c.approve.querySelector(".why").textContent = "Why it asks: " + approval.reason + ".";
    const list = c.approve.querySelector(".action");
    list.replaceChildren();
    // The long argument of a known action goes below as a block (an email's body, a
    // notification's message, a program); every other one is a row: action, then arguments.
    const body = Object.hasOwn(BODY_OF, approval.action) ? BODY_OF[approval.action] : null;
    const rows = approval.action === "email.send" ? [] : [["Action", approval.action]];
    for (const key of Object.keys(args)) {
      if (key !== body) rows.push([Object.hasOwn(LABELS, key) ? LABELS[key] : key, args[key]]);
    }
    for (const [key, value] of rows) {
      const dt = document.createElement("dt");
      dt.textContent = key;
      const dd = document.createElement("dd");
      dd.textContent = value || "";
      list.append(dt, dd);
    }
    c.approve.querySelector(".action-body").textContent = body ? args[body] || "" : "";
    c.approve.dataset.approval = approval.approval_id;
    c.approve.hidden = false;
    c.approve.querySelector(".yes").focus();
  }

  decide(c, word) {
    const message = { uuid: this.session, message: word, reply_to: c.id };
    message.approval_id = c.approve.dataset.approval;
    if (!this.send(message)) return;
    this.lastSent = { id: c.id, text: word };
    c.approve.hidden = true;
    step(c, word === "yes" ? "You approved it" : "You declined it");
    this.busy(c, true);
  }

  onClarification(f) {
    const c = this.card(f.request_id);
    if (f.approval) return this.onApproval(c, f.approval);
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

  answerClarification(c) {
    const inputs = Array.from(c.clarify.querySelectorAll("input"));
    const message = inputs.map((i) => i.dataset.question + " " + i.value.trim()).join("\n");
    if (!this.send({ uuid: this.session, message, reply_to: c.id })) return;
    this.lastSent = { id: c.id, text: message };
    c.clarify.hidden = true;
    step(c, "You answered: " + inputs.map((i) => i.value.trim()).join("; "));
    this.busy(c, true);
  }

  onError(f) {
    const err = f.error;
    const text = err.message + " (" + err.code + ")";
    if (err.request_id && this.cards.has(err.request_id)) {
      const p = this.cards.get(err.request_id).node.querySelector(".failure");
      p.hidden = false;
      p.textContent = text;
    } else {
      $("alert").textContent = text;
    }
  }

  // ---- history -----------------------------------------------------------------------------

  /** The turns of `GET /api/sessions/{uuid}/history`. */
  showHistory(body, newId) {
    let current = null;
    for (const turn of body.turns) {
      const id = turn.request_id || newId();
      if (turn.role === "user") {
        current = this.card(id, turn.content);
      } else {
        current = current && current.id === id ? current : this.card(id);
        current.answer.set(turn.content);
        current.answer.flush();
        current.status.textContent = "Earlier answer";
      }
      current.fromHistory = true;
      current.done = true;
    }
    if (body.parked) {
      const c = this.card(body.parked.request_id, body.parked.text);
      this.onClarification({ request_id: body.parked.request_id, questions: body.parked.questions });
      c.status.textContent = "Waiting for your answers";
    }
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
