"""files_read / files_write / files_list: a folder per session, and nothing outside it.

The folder is `<SIDEKICK_FILES_ROOT or <data_dir>/files>/<hash of the session id>`, the same
one python_run works in. A path the model gives must be relative; `..`, absolute paths, `~` and
symlinks that lead outside the folder are refused with an error that says why, and no symlink is
followed at open time (services/workers/tools/sessiondir.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from services.runtime.budgets.quota import Quota, growth_refusal
from services.workers.tools.errors import PathRefused, ToolError
from services.workers.tools.sessiondir import SessionFolder
from services.workers.tools.toolbox import Args, Call, Toolset, tool

MAX_LISTED = 200


class FileSandbox:
    """The files tools' view of one session's folder (see sessiondir for how paths open)."""

    def __init__(self, base: Path, session_id: str, *, max_bytes: int, quota: Quota) -> None:
        self.folder = SessionFolder(base, session_id)
        self.max_bytes = max_bytes
        self.quota = quota

    @property
    def root(self) -> Path:
        return self.folder.root

    def read(self, path: str, max_chars: int) -> str:
        fd, _ = self.folder.open(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_chars * 4 + 4)
        text = data.decode("utf-8", errors="replace")
        if len(text) > max_chars:
            return text[:max_chars] + "\n[... more characters not shown]"
        return text

    def write(self, path: str, content: str, *, append: bool) -> str:
        data = content.encode("utf-8")
        if len(data) > self.max_bytes:
            raise ToolError(f"files may be at most {self.max_bytes} bytes.")
        # Counted as if every part of the path were new and nothing were replaced: near the
        # quota a write may be refused that would have fit, never the other way round.
        parts = self.folder.parts(path)
        full = growth_refusal(
            self.folder.root, self.quota, len(data), new_entries=max(len(parts), 1)
        )
        if full is not None:
            raise ToolError(full)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
        fd, parts = self.folder.open(path, flags, create_dirs=True)
        with os.fdopen(fd, "wb") as f:
            existing = os.fstat(fd).st_size if append else 0
            if existing + len(data) > self.max_bytes:
                raise ToolError(f"files may be at most {self.max_bytes} bytes.")
            if not append:
                f.truncate(0)
            f.write(data)
            self.folder.own(fd)
        verb = "appended" if append else "wrote"
        return f"{verb} {len(data)} bytes to {'/'.join(parts)}"

    def listing(self, path: str) -> str:
        parts = self.folder.parts(path)
        shown = "/".join(parts) or "."
        try:
            with self.folder.directory(parts, path) as fd:
                entries = sorted(os.scandir(fd), key=lambda e: e.name)
                lines = [f"{shown}/:"] if entries else [f"{shown}/ is empty."]
                for entry in entries[:MAX_LISTED]:
                    if entry.is_symlink():
                        lines.append(f"  {entry.name} (symlink)")
                    elif entry.is_dir(follow_symlinks=False):
                        lines.append(f"  {entry.name}/")
                    else:
                        size = entry.stat(follow_symlinks=False).st_size
                        lines.append(f"  {entry.name} ({size} bytes)")
        except PathRefused:
            fd, _ = self.folder.open(path, os.O_RDONLY)  # a file: say what it is
            size = os.fstat(fd).st_size
            os.close(fd)
            return f"{shown} (file, {size} bytes)"
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


class Files(Toolset):
    """Tools over the per-session folders under `base`."""

    def __init__(self, base: Path, *, max_bytes: int, quota: Quota | None = None) -> None:
        self.base = base
        self.max_bytes = max_bytes
        self.quota = quota or Quota()

    def sandbox(self, call: Call) -> FileSandbox:
        return FileSandbox(
            self.base, call.run.session_id, max_bytes=self.max_bytes, quota=self.quota
        )

    @tool("files_read", "Read a text file from the user's files folder (kept between requests).")
    async def read_file(self, args: ReadArgs, call: Call) -> str:
        return self.sandbox(call).read(args.path, args.max_chars)

    @tool("files_write", "Write (or append to) a text file in the user's files folder.")
    async def write_file(self, args: WriteArgs, call: Call) -> str:
        return self.sandbox(call).write(args.path, args.content, append=args.append)

    @tool("files_list", "List a folder in the user's files folder.")
    async def list_dir(self, args: ListArgs, call: Call) -> str:
        return self.sandbox(call).listing(args.path)
