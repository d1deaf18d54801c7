"""The Kubernetes API, as far as enforcement needs it: list, get and server-side apply of ClusterQueues,
ResourceFlavors, NodePools and ResourceQuotas, over plain HTTPS (httpx) with a kubeconfig's server,
bearer token and CA.

A kubeconfig user may hold ``token``, ``tokenFile``, or ``client-certificate`` / ``client-key`` files;
exec and auth-provider plugins are not run (their token can be written to ``tokenFile``). Every call has a
connect timeout and a total deadline; a 403 or a 409 is one sentence naming the object.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

FIELD_MANAGER = "gpufinops"
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=gpufinops"
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
DEADLINE_S = 60.0  # a whole call, however slowly the server trickles its answer
MAX_BODY = 32 * 1024 * 1024
# kind -> (API path prefix, plural, namespaced)
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "NodePool": ("/apis/karpenter.sh/v1", "nodepools", False),
    "AKSNodeClass": ("/apis/karpenter.azure.com/v1beta1", "aksnodeclasses", False),  # AKS's NodePools' class
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
}


class KubeError(RuntimeError):
    """A call the API server refused or could not answer: one sentence naming the object."""


@dataclass(frozen=True)
class Target:
    server: str
    token: str | None = None
    verify: Any = True  # a CA bundle path, True (system), or False (insecure-skip-tls-verify)
    cert: tuple[str, str] | None = None
    context: str = ""


def _data_file(data: str, suffix: str) -> str:
    handle = tempfile.NamedTemporaryFile("wb", suffix=suffix, delete=False)  # noqa: SIM115 (kept for httpx)
    with handle:
        handle.write(base64.b64decode(data))
    return handle.name


def load_target(path: str | None, context: str | None, environ: dict[str, str] | None = None) -> Target:
    """The API server, credentials and CA of a kubeconfig's context (default: its current-context)."""
    env = os.environ if environ is None else environ
    chosen = Path(path or env.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config").expanduser()
    try:
        config = yaml.safe_load(chosen.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeError(f"kubeconfig {chosen}: can not be read ({exc.__class__.__name__})") from None
    name = context or config.get("current-context")
    ctx = _named(config, "contexts", name, chosen)["context"]
    cluster = _named(config, "clusters", ctx.get("cluster"), chosen)["cluster"]
    user = _named(config, "users", ctx.get("user"), chosen).get("user") or {} if ctx.get("user") else {}
    token = user.get("token")
    if token is None and user.get("tokenFile"):
        token = Path(user["tokenFile"]).expanduser().read_text().strip()
    if user.get("exec") or user.get("auth-provider"):
        raise KubeError(
            f"kubeconfig {chosen}: user {ctx.get('user')!r} uses an exec/auth-provider plugin, which gpufinops "
            "does not run: give it a token or tokenFile (e.g. a ServiceAccount token)"
        )
    verify: Any = True
    if cluster.get("insecure-skip-tls-verify"):
        verify = False
    elif cluster.get("certificate-authority-data"):
        verify = _data_file(cluster["certificate-authority-data"], ".crt")
    elif cluster.get("certificate-authority"):
        verify = str(Path(cluster["certificate-authority"]).expanduser())
    cert = None
    if user.get("client-certificate-data") and user.get("client-key-data"):
        cert = (_data_file(user["client-certificate-data"], ".crt"), _data_file(user["client-key-data"], ".key"))
    elif user.get("client-certificate") and user.get("client-key"):
        cert = (user["client-certificate"], user["client-key"])
    return Target(str(cluster["server"]).rstrip("/"), token, verify, cert, str(name))


def _named(config: dict, section: str, name: Any, path: Path) -> dict:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return entry
    known = ", ".join(str(e.get("name")) for e in config.get(section) or []) or "none"
    raise KubeError(f"kubeconfig {path}: no {section[:-1]} named {name!r} (known: {known})")


def _object(response: httpx.Response, what: str) -> dict:
    """The JSON object of an answer, or a KubeError naming the call."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise KubeError(f"{what}: the API server answered HTTP {response.status_code} without a JSON object")
    return body


def describe(doc: dict) -> str:
    meta = doc.get("metadata", {})
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{doc.get('kind')} {meta.get('name')}{where}"


def object_path(doc: dict) -> str:
    prefix, plural, namespaced = RESOURCES[doc["kind"]]
    meta = doc["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if namespaced else ""
    return f"{prefix}{ns}/{plural}/{meta['name']}"


class Client:
    """One API server: list, get and server-side apply, each bounded in time and body size."""

    def __init__(
        self, target: Target, *, transport: httpx.BaseTransport | None = None, deadline_s: float = DEADLINE_S
    ) -> None:
        self.deadline_s = deadline_s
        headers = {"Accept": "application/json", "User-Agent": "gpufinops"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        self.target = target
        self.http = httpx.Client(
            base_url=target.server,
            headers=headers,
            verify=target.verify,
            cert=target.cert,
            timeout=TIMEOUT,
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        """One call, its body read in chunks under a total deadline and a size limit."""
        started = time.monotonic()
        try:
            with self.http.stream(method, path, **kwargs) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY:
                        raise KubeError(f"{what}: the API server's answer is over {MAX_BODY} bytes")
                    if time.monotonic() - started > self.deadline_s:
                        raise KubeError(f"{what}: the API server took over {self.deadline_s:g} s to answer")
        except httpx.HTTPError as exc:
            raise KubeError(
                f"{what}: the API server {self.target.server} did not answer ({exc.__class__.__name__})"
            ) from None
        kept = {k: v for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length")}
        return httpx.Response(response.status_code, headers=kept, content=bytes(body))

    def list(self, kind: str) -> list[dict]:
        """Every object of ``kind`` gpufinops manages (label app.kubernetes.io/managed-by=gpufinops)."""
        prefix, plural, _namespaced = RESOURCES[kind]
        items: list[dict] = []
        seen: set[str] = set()
        token = ""
        while True:
            params = {"labelSelector": MANAGED_SELECTOR, "limit": "500"} | ({"continue": token} if token else {})
            response = self._send("GET", f"{prefix}/{plural}", f"list {kind}", params=params)
            if response.status_code == 404:
                return []  # the CRD is not installed: nothing of this kind exists
            self._raise(response, f"list {kind}")
            body = _object(response, f"list {kind}")
            found = body.get("items") or []
            if not isinstance(found, list) or not all(isinstance(i, dict) for i in found):
                raise KubeError(f"list {kind}: the API server's items are not a list of objects")
            items += [{**i, "kind": kind} for i in found]
            token = (body.get("metadata") or {}).get("continue") or ""
            if not token:
                return items
            if token in seen:
                raise KubeError(f"list {kind}: the API server repeated a continue token")
            seen.add(token)

    def get(self, doc: dict) -> dict | None:
        response = self._send("GET", object_path(doc), f"get {describe(doc)}")
        if response.status_code == 404:
            return None
        self._raise(response, f"get {describe(doc)}")
        return _object(response, f"get {describe(doc)}")

    def apply(self, doc: dict) -> dict:
        """Server-side apply (field manager gpufinops, no force: a field another manager owns is a conflict)."""
        response = self._send(
            "PATCH",
            object_path(doc),
            f"apply {describe(doc)}",
            params={"fieldManager": FIELD_MANAGER},
            content=json.dumps(doc).encode(),  # JSON is YAML: the apply-patch+yaml body
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        self._raise(response, f"apply {describe(doc)}")
        return _object(response, f"apply {describe(doc)}")

    def _raise(self, response: httpx.Response, what: str) -> None:
        if response.status_code < 400:
            return
        try:
            message = str(response.json().get("message", "")).replace("\n", " ")[:300]
        except ValueError:
            message = ""
        where = f"on {self.target.server}"
        if response.status_code == 409:
            raise KubeError(
                f"{what} {where}: conflict: another field manager owns the fields gpufinops sets ({message})"
            )
        if response.status_code == 403:
            raise KubeError(f"{what} {where}: forbidden: the kubeconfig's user may not do this ({message})")
        raise KubeError(f"{what} {where}: HTTP {response.status_code} ({message})")
