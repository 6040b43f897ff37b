// Turning an answer (Markdown written by a model: untrusted) into DOM nodes.
// Two walls, each enough on its own: markdown-it escapes raw HTML and refuses javascript:/data:
// links; DOMPurify then removes whatever could still run (scripts, event handlers, SVG, forms,
// style, unsafe URLs). Only then do the nodes reach the page. The page's CSP is the third wall.
import markdownit from "./vendor/markdown-it.esm.min.mjs";
import createDOMPurify from "./vendor/purify.es.mjs";

// breaks: a model's single newlines are meant as lines (lists of sources, addresses, poems).
const md = markdownit({ html: false, linkify: true, typographer: false, breaks: true });

// Images would load from anywhere the model names (tracking pixels), and the CSP blocks them
// anyway: an image becomes a link the reader can choose to open.
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = self.renderInlineAsText(token.children || [], options, env) || src;
  return '<a href="' + md.utils.escapeHtml(src) + '">' + md.utils.escapeHtml("Image: " + alt) + "</a>";
};

// Our own instance, so its hooks touch nothing else.
const purify = createDOMPurify(window);
const SAFE_URL = /^(?:https?:|mailto:)/i;
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    if (node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  }
  // markdown-it marks fenced code with its language; no other class may come from an answer
  // (it could dress text up as the page's own controls).
  const cls = node.getAttribute && node.getAttribute("class");
  if (cls) {
    const kept = cls.split(/\s+/).filter((c) => /^language-[\w+#.-]{1,40}$/.test(c));
    if (kept.length) node.setAttribute("class", kept.join(" "));
    else node.removeAttribute("class");
  }
});

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true }, // no SVG, no MathML
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option", "img",
    "picture", "video", "audio", "source", "track", "iframe", "object", "embed", "dialog"],
  FORBID_ATTR: ["style", "id", "name", "srcset", "formaction", "xlink:href"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

/** HTML of unknown origin → a fragment holding nothing that can run. */
export function sanitize(html) {
  return purify.sanitize(html, PURIFY_CONFIG);
}

/** An answer's Markdown → a safe fragment, code blocks with a copy button. */
export function renderMarkdown(text) {
  const fragment = sanitize(md.render(text || ""));
  for (const pre of fragment.querySelectorAll("pre")) {
    const wrap = document.createElement("div");
    wrap.className = "code";
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-code";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy code");
    pre.replaceWith(wrap);
    wrap.append(button, pre);
  }
  return fragment;
}

/** Copy a code block's text (the click of a `.copy-code` button). */
export async function copyCode(button) {
  const pre = button.parentElement.querySelector("pre");
  try {
    await navigator.clipboard.writeText(pre.textContent);
    button.textContent = "Copied";
  } catch (e) {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
}

function webAddress(url) {
  try {
    const u = new URL(url);
    return u.protocol === "https:" || u.protocol === "http:" ? u : null;
  } catch (e) {
    return null;
  }
}

// The list search and research workers append to an answer ("Sources:" then "[n] [title](url)"
// lines), for clients that only read text. The page shows the structured list instead.
const SOURCES_HEADER = /(?:^|\n)Sources:\n/g;
const SOURCE_LINE = /^\[(\d+)\] \[.*\]\((\S+)\)/;

/** The answer without its appended source list, and the end frame's sources numbered as the
 * answer cites them ([n] in the text is the item numbered n). When the text list does not
 * match the sources, the text is left whole and the sources are numbered in order. */
export function splitSources(text, sources) {
  const inOrder = { body: text, sources: sources.map((s, i) => ({ n: i + 1, source: s })) };
  let start = -1;
  for (const m of text.matchAll(SOURCES_HEADER)) start = m.index;
  if (start < 0) return inOrder;
  const lines = text.slice(start).replace(/^\n/, "").split("\n").slice(1);
  const numbers = new Map();
  let taken = 0;
  for (const line of lines) {
    const m = SOURCE_LINE.exec(line);
    if (!m) break;
    numbers.set(m[2], Number(m[1]));
    taken += 1;
  }
  if (!taken || !sources.every((s) => numbers.has(s.url))) return inOrder;
  const rest = lines.slice(taken).join("\n").trim();
  return {
    body: text.slice(0, start).trimEnd() + (rest ? "\n\n" + rest : ""),
    sources: sources.map((s) => ({ n: numbers.get(s.url), source: s })),
  };
}

/** The sources of an answer (search results: untrusted) as a numbered list of links, numbered
 * as the answer cites them ([n]). Built from text nodes only. */
export function renderSources(numbered) {
  const box = document.createElement("section");
  box.className = "sources";
  box.setAttribute("aria-label", "Sources");
  const title = document.createElement("h4");
  title.textContent = "Sources";
  const list = document.createElement("ol");
  for (const { n, source } of numbered) {
    const li = document.createElement("li");
    li.value = n;
    const url = webAddress(source.url);
    const label = (source.title || source.url || "").trim() || "(untitled)";
    if (url) {
      const a = document.createElement("a");
      a.href = url.href;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      a.textContent = label;
      const host = document.createElement("span");
      host.className = "host";
      host.textContent = url.hostname;
      li.append(a, " ", host);
    } else {
      li.textContent = label + (source.url ? " (" + source.url + ")" : "");
    }
    list.appendChild(li);
  }
  box.append(title, list);
  return box;
}

/** Renders one streaming answer at most once per animation frame, whatever the token rate:
 * only this message is parsed again, never the conversation, and the swap of its nodes
 * happens within one frame, so nothing flickers. */
export class StreamingAnswer {
  constructor(element) {
    this.element = element;
    this.text = "";
    this.frame = 0;
    this.renders = 0;
  }

  set(text) {
    this.text = text;
    this.schedule();
  }

  append(chunk) {
    this.text += chunk;
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** Render now (the end of a stream, or history), cancelling a pending frame. */
  flush() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.render();
  }

  render() {
    this.renders += 1;
    this.element.dataset.renders = String(this.renders);
    this.element.replaceChildren(renderMarkdown(this.text));
  }
}
