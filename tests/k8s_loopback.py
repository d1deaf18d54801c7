"""A loopback Kubernetes API server for the resources enforcement touches (ClusterQueue, ResourceFlavor,
LocalQueue, NodePool, ResourceQuota): list (labelSelector equality, limit/continue pages), get, and
server-side apply (PATCH application/apply-patch+yaml with fieldManager), with field ownership per
manager (a field another manager set to a different value is a 409 unless force=true), bearer-token
authentication (401), and paths refused with 403. Every request is recorded.

It stands in for kube-apiserver, which does not run here: the wire format (paths, Status bodies, List
kinds, the apply content type) is the API server's; admission and CRD validation are not (the tests
validate the objects against the CRDs separately)."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from gpufinops.jobs.enforce.kube import RESOURCES
from tests.http_loopback import JsonHandler

COLLECTIONS = {(prefix, plural): kind for kind, (prefix, plural, _ns) in RESOURCES.items()}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out |= _leaves(v, f"{path}.{k}" if path else k)
        return out
    return {path: value}


def _merge(into: dict, patch: dict) -> dict:
    for k, v in patch.items():
        into[k] = _merge(into.get(k) or {}, v) if isinstance(v, dict) and isinstance(into.get(k), dict | None) else v
    return into


@dataclass
class State:
    token: str
    objects: dict[str, dict] = field(default_factory=dict)  # object path -> object
    owners: dict[str, dict[str, str]] = field(default_factory=dict)  # object path -> leaf -> manager
    forbidden: set[str] = field(default_factory=set)  # path prefixes answered 403
    requests: list[Request] = field(default_factory=list)
    stall: bool = False  # every answer: headers, then a byte a second, never the end
    cycle_continue: bool = False  # every list page names the same continue token
    junk: bytes | None = None  # every answer: 200 with this body
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seed(self, path: str, doc: dict, manager: str) -> None:
        self.objects[path] = copy.deepcopy(doc)
        self.owners[path] = {k: manager for k in _leaves({"spec": doc.get("spec", {})})}


def _split(path: str) -> tuple[str, str | None, str, str | None]:
    """(prefix, namespace, plural, name) of an API path."""
    parts = path.strip("/").split("/")
    prefix_len = 2 if parts[0] == "api" else 3
    prefix, rest = "/" + "/".join(parts[:prefix_len]), parts[prefix_len:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    return prefix, namespace, rest[0], rest[1] if len(rest) > 1 else None


class Handler(JsonHandler):
    state: State

    def _status(self, code: int, reason: str, message: str) -> None:
        self._json(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                          "message": message, "code": code})  # fmt: skip

    def _begin(self) -> tuple[str, dict[str, str]] | None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = yaml.safe_load(raw) if raw else None
        with self.state.lock:
            self.state.requests.append(
                Request(self.command, url.path, query, self.headers.get("Content-Type", ""), body)
            )
        self._body = body
        if self.headers.get("Authorization") != f"Bearer {self.state.token}":
            self._status(401, "Unauthorized", "Unauthorized")
            return None
        if self.state.junk is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.state.junk)))
            self.end_headers()
            self.wfile.write(self.state.junk)
            return None
        if self.state.stall:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            for _ in range(30):
                self.wfile.write(b" ")
                self.wfile.flush()
                threading.Event().wait(0.5)
            return None
        if any(url.path.startswith(p) for p in self.state.forbidden):
            _prefix, ns, plural, name = _split(url.path)
            self._status(403, "Forbidden", f'{plural} "{name}" is forbidden: User "system:serviceaccount:ops:gpufinops" '
                         f"cannot {self.command.lower()} resource \"{plural}\"")  # fmt: skip
            return None
        return url.path, query

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        begun = self._begin()
        if begun is None:
            return
        path, query = begun
        prefix, ns, plural, name = _split(path)
        kind = COLLECTIONS.get((prefix, plural))
        if kind is None:
            return self._status(404, "NotFound", f"the server could not find the requested resource ({path})")
        if name is not None:
            found = self.state.objects.get(path)
            if found is None:
                return self._status(404, "NotFound", f'{plural} "{name}" not found')
            return self._json(200, found)
        items = [o for p, o in sorted(self.state.objects.items()) if o["kind"] == kind]
        if selector := query.get("labelSelector"):
            k, _, v = selector.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(k) == v]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(items) or 1)
        page, rest = items[start : start + limit], items[start + limit :]
        meta = {"resourceVersion": "1"} | ({"continue": str(start + limit)} if rest else {})
        if self.state.cycle_continue:
            meta["continue"] = "0"
        self._json(200, {"kind": f"{kind}List", "apiVersion": prefix.removeprefix("/apis/").removeprefix("/api/"),
                         "metadata": meta, "items": page})  # fmt: skip

    def do_PATCH(self) -> None:  # noqa: N802
        begun = self._begin()
        if begun is None:
            return
        path, query = begun
        if self.headers.get("Content-Type") != "application/apply-patch+yaml":
            return self._status(415, "UnsupportedMediaType", "the body of the request was in an unknown format")
        manager = query.get("fieldManager")
        if not manager:
            return self._status(400, "BadRequest", "fieldManager is required for apply requests")
        doc: dict = self._body or {}
        with self.state.lock:
            owners = self.state.owners.setdefault(path, {})
            current = self.state.objects.get(path)
            wanted = _leaves({"spec": doc.get("spec", {})})
            have = _leaves({"spec": (current or {}).get("spec", {})})
            conflicts = [
                (leaf, owners[leaf]) for leaf, value in wanted.items()
                if leaf in owners and owners[leaf] != manager and str(have.get(leaf)) != str(value)
            ]  # fmt: skip
            if conflicts and query.get("force") != "true":
                text = "; ".join(f'conflict with "{m}": .{leaf}' for leaf, m in conflicts)
                return self._status(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {text}")
            merged = _merge(copy.deepcopy(current) if current else {}, doc)
            self.state.objects[path] = merged
            owners.update({leaf: manager for leaf in wanted})
        self._json(201 if current is None else 200, merged)


class K8sLoopback:
    def __init__(self, token: str = "loopback-token-0123456789") -> None:
        self.state = State(token)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True  # a stalled answer never holds the shutdown
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path) -> str:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "loopback",
            "clusters": [{"name": "loopback", "cluster": {"server": self.url}}],
            "users": [{"name": "gpufinops", "user": {"token": self.state.token}}],
            "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "gpufinops"}}],
        }
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def __enter__(self) -> K8sLoopback:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
