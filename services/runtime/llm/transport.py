"""The HTTP under a model call: one POST with a body serialized once, on the process's one
aiohttp session (the transport the `openai` SDK itself uses when installed with its `aiohttp`
extra), with the SDK's own headers (its key, organization and project) and the SDK's error
types, so that calls.py's rules and every caller see what the SDK would have raised.

Why not the SDK's `post()`: at this size of call its request and response plumbing (options
models, header merging, an httpx client over the aiohttp transport, a typed response) cost about
three quarters of a call's CPU on the client side (`python -m bench.hotspots`: 1,130 µs a call
through `post()`, 240 µs this way, against the bench's fake model). The answer's body is read
here; an error's is read too, and becomes the SDK's `APIStatusError` subclass for its status
(`RateLimitError`, `BadRequestError`, …) with the server's message; a failure to connect or a
connection lost before the answer becomes the SDK's `APIConnectionError`.

The session is the process's (made on first use in its event loop, closed at shutdown by
`close()`) and follows no redirects. The HTTP(S)_PROXY and NO_PROXY variables are honoured, as
the SDK's client does, but read once per endpoint (`Target`), not on every call: aiohttp's own
`trust_env` looks them up, and the netrc file, in a worker thread for every request. A call's
time is bounded by its caller (endpoint.py), not here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp
import openai
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

try:  # the SDK's HTTP types: httpx2 from openai 2.x on, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - older openai
    import httpx as _http  # type: ignore[no-redef]

Response = aiohttp.ClientResponse
# Errors that can surface while an answer's body is read (before it, `post` raises the SDK's).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError,)

_SESSION: list[tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession]] = []


@dataclass(frozen=True)
class Target:
    """Where an endpoint's calls go and what they carry: the SDK client they stand for (its
    base URL, its errors), the headers it sends with every request (its key, its platform
    headers, the organization and project where set), and the proxy the environment names."""

    client: openai.AsyncOpenAI
    base: str  # the client's base URL, as text once (the SDK's property builds it each time)
    headers: dict[str, str]
    proxy: URL | None = None
    proxy_auth: aiohttp.BasicAuth | None = None

    @classmethod
    def of(cls, client: openai.AsyncOpenAI) -> Target:
        merged = {**client.default_headers, **client.auth_headers}
        headers = {name: value for name, value in merged.items() if isinstance(value, str)}
        base = str(client.base_url)
        try:
            proxy, auth = get_env_proxy_for_url(URL(base))
        except LookupError:
            return cls(client, base, headers)
        return cls(client, base, headers, proxy, auth)

    def url(self, path: str) -> str:
        return f"{self.base}{path.lstrip('/')}"


def session() -> aiohttp.ClientSession:
    """The process's session, made in the running loop on first use (and again in a new loop)."""
    loop = asyncio.get_running_loop()
    if _SESSION and _SESSION[0][0] is loop and not _SESSION[0][1].closed:
        return _SESSION[0][1]
    made = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True)
    _SESSION[:] = [(loop, made)]
    return made


async def close() -> None:
    """Close the process's session (at shutdown: aiohttp complains about open ones)."""
    if _SESSION:
        loop, made = _SESSION.pop()
        if loop is asyncio.get_running_loop():
            await made.close()


async def post(target: Target, path: str, content: bytes) -> Response:
    """The answer to a POST of `content` to the target's `path`, its body not yet read (the
    caller reads it, and releases it); an HTTP error status raises the SDK's error for it."""
    url = target.url(path)
    try:
        response = await session().post(
            url,
            data=content,
            headers=target.headers,
            allow_redirects=False,
            proxy=target.proxy,
            proxy_auth=target.proxy_auth,
        )
    except aiohttp.ClientError as exc:
        raise _lost(url, exc) from exc
    if response.status < 400:
        return response
    try:
        body = await response.read()
    except aiohttp.ClientError:
        body = b""
    finally:
        response.release()
    raise _status_error(target.client, url, response, body)


async def answer(target: Target, path: str, content: bytes) -> bytes:
    """The body of the answer to a POST (`post`), read whole; a connection lost while it is
    read raises the SDK's `APIConnectionError`, as a failure to connect does."""
    response = await post(target, path, content)
    try:
        return await response.read()
    except aiohttp.ClientError as exc:
        raise _lost(str(response.url), exc) from exc
    finally:
        response.release()


def _lost(url: str, exc: Exception) -> openai.APIConnectionError:
    request = _http.Request("POST", url)
    return openai.APIConnectionError(message=f"Connection error: {exc}", request=request)


def _status_error(
    client: openai.AsyncOpenAI, url: str, response: Response, body: bytes
) -> openai.APIStatusError:
    """The SDK's error for an answer with an HTTP error status, made as its own client makes it."""
    answer = _http.Response(
        response.status,
        headers=list(response.raw_headers),
        content=body,
        request=_http.Request("POST", url),
    )
    return client._make_status_error_from_response(answer)
