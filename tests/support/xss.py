"""Attacks on the web page's Markdown rendering (payloads that set `window.__pwned` when they
run) and the checks that nothing ran, shared by the page's tests."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Browser, Page

from tests.support.fakes.openai_server import Reply
from tests.support.harness import System
from tests.support.page import open_page, sign_in

PWNED = "window.__pwned"  # every payload below sets this when it runs
# Counts what the page's CSP had to block: a payload that got past the sanitizer shows here
# even though the CSP stopped it.
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));
"""

HOSTILE_MARKDOWN = """Here is the answer.

<img src=x onerror="window.__pwned='img'">
<script>window.__pwned='script'</script>
<svg onload="window.__pwned='svg'"><script>window.__pwned='svg-script'</script></svg>
<iframe srcdoc="<script>parent.__pwned='iframe'</script>"></iframe>
<details open ontoggle="window.__pwned='toggle'">x</details>
<style>body { display: none }</style>
<a href="javascript:window.__pwned='raw-a'">raw anchor</a>

[a javascript link](javascript:window.__pwned='js-link')
[an encoded one](JaVaScRiPt&#58;window.__pwned='encoded')
[a data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
[a vbscript link](vbscript:msgbox(1))
![an image](javascript:window.__pwned='image')
![a tracking pixel](http://127.0.0.1:9/pixel.png)
"""

# Raw HTML straight into the sanitizer (markdown-it would escape it first): classic vectors,
# malicious SVG and mutation XSS.
HOSTILE_HTML = [
    "<img src=x onerror=\"window.__pwned='img'\">",
    "<script>window.__pwned='script'</script>",
    "<svg><script>window.__pwned='svg-script'</script></svg>",
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    "<svg><animate onbegin=\"window.__pwned='animate'\" attributeName=x dur=1s></svg>",
    "<svg><a xlink:href=\"javascript:window.__pwned='xlink'\"><text y=20>x</text></a></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.__pwned='mxss'\">",
    "<a href=\"&#106;avascript:window.__pwned='entity'\">x</a>",
    "<a href=\"  javascript:window.__pwned='spaced'\">x</a>",
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>",
    "<object data=\"javascript:window.__pwned='object'\"></object>",
    "<embed src=\"javascript:window.__pwned='embed'\">",
    "<form action=\"javascript:window.__pwned='form'\"><button>go</button></form>",
    "<details open ontoggle=\"window.__pwned='toggle'\">x</details>",
    "<body onload=\"window.__pwned='body'\">",
    "<div style=\"background:url(javascript:window.__pwned='css')\">x</div>",
    '<a href="data:text/html,<script>alert(1)</script>">x</a>',
    '<p id="log" name="send">clobbering the page\'s own ids</p>',
]


def direct_answer(text: str, chunk_delay: float = 0.0) -> Any:
    """The frontline answers directly, streaming `text` word by word."""

    def script(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
        if body.get("response_format"):
            return {"route_to_orchestrator": False, "reason": "small talk"}
        return Reply(text, chunk_delay=chunk_delay)

    return script


async def watched_page(browser: Browser, system: System, principal: str) -> Page:
    page = await open_page(browser, permissions=["clipboard-read", "clipboard-write"])
    await page.add_init_script(WATCH_CSP)
    await sign_in(page, system, principal)
    return page


async def nothing_ran(page: Page, csp_quiet: bool = True) -> None:
    assert await page.evaluate(PWNED) is None
    if csp_quiet:
        assert await page.evaluate("window.__violations") == []
    dangerous = await page.evaluate(
        """() => {
        const found = [];
        for (const el of document.querySelectorAll('.answer *, .sources *')) {
          if (/^(script|iframe|svg|math|img|style|object|embed|form|video|audio)$/i
              .test(el.tagName)) found.push(el.tagName);
          for (const a of el.attributes) {
            if (/^on/i.test(a.name) || a.name === 'style' || a.name === 'id') found.push(a.name);
            if (/^\\s*(javascript|data|vbscript):/i.test(a.value)) found.push(a.value);
          }
        }
        return found;
      }"""
    )
    assert dangerous == []
