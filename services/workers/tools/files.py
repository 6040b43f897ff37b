"""files_read / files_write / files_list: a folder per session, and nothing outside it.

The folder is `<SIDEKICK_FILES_ROOT or <data_dir>/files>/<hash of the session id>`. A path the
model gives must be relative; `..`, absolute paths, `~` and symlinks that resolve outside the
folder are refused with an error that says why.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import Field

from services.runtime.kvstore import key_for
from services.workers.tools.errors import PathRefused, ToolError
from services.workers.tools.toolbox import Args, Call, Tool

MAX_LISTED = 200


class FileSandbox:
    """The sandbox folder of one session."""

    def __init__(self, base: Path, session_id: str, *, max_bytes: int) -> None:
        self.root = (base / key_for(session_id)).resolve()
        self.max_bytes = max_bytes

    def resolve(self, path: str) -> Path:
        """The real path for `path`, or PathRefused when it would leave the folder."""
        text = path.strip() or "."
        if "\x00" in text:
            raise PathRefused(path, "it contains a NUL character.")
        pure = PurePosixPath(text)
        if pure.is_absolute() or text.startswith("~"):
            raise PathRefused(
                path,
                "absolute paths are not allowed; give a path relative to "
                "your files folder, e.g. 'notes/todo.txt'.",
            )
        if ".." in pure.parts:
            raise PathRefused(path, "'..' is not allowed; paths stay inside your files folder.")
        self.root.mkdir(parents=True, exist_ok=True)
        real = (self.root / pure).resolve()
        if not real.is_relative_to(self.root):
            raise PathRefused(
                path, "it is a symlink (or goes through one) that leads outside your files folder."
            )
        return real

    def rel(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."

    def read(self, path: str, max_chars: int) -> str:
        real = self.resolve(path)
        if not real.exists():
            raise ToolError(f"{path!r} does not exist; files_list shows what there is.")
        if real.is_dir():
            raise ToolError(f"{path!r} is a folder; use files_list.")
        data = real.read_bytes()
        text = data.decode("utf-8", errors="replace")
        if len(text) > max_chars:
            return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters]"
        return text

    def write(self, path: str, content: str, *, append: bool) -> str:
        real = self.resolve(path)
        if real == self.root:
            raise ToolError("give a file name to write to.")
        data = content.encode("utf-8")
        existing = real.stat().st_size if append and real.exists() else 0
        if existing + len(data) > self.max_bytes:
            raise ToolError(f"files may be at most {self.max_bytes} bytes.")
        if real.is_dir():
            raise ToolError(f"{path!r} is a folder.")
        real.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a symlink planted after the check above is refused, not followed.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
        try:
            fd = os.open(real, flags, 0o644)
        except OSError as exc:
            raise ToolError(f"could not write {path!r}: {exc.strerror}.") from exc
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        verb = "appended" if append else "wrote"
        return f"{verb} {len(data)} bytes to {self.rel(real)}"

    def listing(self, path: str) -> str:
        real = self.resolve(path)
        if not real.exists():
            raise ToolError(f"{path!r} does not exist.")
        if not real.is_dir():
            return f"{self.rel(real)} (file, {real.stat().st_size} bytes)"
        entries = sorted(real.iterdir(), key=lambda p: p.name)
        if not entries:
            return f"{self.rel(real)}/ is empty."
        lines = [f"{self.rel(real)}/:"]
        for entry in entries[:MAX_LISTED]:
            if entry.is_symlink():
                lines.append(f"  {entry.name} (symlink)")
            elif entry.is_dir():
                lines.append(f"  {entry.name}/")
            else:
                lines.append(f"  {entry.name} ({entry.stat().st_size} bytes)")
        if len(entries) > MAX_LISTED:
            lines.append(f"  ... and {len(entries) - MAX_LISTED} more")
        return "\n".join(lines)


class ReadArgs(Args):
    path: str = Field(description="File path relative to your files folder.")
    max_chars: int = Field(default=20_000, ge=1, le=200_000, description="Characters to return.")


class WriteArgs(Args):
    path: str = Field(description="File path relative to your files folder.")
    content: str = Field(description="Text to write.")
    append: bool = Field(default=False, description="Append instead of replacing the file.")


class ListArgs(Args):
    path: str = Field(default=".", description="Folder relative to your files folder.")


class Files:
    """Tools over the per-session folders under `base`."""

    def __init__(self, base: Path, *, max_bytes: int) -> None:
        self.base = base
        self.max_bytes = max_bytes

    def sandbox(self, call: Call) -> FileSandbox:
        return FileSandbox(self.base, call.run.session_id, max_bytes=self.max_bytes)

    async def read_file(self, args: ReadArgs, call: Call) -> str:
        return self.sandbox(call).read(args.path, args.max_chars)

    async def write_file(self, args: WriteArgs, call: Call) -> str:
        return self.sandbox(call).write(args.path, args.content, append=args.append)

    async def list_dir(self, args: ListArgs, call: Call) -> str:
        return self.sandbox(call).listing(args.path)

    def tools(self) -> list[Tool[Any]]:
        return [
            Tool(
                "files_read",
                "Read a text file from the user's files folder (kept between requests).",
                ReadArgs,
                self.read_file,
            ),
            Tool(
                "files_write",
                "Write (or append to) a text file in the user's files folder.",
                WriteArgs,
                self.write_file,
            ),
            Tool(
                "files_list", "List a folder in the user's files folder.", ListArgs, self.list_dir
            ),
        ]
