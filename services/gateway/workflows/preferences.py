"""A principal's standing preferences (the workflow seed's `/api/preferences`); the store is
the core's (core/preferences.py), which hands them to every workflow the principal starts.

    GET    /api/preferences[/]        {preferences: {key: value}}
    POST   /api/preferences[/]        {key, value} -> 200 {key, value} (set or replace)
    DELETE /api/preferences/{key}     204; 404 when there is no such preference
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts.http import Preference, PreferenceIn, Preferences
from services.gateway.core.auth import Auth
from services.gateway.core.errors import NotFound
from services.gateway.core.http import guarded, parse_body, respond
from services.gateway.core.preferences import PreferenceStore


class PreferencesApi:
    def __init__(self, store: PreferenceStore, auth: Auth) -> None:
        self.store = store
        self.auth = auth

    def routes(self) -> list[Route]:
        g = self.auth
        routes = [Route("/api/preferences/{key}", guarded(g, self.delete), methods=["DELETE"])]
        for path in ("/api/preferences", "/api/preferences/"):
            routes.append(Route(path, guarded(g, self.list), methods=["GET"]))
            routes.append(Route(path, guarded(g, self.set), methods=["POST"]))
        return routes

    async def list(self, _: Request, principal: str) -> Response:
        return respond(Preferences(preferences=await self.store.load(principal)))

    async def set(self, request: Request, principal: str) -> Response:
        body = await parse_body(request, PreferenceIn)
        await self.store.change(principal, body.key, body.value)
        return respond(Preference(key=body.key, value=body.value))

    async def delete(self, request: Request, principal: str) -> Response:
        key = str(request.path_params["key"])
        if not await self.store.change(principal, key, None):
            raise NotFound("Preference not found")
        return Response(status_code=204)
