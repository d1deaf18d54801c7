"""The enforced budgets now: every ``[[budgets]]`` entry with ``enforce`` other than ``warn``, per team, as
quotas (models/budget_quota.py) and, per format, the YAML ``gpufinops export budgets`` prints."""

from __future__ import annotations

from typing import Any

from gpufinops.jobs.enforce import inputs, objects
from gpufinops.jobs.export import inventory as inventory_mod
from gpufinops.jobs.export import yamlout
from gpufinops.jobs.export.clusters import CLUSTER_LABEL
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.models.budget_quota import team_quota
from gpufinops.models.budgets import Budget


class EnforceError(ValueError):
    """A request the warehouse or the config cannot answer: the message names what exists."""


def enforced_budgets(budgets: tuple[Budget, ...] | list[Budget], name: str | None = None) -> list[Budget]:
    chosen = [b for b in budgets if b.enforce != "warn" and (name is None or b.name == name)]
    if name is not None and not chosen:
        known = ", ".join(b.name for b in budgets if b.enforce != "warn") or "none"
        raise EnforceError(f"--budget {name!r}: no enforced budget of that name (enforced: {known})")
    return chosen


def quotas(con, budgets, settings: ExportSettings) -> tuple[list[objects.Enforced], inputs.Fleet]:
    fleet = inputs.load_fleet(con, settings)
    prices = inputs.rates(fleet.usage)
    by_name = {c.name: c for c in fleet.clusters.all()}
    out = []
    for budget in enforced_budgets(budgets):
        for qi in inputs.budget_inputs(con, budget, fleet, prices):
            out.append(objects.Enforced(team_quota(qi), by_name))
    return out, fleet


def as_json(enforced: list[objects.Enforced]) -> list[dict[str, Any]]:
    return [e.quota.to_dict() for e in enforced]


def render(con, fmt: str, budgets, settings: ExportSettings, *, cluster: str | None = None) -> str:
    """``gpufinops export budgets --format FMT``: one multi-document YAML, a cluster's part opened by a
    ``# ==== cluster:`` comment as in the other exports."""
    if fmt not in objects.FORMATS:
        raise EnforceError(f"--format {fmt!r}: not a budget format (known: {', '.join(objects.FORMATS)})")
    enforced, fleet = quotas(con, budgets, settings)
    head = [f"gpufinops export budgets --format {fmt}: the quotas of {len(enforced)} enforced team budget(s)"]
    if not enforced:
        head.append('no [[budgets]] entry has enforce = "cap", "hold" or "drain" with teams in its scope')
        return "".join(f"# {line}\n" for line in head)
    if cluster is not None and not any(c.matches(cluster) for c in fleet.clusters.all()):
        known = ", ".join(c.name for c in fleet.clusters.all()) or "none"
        raise EnforceError(f"--cluster {cluster!r}: no such cluster in the data (known: {known})")
    body = []
    if fmt == "skypilot":
        for e in enforced:
            doc, comments = objects.skypilot_document(e)
            body.append(yamlout.dump_all([(doc, comments)]))
    else:
        inv = inventory_mod.load(con)
        seen: set[tuple[str, str, str]] = set()  # a flavor two teams use is written once per cluster
        for e in enforced:
            for name, found, notes in objects.documents(fmt, e, fleet.clusters, inv, settings, cluster):
                c = e.clusters[name]
                docs = [(d, k) for d, k in found if (c.label, d["kind"], d["metadata"]["name"]) not in seen]
                seen |= {(c.label, d["kind"], d["metadata"]["name"]) for d, _k in docs if d["kind"] == "ResourceFlavor"}
                banner = [f"==== cluster: {c.name} ({c.kind}; label {CLUSTER_LABEL}={c.label})"] + notes
                body.append(yamlout.section(banner, docs, "nothing to apply here"))
    return "".join(f"# {line}\n" for line in head) + "".join(body)


def documents(con, fmt: str, budgets, settings: ExportSettings, *, cluster: str | None) -> list[dict[str, Any]]:
    """The Kubernetes objects of ``fmt`` for one cluster (None: every cluster), as plain dicts."""
    if fmt not in ("kueue", "karpenter", "resourcequota"):
        raise EnforceError(f"--format {fmt!r}: enforce applies kueue, karpenter or resourcequota objects")
    enforced, fleet = quotas(con, budgets, settings)
    if cluster is not None and not any(c.matches(cluster) for c in fleet.clusters.all()):
        known = ", ".join(c.name for c in fleet.clusters.all()) or "none"
        raise EnforceError(f"--cluster {cluster!r}: no such cluster in the data (known: {known})")
    inv = inventory_mod.load(con)
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in enforced:
        for _name, docs, _notes in objects.documents(fmt, e, fleet.clusters, inv, settings, cluster):
            for doc, _comments in docs:
                meta = doc["metadata"]
                out.setdefault((doc["kind"], meta.get("namespace", ""), meta["name"]), doc)
    return list(out.values())
