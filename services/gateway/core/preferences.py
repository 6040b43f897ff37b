"""A principal's standing preferences, kept in the gateway's KV bucket `preferences`, one key
per principal, and given to the research planner with every workflow the principal starts
(set through the workflows surface's `/api/preferences`: workflows/preferences.py)."""

from __future__ import annotations

from contracts.http import PreferencesRecord
from services.gateway.core.errors import Invalid, Unavailable
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
