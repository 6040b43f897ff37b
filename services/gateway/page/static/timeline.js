// "How this was made": an answer's timeline (GET /api/requests/{id}/timeline), shown under it
// when opened. Everything in it is text: each value goes in as a text node (model output, tool
// arguments and results, feedback, sources alike), so nothing in it can run or link anywhere.

const SHOWN = 600; // characters of one value shown; the rest is cut with a note

function clip(text) {
  const s = String(text ?? "").trim();
  return s.length <= SHOWN ? s : s.slice(0, SHOWN) + "… (" + s.length + " characters)";
}

function line(list, label, value) {
  if (value === null || value === undefined || value === "" ||
      (Array.isArray(value) && !value.length)) return;
  const dt = document.createElement("dt");
  dt.textContent = label;
  const dd = document.createElement("dd");
  dd.textContent = clip(Array.isArray(value) ? value.join("; ") : value);
  list.append(dt, dd);
}

function usageText(e) {
  const u = e.usage;
  if (!u || !u.calls) return null;
  let text = u.input_tokens + " in / " + u.output_tokens + " out tokens, " + u.calls + " call(s)";
  const models = Object.keys(u.models || {});
  if (models.length) text += " (" + models.join(", ") + ")";
  if (e.cost_usd !== null && e.cost_usd !== undefined) text += ", $" + e.cost_usd.toFixed(6);
  return text;
}

function entryNode(e) {
  const li = document.createElement("li");
  li.className = "entry " + String(e.step).replace(/[^a-z_]/g, "");
  const head = document.createElement("p");
  const when = e.at ? new Date(e.at).toLocaleTimeString() : "time not recorded";
  head.textContent = when + " · " + e.title +
    (e.duration_ms !== null && e.duration_ms !== undefined ? " (" + e.duration_ms + " ms)" : "");
  li.append(head);
  const dl = document.createElement("dl");
  line(dl, "Taken as recorded from", e.recorded_from);
  line(dl, "Detail", e.detail);
  line(dl, "Task", e.task);
  line(dl, "Parameters", (e.parameters || []).map((p) => p.name + " = " + p.value));
  line(dl, "Success criteria", e.success_criteria);
  line(dl, "Feedback carried in", e.feedback_in);
  line(dl, "Suggestions carried in", e.suggestions_in);
  for (const call of e.tool_calls || []) {
    line(dl, "Tool " + call.name + (call.ok ? "" : " (error)"),
      call.arguments + " → " + call.result);
  }
  line(dl, "Output", e.output);
  line(dl, "Error", e.error);
  line(dl, "Sources", (e.sources || []).map((s) => s.url));
  if (e.passed !== null && e.passed !== undefined) {
    line(dl, "Verdict", (e.passed ? "passed" : "not passed") + ", score " + e.score);
  }
  line(dl, "Feedback", e.feedback);
  line(dl, "Suggestions", e.suggestions);
  line(dl, "Usage", usageText(e));
  if (dl.childElementCount) li.append(dl);
  return li;
}

export function renderTimeline(list, timeline) {
  list.replaceChildren(...(timeline.entries || []).map(entryNode));
  const total = usageText(timeline);
  if (total) {
    const li = document.createElement("li");
    li.className = "entry total";
    li.textContent = "In all: " + total;
    list.append(li);
  }
}

/** Show the card's "How this was made" view; its timeline is read the first time it opens. */
export function offerTimeline(made, requestId, load) {
  if (!made || !load) return;
  made.hidden = false;
  const list = made.querySelector(".timeline");
  made.dataset.loaded = "";
  made.ontoggle = async () => {
    if (!made.open || made.dataset.loaded) return;
    made.dataset.loaded = "loading";
    list.replaceChildren();
    const waiting = document.createElement("li");
    waiting.textContent = "Loading…";
    list.append(waiting);
    try {
      renderTimeline(list, await load(requestId));
      made.dataset.loaded = "yes";
    } catch (err) {
      waiting.textContent = "Could not load how this was made: " + err.message;
      made.dataset.loaded = "";
    }
  };
}
