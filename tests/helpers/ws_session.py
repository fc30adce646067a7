"""Streamlit sessions without a browser: a websocket that asks for one run of a page (with a query string,
as a link gives it), reads the server's messages to the run's end, and then stays or leaves; and the
server's upload route and metrics read as a client would. Many sessions cost the server what a visitor
costs it, and the test nothing of a browser's."""

from __future__ import annotations

import http.client
import re
import time
import urllib.parse
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

FINISHED_EARLY_FOR_RERUN = 2  # ForwardMsg.ScriptFinishedStatus: another run follows at once


@dataclass
class Run:
    session_id: str = ""
    exceptions: list[str] = field(default_factory=list)
    received_bytes: int = 0


def _run_to_end(socket, timeout: float) -> Run:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    run = Run()
    while True:
        data = socket.recv(timeout=timeout)
        run.received_bytes += len(data)
        message = ForwardMsg()
        message.ParseFromString(data)
        kind = message.WhichOneof("type")
        if kind == "new_session" and message.new_session.initialize.session_id:
            run.session_id = message.new_session.initialize.session_id
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element" \
                and message.delta.new_element.WhichOneof("type") == "exception":
            run.exceptions.append(message.delta.new_element.exception.message)
        elif kind == "script_finished" and message.script_finished != FINISHED_EARLY_FOR_RERUN:
            return run


@contextmanager
def ws_session(url: str, page: str = "attention", query: str = "", timeout: float = 300.0):
    """A session of the app at ``url`` that has run ``page`` once (yields its Run and a function that asks
    for another run); it leaves at the block's end, as a closed tab does."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from websockets.sync.client import connect

    with connect(url.replace("http://", "ws://") + "/_stcore/stream", subprotocols=["streamlit"],
                 max_size=None, open_timeout=60) as socket:
        def rerun() -> Run:
            message = BackMsg()
            message.rerun_script.query_string = query
            message.rerun_script.page_name = page
            socket.send(message.SerializeToString())
            return _run_to_end(socket, timeout)

        first = rerun()
        yield first, rerun


REFUSED_WHILE_SENDING = 0  # what upload() returns when the server refused and closed before reading the body


def upload(url: str, session_id: str, data: bytes, name: str = "config.json") -> int:
    """PUT ``data`` to the upload route as a file of ``session_id`` (the server's XSRF check off): the HTTP
    status. A server that refuses on the Content-Length alone answers and closes while a large body is still
    being sent; its answer is read when it arrived before the reset, else this returns REFUSED_WHILE_SENDING
    (which of the two a client sees is a race between the server's close and the client's last write)."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/json\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        try:
            connection.request("PUT", f"/_stcore/upload_file/{session_id}/{uuid.uuid4()}", body=body,
                               headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server stopped reading: its answer may still be in the socket
        try:
            response = connection.getresponse()
            response.read()
            return response.status
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
            return REFUSED_WHILE_SENDING
    finally:
        connection.close()


def uploaded_bytes(url: str) -> int:
    """What the server's upload store holds, all sessions together (Streamlit's /_stcore/metrics; that
    family is recomputed at most every 5 s, so this waits past that first)."""
    time.sleep(5.5)
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(int(float(value)) for value in
               re.findall(r'^cache_memory_bytes\{[^}]*cache_type="UploadedFileManager"[^}]*\} (\S+)$', text, re.M))
