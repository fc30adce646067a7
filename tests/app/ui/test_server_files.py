"""What the server keeps for sessions outside them (app/ui/server_files.py), on Streamlit's own upload and
media managers: a session's uploads are capped in size and number as they arrive, and a session that has
been disconnected for longer than the TTL has its uploads and download functions released (Streamlit drops
such a session without shutting it down, so nothing else releases them)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import pytest
from streamlit.runtime import media_file_manager
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from app.ui import server_files

KIB = 1 << 10


def _file(size: int, file_id: str | None = None) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id or f"f{size}-{id(object())}", name="config.json", type="application/json",
                           data=b" " * size)


def _held(manager: MemoryUploadedFileManager, session_id: str) -> list[int]:
    return [len(rec.data) for rec in manager.file_storage.get(session_id, {}).values()]


def test_a_session_keeps_its_newest_uploads_and_none_over_the_cap():
    uploads = MemoryUploadedFileManager("/upload")
    server_files.bound_uploads(uploads, max_file_bytes=100 * KIB, per_session=2)
    for size in (10, 20, 30, 40):
        uploads.add_file("a", _file(size * KIB))
    uploads.add_file("a", _file(101 * KIB))  # over the cap: dropped on arrival
    uploads.add_file("b", _file(5 * KIB))  # another session keeps its own
    assert _held(uploads, "a") == [30 * KIB, 40 * KIB]
    assert _held(uploads, "b") == [5 * KIB]
    server_files.bound_uploads(uploads, max_file_bytes=8 * KIB, per_session=2)  # the operator lowered it
    uploads.add_file("b", _file(9 * KIB))
    assert _held(uploads, "b") == [5 * KIB]
    stats = uploads.get_stats()  # Streamlit's own accounting follows
    assert sum(stat.byte_length for stat in next(iter(stats.values()))) == 75 * KIB


@pytest.fixture
def server(monkeypatch):
    """Streamlit's upload and media managers behind a stand-in runtime whose connected sessions the test sets."""
    connected: set[str] = set()
    media = MediaFileManager(MemoryMediaFileStorage("/media"))
    server = SimpleNamespace(uploaded_file_mgr=MemoryUploadedFileManager("/upload"), media_file_mgr=media,
                             is_active_session=lambda session_id: session_id in connected, connected=connected)

    def register_download(session_id: str, held: object) -> None:  # what st.download_button(callable) does
        monkeypatch.setattr(media_file_manager, "_get_session_id", lambda: session_id)
        media.add_deferred(lambda: str(held), None, "trace.json", f"coords-{session_id}")

    server.register_download = register_download
    return server


class Held:
    """What a download function refers to (a trace, in the app)."""


def test_a_departed_session_is_released_after_the_ttl_and_a_connected_one_never(server):
    server.connected.update({"stays", "leaves"})
    for session_id in ("stays", "leaves"):
        server.uploaded_file_mgr.add_file(session_id, _file(KIB))
    held = Held()
    server.register_download("leaves", held)
    server.register_download("stays", Held())
    alive = weakref.ref(held)
    del held
    server.connected.discard("leaves")  # the tab closed

    assert server_files.release_departed(server, ttl_seconds=120, now=1000.0) == []  # first seen gone
    assert server_files.release_departed(server, ttl_seconds=120, now=1119.0) == []  # within the TTL: kept
    gc.collect()
    assert alive() is not None and _held(server.uploaded_file_mgr, "leaves") == [KIB]
    assert server_files.release_departed(server, ttl_seconds=120, now=1120.0) == ["leaves"]
    gc.collect()
    assert alive() is None  # the download function and what it held are gone
    assert _held(server.uploaded_file_mgr, "leaves") == [] and _held(server.uploaded_file_mgr, "stays") == [KIB]
    assert server_files.release_departed(server, ttl_seconds=120, now=5000.0) == []  # connected: never


def test_a_session_that_comes_back_within_the_ttl_starts_its_clock_again(server):
    server.uploaded_file_mgr.add_file("blip", _file(KIB))
    assert server_files.release_departed(server, ttl_seconds=120, now=0.0) == []  # disconnected
    server.connected.add("blip")
    assert server_files.release_departed(server, ttl_seconds=120, now=100.0) == []  # back
    server.connected.discard("blip")
    assert server_files.release_departed(server, ttl_seconds=120, now=200.0) == []  # gone again: a new clock
    assert server_files.release_departed(server, ttl_seconds=120, now=319.0) == []
    assert server_files.release_departed(server, ttl_seconds=120, now=320.0) == ["blip"]
