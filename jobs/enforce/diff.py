"""`gpufinops enforce --diff`: what applying the budget quotas would change, against the objects on the
cluster (read from a file — ``kubectl get … -o yaml`` output, a List or several documents — or from the
Kubernetes API). Only the fields gpufinops sets are compared (what server-side apply would change); the
budget-reason annotation, rewritten at every load, is left out of the comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufinops.jobs.enforce.kube import Client, KubeError, describe
from gpufinops.jobs.enforce.objects import REASON

Key = tuple[str, str, str]


def key_of(doc: dict) -> Key:
    meta = doc.get("metadata") or {}
    return (str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


@dataclass
class Change:
    doc: dict
    action: str  # create | update | unchanged
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)  # (path, on the cluster, wanted)


def read_current(path: str | Path) -> dict[Key, dict]:
    """The objects of a YAML file: documents, or the items of ``kind: List`` documents."""
    try:
        docs = [d for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise KubeError(f"--current {path}: can not be read as YAML ({exc.__class__.__name__})") from None
    out = {}
    for n, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise KubeError(f"--current {path}: document {n + 1} is not a Kubernetes object")
        items = doc.get("items") if doc.get("kind", "").endswith("List") else [doc]
        for item in items or []:
            kind = item.get("kind") or doc.get("kind", "").removesuffix("List")
            out[key_of({**item, "kind": kind})] = {**item, "kind": kind}
    return out


def read_cluster(client: Client, wanted: list[dict]) -> tuple[dict[Key, dict], dict[Key, str]]:
    """The managed objects of each wanted kind (one list call each), a get for those not listed, and the
    sentence of each object the API server would not show."""
    out: dict[Key, dict] = {}
    problems: dict[Key, str] = {}
    for kind in sorted({d["kind"] for d in wanted}):
        try:
            for item in client.list(kind):
                out[key_of(item)] = item
        except KubeError as exc:
            problems |= {key_of(d): f"{describe(d)}: {exc}" for d in wanted if d["kind"] == kind}
    for doc in wanted:
        if key_of(doc) in out or key_of(doc) in problems:
            continue
        try:
            if (found := client.get(doc)) is not None:
                out[key_of(doc)] = {**found, "kind": doc["kind"]}
        except KubeError as exc:
            problems[key_of(doc)] = str(exc)
    return out, problems


def _walk(wanted: Any, current: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(wanted, dict):
        for k, v in wanted.items():
            if path == "metadata.annotations" and k == REASON:
                continue
            _walk(v, current.get(k) if isinstance(current, dict) else None, f"{path}.{k}" if path else k, out)
    elif isinstance(wanted, list):
        for i, v in enumerate(wanted):
            there = current[i] if isinstance(current, list) and i < len(current) else None
            _walk(v, there, f"{path}[{i}]", out)
    elif current is None or str(wanted) != str(current):  # a quantity reads back as "8" for 8
        out.append((path, current, wanted))


def changes(wanted: list[dict], current: dict[Key, dict]) -> list[Change]:
    out = []
    for doc in wanted:
        there = current.get(key_of(doc))
        if there is None:
            out.append(Change(doc, "create"))
            continue
        fields: list[tuple[str, Any, Any]] = []
        _walk({k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}, there, "", fields)
        out.append(Change(doc, "update" if fields else "unchanged", fields))
    return out


def render(found: list[Change], problems: dict[Key, str] | None = None) -> str:
    lines = []
    for c in found:
        if problems and key_of(c.doc) in problems:
            lines.append(f"! {problems[key_of(c.doc)]}")
        elif c.action == "create":
            lines.append(f"+ {describe(c.doc)}: created")
        elif c.action == "unchanged":
            lines.append(f"= {describe(c.doc)}: unchanged")
        else:
            lines.append(f"~ {describe(c.doc)}:")
            lines += [f"    {path}: {'(unset)' if old is None else old} → {new}" for path, old, new in c.fields]
    counts = {a: sum(1 for c in found if c.action == a) for a in ("create", "update", "unchanged")}
    lines.append(f"{counts['create']} to create, {counts['update']} to change, {counts['unchanged']} unchanged")
    return "\n".join(lines) + "\n"
