"""What Streamlit's server keeps for a session outside the session itself: the files its uploaders received
and the functions behind its download buttons; and the bounds the app puts on both.

A tab that closes leaves its session stored for ``server.disconnectedSessionTTL``; Streamlit then drops it
from that store without shutting it down, so what it registered with the server's upload manager and
media manager is never released (every visitor's download function, and whatever it referred to, stayed
for the life of the server). ``guard`` runs at the start of every script run and:

- caps what the upload route keeps: a file larger than the app's own limit is dropped on arrival, and a
  session keeps only its newest ``UPLOADS_PER_SESSION`` files (each uploader takes one file, and a page's
  uploader forgets its file when the visitor goes to another page). ``server.maxUploadSize`` in
  .streamlit/config.toml refuses a larger body at the route before any of it is kept.
- releases the uploads and download functions of sessions that have been disconnected for longer than
  ``server.disconnectedSessionTTL``: the time after which Streamlit itself promises nothing of them.
"""

from __future__ import annotations

import threading
import time

from streamlit import config, runtime
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

UPLOADS_PER_SESSION = 2  # the app's two uploaders (KV cache, Tradeoffs) hold one file each

_lock = threading.Lock()
_inactive_since: dict[str, float] = {}  # session id -> when it was first seen disconnected


def guard(max_file_bytes: int) -> None:
    """Bound the server's uploads and release departed sessions' files (nothing outside a real server)."""
    if not runtime.exists():
        return
    server = runtime.get_instance()
    bound_uploads(server.uploaded_file_mgr, max_file_bytes)
    release_departed(server, float(config.get_option("server.disconnectedSessionTTL")))


def bound_uploads(manager, max_file_bytes: int, per_session: int = UPLOADS_PER_SESSION) -> None:
    """Make ``manager`` (the server's upload store) drop a file over ``max_file_bytes`` and keep a session's
    newest ``per_session`` files. Installed once per manager; the cap follows the latest call."""
    if not isinstance(manager, MemoryUploadedFileManager):
        return
    manager._txviz_upload_cap = (int(max_file_bytes), int(per_session))
    if getattr(manager, "_txviz_bounded", False):
        return
    add = manager.add_file

    def add_file(session_id: str, file) -> None:
        max_bytes, keep = manager._txviz_upload_cap
        if len(file.data) > max_bytes:
            return  # the widget then finds no file, as for any upload that did not arrive
        add(session_id, file)
        for file_id in list(manager.file_storage.get(session_id, {}))[:-keep]:
            manager.remove_file(session_id, file_id)

    manager.add_file = add_file
    manager._txviz_bounded = True


def release_departed(server, ttl_seconds: float, now: float | None = None) -> list[str]:
    """Release the uploads and download functions of every session disconnected for ``ttl_seconds`` or
    more; the ids released."""
    now = time.monotonic() if now is None else now
    uploads, media = server.uploaded_file_mgr, server.media_file_mgr
    known = set(getattr(uploads, "file_storage", {}) if isinstance(uploads, MemoryUploadedFileManager) else ())
    if isinstance(media, MediaFileManager):
        known |= set(getattr(media, "_files_by_session_and_coord", {}))
    with _lock:
        for session_id in list(_inactive_since):
            if session_id not in known or server.is_active_session(session_id):
                del _inactive_since[session_id]
        gone = []
        for session_id in known:
            if not server.is_active_session(session_id):
                since = _inactive_since.setdefault(session_id, now)
                if now - since >= ttl_seconds:
                    gone.append(session_id)
                    del _inactive_since[session_id]
    for session_id in gone:
        if isinstance(uploads, MemoryUploadedFileManager):
            uploads.remove_session_files(session_id)
        if isinstance(media, MediaFileManager):
            media.clear_session_refs(session_id)
    if gone and isinstance(media, MediaFileManager):
        media.remove_orphaned_files()
    return gone
