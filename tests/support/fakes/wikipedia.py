"""A fake MediaWiki Action API (`GET /w/api.php`, `format=json&formatversion=2`) over a few
articles given by the test:

- `action=query&list=search&srsearch=Q&srlimit=N` -> `{"batchcomplete": true, "query":
  {"searchinfo": {"totalhits": n}, "search": [{ns, title, pageid, size, wordcount, snippet,
  timestamp}]}}`, snippets with `<span class="searchmatch">` around the matched words;
- `action=query&prop=extracts|info&explaintext=1&inprop=url&redirects=1&titles=T` ->
  `{"batchcomplete": true, "query": {"redirects": [...]?, "pages": [{pageid, ns, title,
  extract, fullurl, ...}]}}`, or a page `{"ns": 0, "title": T, "missing": true}`;
- anything else -> `{"error": {"code": "badvalue", "info": ...}}` as MediaWiki does (HTTP 200).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from tests.support.fakes.http import FakeServer, Recorded, Response

API = "/w/api.php"


class FakeWikipedia(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.articles: dict[str, str] = {}  # title -> plain text
        self.redirects: dict[str, str] = {}  # from title -> to title
        self.route("GET", API, self._api)

    def article(self, title: str, text: str) -> None:
        self.articles[title] = text

    def _pageid(self, title: str) -> int:
        return 1000 + sorted(self.articles).index(title)

    def _api(self, rec: Recorded) -> Response:
        params = {k: v[0] for k, v in parse_qs(urlsplit(rec.path).query).items()}
        if params.get("action") != "query":
            return _error(
                "badvalue", f'Unrecognized value for parameter "action": {params.get("action")}.'
            )
        if params.get("format") != "json" or params.get("formatversion") != "2":
            return _error("badvalue", "This fake speaks format=json&formatversion=2 only.")
        if params.get("list") == "search":
            return self._search(params.get("srsearch", ""), int(params.get("srlimit", "10")))
        if "titles" in params and "extracts" in params.get("prop", "").split("|"):
            return self._page(params["titles"], follow=params.get("redirects") is not None)
        return _error("invalidparammix", "The fake does not know this query.")

    def _search(self, query: str, limit: int) -> Response:
        if not query.strip():
            return _error("missingparam", 'The "srsearch" parameter must be set.')
        words = [w for w in re.findall(r"\w+", query.lower()) if w]
        hits = []
        for title, text in sorted(self.articles.items()):
            haystack = f"{title} {text}".lower()
            if all(w in haystack for w in words):
                snippet = text[:160]
                for w in words:
                    snippet = re.sub(
                        rf"(?i)\b({re.escape(w)})\b",
                        r'<span class="searchmatch">\1</span>',
                        snippet,
                    )
                hits.append(
                    {
                        "ns": 0,
                        "title": title,
                        "pageid": self._pageid(title),
                        "size": len(text),
                        "wordcount": len(text.split()),
                        "snippet": snippet,
                        "timestamp": "2024-05-01T12:00:00Z",
                    }
                )
        body: dict[str, Any] = {
            "batchcomplete": True,
            "query": {"searchinfo": {"totalhits": len(hits)}, "search": hits[:limit]},
        }
        if len(hits) > limit:
            body["continue"] = {"sroffset": limit, "continue": "-||"}
        return Response(200, body)

    def _page(self, title: str, *, follow: bool) -> Response:
        query: dict[str, Any] = {}
        if follow and title in self.redirects:
            query["redirects"] = [{"from": title, "to": self.redirects[title]}]
            title = self.redirects[title]
        if title not in self.articles:
            query["pages"] = [{"ns": 0, "title": title, "missing": True}]
        else:
            text = self.articles[title]
            url = f"{self.url}/wiki/{quote(title.replace(' ', '_'))}"
            query["pages"] = [
                {
                    "pageid": self._pageid(title),
                    "ns": 0,
                    "title": title,
                    "extract": text,
                    "contentmodel": "wikitext",
                    "pagelanguage": "en",
                    "touched": "2024-05-01T12:00:00Z",
                    "length": len(text),
                    "fullurl": url,
                    "canonicalurl": url,
                }
            ]
        return Response(200, {"batchcomplete": True, "query": query})


def _error(code: str, info: str) -> Response:
    return Response(
        200,
        {
            "error": {
                "code": code,
                "info": info,
                "docref": "See /w/api.php for API usage.",
            },
            "servedby": "fake-mw",
        },
    )
