"""A fake Brave Search API: `GET /res/v1/web/search` answers `{"web": {"results": [...]}}`,
`GET /res/v1/news/search` answers `{"results": [...]}`, both keyed by `X-Subscription-Token`
(a wrong token gets Brave's 422 error shape). Results are scripted per query; a query with no
script gets two generic results."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fakes.http import FakeServer, Recorded, Response

WEB = "/res/v1/web/search"
NEWS = "/res/v1/news/search"


def result(title: str, url: str, description: str = "", age: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"title": title, "url": url, "description": description}
    if age is not None:
        item["age"] = age
    return item


def query_of(rec: Recorded) -> str:
    return parse_qs(urlsplit(rec.path).query).get("q", [""])[0]


class FakeBrave(FakeServer):
    def __init__(self, token: str = "brave-test-token") -> None:
        super().__init__()
        self.token = token
        self.web: dict[str, list[dict[str, Any]]] = {}
        self.news: dict[str, list[dict[str, Any]]] = {}
        self.failure: Response | None = None
        self.route("GET", WEB, lambda rec: self._answer(rec, news=False))
        self.route("GET", NEWS, lambda rec: self._answer(rec, news=True))

    def reset(self) -> None:
        super().reset()
        self.web, self.news, self.failure = {}, {}, None

    def env(self) -> dict[str, str]:
        """What the search and research workers are given to search through this fake."""
        return {"BRAVE_SEARCH_API_KEY": self.token, "SIDEKICK_BRAVE_BASE_URL": self.url}

    def queries(self, path: str = WEB) -> list[str]:
        return [query_of(r) for r in self.calls(path)]

    def _answer(self, rec: Recorded, *, news: bool) -> Response:
        token = {k.lower(): v for k, v in rec.headers.items()}.get("x-subscription-token")
        if token != self.token:
            return Response(
                422,
                {
                    "type": "ErrorResponse",
                    "error": {
                        "id": "fake",
                        "status": 422,
                        "code": "SUBSCRIPTION_TOKEN_INVALID",
                        "detail": "The provided subscription token is invalid.",
                    },
                },
            )
        if self.failure is not None:
            return self.failure
        q = query_of(rec)
        scripted = (self.news if news else self.web).get(q)
        items = (
            scripted
            if scripted is not None
            else [
                result(f"About {q}", f"https://example.org/{len(q)}/a", f"<strong>{q}</strong> a"),
                result(f"More on {q}", f"https://example.net/{len(q)}/b", f"{q} b", "1 day ago"),
            ]
        )
        meta = {"original": q, "more_results_available": False}
        if news:
            return Response(200, {"type": "news", "query": meta, "results": items})
        return Response(
            200, {"type": "search", "query": meta, "web": {"type": "search", "results": items}}
        )
