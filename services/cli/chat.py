"""`sidekick chat`: a terminal client over the WebSocket that shows answers as they stream."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import websockets


async def chat(
    url: str,
    session: str | None,
    criteria: str | None,
    show_events: bool,
    token: str | None = None,
) -> int:
    session = session or uuid.uuid4().hex[:12]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(url, max_size=None, additional_headers=headers) as ws:
        await ws.send(json.dumps({"init": True, "uuid": session, "events": True}))
        print(f"connected to {url} as session {session}; type a message, Ctrl-D to quit")
        loop = asyncio.get_running_loop()
        while True:
            sys.stdout.write("\nyou> ")
            sys.stdout.flush()
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return 0
            text = line.strip()
            if not text:
                continue
            frame: dict[str, object] = {"uuid": session, "message": text}
            if criteria:
                frame["success_criteria"] = criteria
            await ws.send(json.dumps(frame))
            sys.stdout.write("sidekick> ")
            while True:
                data = json.loads(await ws.recv())
                if "on_chat_model_stream" in data:
                    sys.stdout.write(data["on_chat_model_stream"])
                    sys.stdout.flush()
                elif "error" in data:
                    sys.stdout.write(f"\n[error {data['error'].get('code')}] ")
                elif data.get("event") == "clarification":
                    for q in data.get("questions", []):
                        sys.stdout.write(f"\n  ? {q.get('question')}")
                    sys.stdout.write("\n  (your next message answers)")
                elif data.get("event") == "progress" and show_events:
                    sys.stdout.write(f"\n  · {data.get('stage')}: {data.get('detail', '')}\n")
                elif "on_chat_model_end" in data:
                    if show_events and data.get("status"):
                        sys.stdout.write(f"\n  ({data['status']})")
                    sys.stdout.write("\n")
                    break
