"""`enforce --diff` / `enforce --apply`, and `serve`'s apply after each load (``[enforce] apply = true``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpufinops.jobs.config import Config
from gpufinops.jobs.enforce import build
from gpufinops.jobs.enforce import diff as diff_mod
from gpufinops.jobs.enforce.kube import Client, KubeError, describe, load_target
from gpufinops.warehouse import db


@dataclass
class Applied:
    applied: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one sentence each
    unchanged: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def text(self) -> str:
        lines = [f"applied {name}" for name in self.applied] + [f"failed: {why}" for why in self.failed]
        lines.append(f"{len(self.applied)} applied, {self.unchanged} unchanged, {len(self.failed)} failed")
        return "\n".join(lines) + "\n"


def wanted(cfg: Config, fmt: str, cluster: str | None) -> list[dict]:
    with db.reader(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        return build.documents(con, fmt, cfg.alerts.settings.budgets, cfg.export, cluster=cluster)


def client(cfg: Config) -> Client:
    return Client(load_target(cfg.enforce.kubeconfig, cfg.enforce.context))


def diff(cfg: Config, *, fmt: str, cluster: str | None, current: str | None = None) -> str:
    docs = wanted(cfg, fmt, cluster)
    if current is not None:
        return diff_text(docs, diff_mod.read_current(current))
    kube = client(cfg)
    try:
        on_cluster, problems = diff_mod.read_cluster(kube, docs)
        return diff_text(docs, on_cluster, problems)
    finally:
        kube.close()


def diff_text(docs: list[dict], current: dict, problems: dict | None = None) -> str:
    return diff_mod.render(diff_mod.changes(docs, current), problems)


def apply(cfg: Config, *, fmt: str, cluster: str | None, kube: Client | None = None) -> Applied:
    """Server-side apply of every object that would change; flavors before the queues that name them. A
    refusal (403, 409) is recorded and the next object is tried."""
    docs = wanted(cfg, fmt, cluster)
    own = kube is None
    kube = kube or client(cfg)
    result = Applied()
    try:
        current, problems = diff_mod.read_cluster(kube, docs)
        found = diff_mod.changes(docs, current)
        order = {"ResourceFlavor": 0, "ClusterQueue": 1}
        for change in sorted(found, key=lambda c: order.get(c.doc["kind"], 2)):
            if (problem := problems.get(diff_mod.key_of(change.doc))) is not None:
                result.failed.append(problem)
                continue
            if change.action == "unchanged":
                result.unchanged += 1
                continue
            try:
                kube.apply(change.doc)
                result.applied.append(describe(change.doc))
            except KubeError as exc:
                result.failed.append(str(exc))
    finally:
        if own:
            kube.close()
    return result


def after_load(cfg: Config) -> Applied | None:
    """`serve`: apply the quotas of every configured format when ``[enforce] apply = true``."""
    if not cfg.enforce.apply:
        return None
    total = Applied()
    for fmt in cfg.enforce.formats:
        part = apply(cfg, fmt=fmt, cluster=cfg.enforce.cluster)
        total.applied += part.applied
        total.failed += part.failed
        total.unchanged += part.unchanged
    return total
