"""A principal's standing preferences (the workflow seed's `/api/preferences`), kept in the
gateway's KV bucket `preferences`, one key per principal, and given to the research planner
with every workflow the principal starts.

    GET    /api/preferences[/]        {preferences: {key: value}}
    POST   /api/preferences[/]        {key, value} -> 200 {key, value} (set or replace)
    DELETE /api/preferences/{key}     204; 404 when there is no such preference
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts.http import Preference, PreferenceIn, Preferences, PreferencesRecord
from services.gateway.api import guarded, parse_body, respond
from services.gateway.auth import Auth
from services.gateway.errors import Invalid, NotFound, Unavailable
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import get_model, key_for, mutate

MAX_PREFERENCES = 50


class PreferenceStore:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def load(self, principal: str) -> dict[str, str]:
        try:
            record, _ = await get_model(
                self.bus.kv.get("preferences"), key_for(principal), PreferencesRecord
            )
        except Exception as exc:
            raise Unavailable("The preferences store is unavailable; please retry.") from exc
        return dict(record.values) if record is not None else {}

    async def change(self, principal: str, key: str, value: str | None) -> bool:
        """Set (or, with None, remove) one preference; False when removing a missing one."""
        found = True

        def apply(current: PreferencesRecord | None) -> PreferencesRecord | None:
            nonlocal found
            values = dict(current.values) if current is not None else {}
            if value is None:
                found = key in values
                values.pop(key, None)
            elif key not in values and len(values) >= MAX_PREFERENCES:
                raise Invalid(f"At most {MAX_PREFERENCES} preferences are kept.")
            else:
                values[key] = value
            updated = PreferencesRecord(values=values)
            return None if current == updated else updated

        try:
            await mutate(
                self.bus.kv.get("preferences"), key_for(principal), PreferencesRecord, apply
            )
        except Invalid:
            raise
        except Exception as exc:
            raise Unavailable("The preferences store is unavailable; please retry.") from exc
        return found


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
