"""A Pydantic model as each structured-output mode asks for it, and a reply read back into it.

Everything here is built once per schema (building a schema costs ~0.4 ms; it used to be paid
on every structured call); the returned dicts are shared, so callers must not change them.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from services.runtime.llm.types import T

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema in the subset OpenAI's strict mode accepts: every object closed,
    every property required, no defaults."""
    schema = model.model_json_schema()

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("default", None)
            node.pop("title", None)
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(schema)
    return schema


@functools.cache
def response_format(model: type[BaseModel]) -> dict[str, Any]:
    """`json_schema` mode: OpenAI's strict structured output."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": strict_schema(model), "strict": True},
    }


@functools.cache
def tool_for(model: type[BaseModel]) -> dict[str, Any]:
    """`tools` mode: one function whose parameters are the schema, which the model must call.
    No `strict` flag: this mode is for servers that may not know it."""
    doc = (model.__doc__ or "").strip().splitlines()
    return {
        "type": "function",
        "function": {
            "name": model.__name__,
            "description": (doc[0] if doc else model.__name__) + " Call this with your reply.",
            "parameters": strict_schema(model),
        },
    }


@functools.cache
def tool_choice(model: type[BaseModel]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": model.__name__}}


@functools.cache
def instruction(model: type[BaseModel]) -> str:
    """`json_object` and `prompt` modes: the schema in the prompt."""
    schema = json.dumps(model.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return (
        f"Reply with only one JSON object matching the JSON Schema of {model.__name__} below: "
        f"no prose before or after it, no code fences.\n{schema}"
    )


def extract_json(text: str) -> str:
    """The JSON object in a reply that may wrap it in prose or a code fence (or be bare)."""
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        return stripped
    for fenced in FENCE.findall(stripped):
        found = first_object(fenced)
        if found is not None:
            return found
    found = first_object(stripped)
    return found if found is not None else stripped


def first_object(text: str) -> str | None:
    """The first balanced `{...}` in `text` that parses as JSON, if any."""
    start = text.find("{")
    while start >= 0:
        end = _balanced_end(text, start)
        if end is None:
            return None
        candidate = text[start : end + 1]
        try:
            json.loads(candidate)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        return candidate
    return None


def _balanced_end(text: str, start: int) -> int | None:
    depth = 0
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def parse(schema: type[T], text: str) -> T:
    """Validate a reply; raises ValidationError (also when no JSON was found)."""
    return schema.model_validate_json(extract_json(text))


def short_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)
