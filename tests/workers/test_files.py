"""files_*: each session has its own folder, and nothing the model asks for leaves it. The
tools are called as the loop calls them: by name, with the model's JSON arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.runtime.bus.kvstore import key_for
from services.workers.tools.files import Files
from services.workers.tools.toolbox import Call, RunContext, ToolBox


def toolbox(base: Path) -> ToolBox:
    return ToolBox(Files(base, max_bytes=1000).tools(), result_chars=5000, call_timeout=10)


def call(session: str = "session-a") -> Call:
    return Call(RunContext(request_id="r1", session_id=session, attempt=1), call_id="call_1")


async def run(
    box: ToolBox, name: str, session: str = "session-a", **args: object
) -> tuple[str, bool]:
    outcome = await box.call(name, json.dumps(args), call(session))
    return outcome.content, outcome.ok


async def test_a_file_written_can_be_read_and_listed(tmp_path: Path) -> None:
    box = toolbox(tmp_path)
    text, ok = await run(box, "files_write", path="notes/todo.txt", content="buy marmalade")
    assert ok, text
    assert (tmp_path / key_for("session-a") / "notes" / "todo.txt").read_text() == "buy marmalade"
    _, ok = await run(box, "files_write", path="notes/todo.txt", content="\nand tea", append=True)
    assert ok
    text, ok = await run(box, "files_read", path="notes/todo.txt")
    assert ok and text == "buy marmalade\nand tea"
    text, ok = await run(box, "files_list", path="notes")
    assert ok and "todo.txt (21 bytes)" in text


async def test_sessions_do_not_see_each_others_files(tmp_path: Path) -> None:
    box = toolbox(tmp_path)
    assert (await run(box, "files_write", path="secret.txt", content="mine"))[1]
    text, ok = await run(box, "files_read", session="session-b", path="secret.txt")
    assert not ok and "does not exist" in text


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "notes/../../outside.txt", "..", "a/b/../../../x"],
)
async def test_a_path_with_dot_dot_is_refused(tmp_path: Path, path: str) -> None:
    box = toolbox(tmp_path / "files")
    for name, args in (
        ("files_write", {"path": path, "content": "x"}),
        ("files_read", {"path": path}),
        ("files_list", {"path": path}),
    ):
        text, ok = await run(box, name, **args)
        assert not ok
        assert text.startswith("ERROR: Refused path") and "'..' is not allowed" in text
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "files" / "outside.txt").exists()


@pytest.mark.parametrize("path", ["/etc/passwd", "~/x", "/tmp/sidekick-escape.txt"])
async def test_an_absolute_path_is_refused(tmp_path: Path, path: str) -> None:
    box = toolbox(tmp_path)
    text, ok = await run(box, "files_read", path=path)
    assert not ok and "absolute paths are not allowed" in text
    text, ok = await run(box, "files_write", path=path, content="x")
    assert not ok and "absolute paths are not allowed" in text
    assert not Path("/tmp/sidekick-escape.txt").exists()


async def test_a_symlink_that_leaves_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    box = toolbox(tmp_path / "files")
    assert (await run(box, "files_write", path="ok.txt", content="fine"))[1]
    root = tmp_path / "files" / key_for("session-a")
    (root / "door").symlink_to(outside)
    (root / "file-door").symlink_to(outside / "secret.txt")
    (root / "inner").symlink_to(root / "ok.txt")  # a link that stays inside is fine

    for name, args in (
        ("files_read", {"path": "door/secret.txt"}),
        ("files_read", {"path": "file-door"}),
        ("files_write", {"path": "door/new.txt", "content": "x"}),
        ("files_write", {"path": "file-door", "content": "overwritten"}),
        ("files_list", {"path": "door"}),
    ):
        text, ok = await run(box, name, **args)
        assert not ok, (name, args, text)
        assert "leads outside your files folder" in text
    assert (outside / "secret.txt").read_text() == "not yours"
    assert not (outside / "new.txt").exists()
    assert await run(box, "files_read", path="inner") == ("fine", True)


async def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    text, ok = await run(toolbox(tmp_path), "files_write", path="big.txt", content="x" * 1001)
    assert not ok and "at most 1000 bytes" in text


async def test_bad_arguments_come_back_as_a_tool_error(tmp_path: Path) -> None:
    box = toolbox(tmp_path)
    outcome = await box.call("files_read", "{not json", call())
    assert not outcome.ok and "not valid JSON" in outcome.content
    outcome = await box.call("files_read", json.dumps({"path": "a", "mode": "rw"}), call())
    assert not outcome.ok and "invalid arguments for files_read" in outcome.content
    outcome = await box.call("files_delete", "{}", call())
    assert not outcome.ok and "no tool named 'files_delete'" in outcome.content
