// The sidebar: the signed-in principal's past conversations (`GET /api/sessions`), newest
// first; choosing one reopens it. On a narrow window it folds away behind a toggle button.

const $ = (id) => document.getElementById(id);
const WHEN = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export class Sidebar {
  /** `open(uuid)` switches the page to that conversation; `headers()` gives the auth headers. */
  constructor(open, headers) {
    this.open = open;
    this.headers = headers;
    this.current = "";
    this.list = $("sessions");
    this.nav = $("sidebar");
    this.toggle = $("sidebar-toggle");
    this.pending = null;
    this.again = false;
    this.toggle.addEventListener("click", () => this.fold(this.nav.classList.contains("open")));
    this.list.addEventListener("click", (ev) => {
      const button = ev.target.closest("button[data-uuid]");
      if (!button) return;
      this.fold(true);
      if (button.dataset.uuid !== this.current) this.open(button.dataset.uuid);
    });
  }

  fold(closed) {
    this.nav.classList.toggle("open", !closed);
    this.toggle.setAttribute("aria-expanded", closed ? "false" : "true");
  }

  select(uuid) {
    this.current = uuid;
    for (const button of this.list.querySelectorAll("button[data-uuid]")) {
      if (button.dataset.uuid === uuid) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  /** Reload the list. A call made while a load is in flight asks for one more after it
   * (that load may have been answered before the change the caller knows of). */
  refresh() {
    if (this.pending) {
      this.again = true;
      return;
    }
    this.pending = this.load().finally(() => {
      this.pending = null;
      if (this.again) {
        this.again = false;
        this.refresh();
      }
    });
  }

  async load() {
    let body;
    try {
      const resp = await fetch("/api/sessions?limit=50", { headers: this.headers() });
      if (!resp.ok) return;
      body = await resp.json();
    } catch (e) {
      return; // the list is a convenience: the conversation works without it
    }
    const items = body.sessions.map((s) => this.item(s));
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "none";
      li.textContent = "No earlier conversations yet.";
      items.push(li);
    }
    this.list.replaceChildren(...items);
    this.select(this.current);
  }

  item(s) {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.uuid = s.uuid;
    const title = document.createElement("span");
    title.className = "title";
    title.textContent = s.title || "(no message)";
    const when = document.createElement("span");
    when.className = "when";
    const date = new Date(s.updated_at);
    when.textContent = (isNaN(date) ? "" : WHEN.format(date)) +
      " · " + s.requests + (s.requests === 1 ? " message" : " messages");
    button.append(title, when);
    li.appendChild(button);
    return li;
  }
}
