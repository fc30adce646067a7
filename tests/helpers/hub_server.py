"""A small Hugging Face Hub on 127.0.0.1, for tests that must never reach the network.

It answers the calls huggingface_hub's client makes to download a model, as the Hub does:
``GET /api/models/{repo}[/revision/{rev}]`` (model_info, with files' sizes and LFS data),
``GET /api/models/{repo}/tree/{rev}`` (the listing snapshot_download caches), and ``HEAD``/``GET
/{repo}/resolve/{rev}/{path}`` (X-Repo-Commit, ETag, Content-Length; for large files a redirect to a
second origin, the "CDN", with X-Linked-Etag and X-Linked-Size, as the Hub redirects LFS files).
Errors carry the Hub's X-Error-Code (RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound).

    with HubServer() as hub:                     # two threaded servers on free ports
        commit = hub.publish("org/tiny", folder) # a commit on main of every file in folder
        os.environ["HF_ENDPOINT"] = hub.url

``hub.requests`` logs (method, path) of every request; ``hub.stall_after(name, n)`` makes the CDN send
``n`` bytes of that file and then hang until ``hub.release()`` (a download to kill mid-way).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")


@dataclass
class Repo:
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit -> {path: content}
    gated: bool = False


def _is_lfs(path: str) -> bool:
    return path.endswith(LFS_SUFFIXES)


def _git_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class HubServer:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.blobs: dict[str, bytes] = {}  # sha256 -> content (what the CDN serves)
        self.requests: list[tuple[str, str]] = []
        self._n_commits = 0
        self._stall: tuple[str, int] | None = None
        self.stalled = threading.Event()  # set when a stalled file has sent its first bytes
        self._release = threading.Event()
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(cdn=False))
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(cdn=True))
        for server in (self._hub, self._cdn):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def publish(self, repo: str, files: Path | dict[str, bytes], branch: str = "main") -> str:
        """A new commit on ``branch`` holding exactly ``files`` (a folder's files, or {path: bytes})."""
        if isinstance(files, Path):
            files = {p.name: p.read_bytes() for p in sorted(files.iterdir()) if p.is_file()}
        entry = self.repos.setdefault(repo, Repo())
        parent = entry.branches.get(branch, "")
        self._n_commits += 1  # as git's commit time: the same files committed twice are two commits
        digest = hashlib.sha1(f"{parent} {self._n_commits}".encode()
                              + repr(sorted((p, _git_oid(c)) for p, c in files.items())).encode())
        commit = digest.hexdigest()
        entry.commits[commit] = dict(files)
        entry.branches[branch] = commit
        for path, content in files.items():
            if _is_lfs(path):
                self.blobs[hashlib.sha256(content).hexdigest()] = content
        return commit

    def gate(self, repo: str) -> None:
        self.repos.setdefault(repo, Repo()).gated = True

    def stall_after(self, path: str, n_bytes: int) -> None:
        self._stall = (path, n_bytes)

    def release(self) -> None:
        self._stall = None
        self._release.set()

    def fetched(self, name: str) -> int:
        """How many times a file's content was sent (from the Hub or the CDN)."""
        return sum(1 for method, path in self.requests if method == "GET" and path.endswith("/" + name))

    def close(self) -> None:
        self.release()
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()

    def __enter__(self) -> "HubServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- answers -----------------------------------------------------------------------------------
    def _commit(self, repo: str, revision: str) -> tuple[int, dict, str | None]:
        """(status, headers, commit) of a revision: a branch or a commit of the repo."""
        entry = self.repos.get(repo)
        if entry is None:
            return 404, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, None
        if entry.gated:
            return 403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted"}, None
        commit = entry.branches.get(revision) or (revision if revision in entry.commits else None)
        if commit is None:
            return 404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"}, None
        return 200, {}, commit

    def _file_entry(self, path: str, content: bytes, *, tree: bool) -> dict:
        lfs = {"size": len(content), "pointerSize": 134}
        sha256 = hashlib.sha256(content).hexdigest()
        if tree:
            entry = {"type": "file", "path": path, "size": len(content), "oid": _git_oid(content)}
            return {**entry, "lfs": {**lfs, "oid": sha256}} if _is_lfs(path) else entry
        entry = {"rfilename": path, "size": len(content), "blobId": _git_oid(content)}
        return {**entry, "lfs": {**lfs, "sha256": sha256}} if _is_lfs(path) else entry

    def _handler(self, cdn: bool):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _send(self, status: int, headers: dict, content: bytes = b"", body: bool = True) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, str(value))
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if body and content:
                    self.wfile.write(content)

            def _answer(self, body: bool) -> None:
                path = urlsplit(self.path).path
                hub.requests.append((self.command, path))
                if cdn:
                    return self._cdn(path, body)
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    return self._api(f"{parts[2]}/{parts[3]}", parts[4:])
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._resolve(f"{parts[0]}/{parts[1]}", unquote(parts[3]),
                                         unquote("/".join(parts[4:])), body)
                self._send(404, {"X-Error-Code": "RepoNotFound"})

            def _api(self, repo: str, rest: list[str]) -> None:
                revision = unquote("/".join(rest[1:])) if rest and rest[0] in ("revision", "tree") else "main"
                status, headers, commit = hub._commit(repo, revision)
                if commit is None:
                    return self._send(status, headers, json.dumps({"error": headers["X-Error-Message"]}).encode())
                files = hub.repos[repo].commits[commit]
                if rest and rest[0] == "tree":
                    answer = [hub._file_entry(p, c, tree=True) for p, c in sorted(files.items())]
                else:
                    answer = {"id": repo, "sha": commit, "private": False, "gated": False,
                              "siblings": [hub._file_entry(p, c, tree=False) for p, c in sorted(files.items())]}
                self._send(200, {"Content-Type": "application/json"}, json.dumps(answer).encode())

            def _resolve(self, repo: str, revision: str, name: str, body: bool) -> None:
                status, headers, commit = hub._commit(repo, revision)
                if commit is None:
                    return self._send(status, headers, body=body)
                content = hub.repos[repo].commits[commit].get(name)
                if content is None:
                    return self._send(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, body=body)
                headers = {"X-Repo-Commit": commit, "ETag": f'"{_git_oid(content)}"'}
                if not _is_lfs(name):
                    return self._send(200, headers, content, body)
                sha256 = hashlib.sha256(content).hexdigest()
                self._send(302, {**headers, "Location": f"{hub.cdn_url}/lfs/{sha256}/{name}",
                                 "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": len(content)}, body=body)

            def _cdn(self, path: str, body: bool) -> None:
                parts = path.strip("/").split("/")
                content = hub.blobs.get(parts[1]) if len(parts) >= 3 and parts[0] == "lfs" else None
                if content is None:
                    return self._send(404, {}, body=body)
                start = 0
                requested = self.headers.get("Range", "")
                if requested.startswith("bytes=") and requested[6:].split("-")[0].isdigit():
                    start = int(requested[6:].split("-")[0])
                status = 206 if start else 200
                rest = content[start:]
                stall = hub._stall
                if not body or stall is None or stall[0] != parts[-1]:
                    return self._send(status, {"ETag": f'"{parts[1]}"'}, rest, body)
                self.send_response(status)
                self.send_header("ETag", f'"{parts[1]}"')
                self.send_header("Content-Length", str(len(rest)))
                self.end_headers()
                self.wfile.write(rest[:stall[1]])
                self.wfile.flush()
                hub.stalled.set()
                hub._release.wait(60)
                self.close_connection = True

        return Handler
