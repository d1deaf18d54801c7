"""`gpufinops alerts run` (and the daemon's alerts job): evaluate every rule, record what changed,
deliver what the ledger holds. One run at a time per warehouse (a lock file beside it).

Evaluation reads the warehouse on a read-only connection (models.alerts.evaluate); the new state and
the notifications it implies are written in one transaction (warehouse.alerts_store.reconcile);
delivery (jobs.alerts.deliver) follows, each send recorded on its own short-lived writer, so
nothing holds the warehouse while a mail server or a webhook answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpufinops.jobs import run_lock
from gpufinops.jobs.alerts import deliver
from gpufinops.jobs.config import Config
from gpufinops.models import alerts as alert_model
from gpufinops.warehouse import alerts_store, db


@dataclass
class RunOutcome:
    now: datetime
    outcomes: list[alert_model.RuleOutcome] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    delivered: deliver.Delivered = field(default_factory=deliver.Delivered)
    evaluate_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """No notification left unsent: failed, unknown (a send that timed out in DATA) or interrupted."""
        d = self.delivered
        return not d.failed and not d.unknown and not d.interrupted


def _group_of(rule: str, scope: str, period: str, teams: tuple[str, ...]) -> str:
    return alert_model.Alert(rule, scope, period, "", "info", "", "", teams=teams).group


def evaluate_and_record(cfg: Config, now: datetime) -> tuple[list[alert_model.RuleOutcome], dict[str, Any], float]:
    """Evaluate every rule and write the new state and its pending notifications (the warehouse is
    migrated: see ``_migrate``)."""
    started = time.perf_counter()
    with db.reader(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        outcomes = alert_model.evaluate(con, cfg.alerts.settings, now)
    seconds = time.perf_counter() - started
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        changes = alerts_store.reconcile(
            con, lambda rows: alert_model.plan(rows, outcomes), deliver.route(cfg), _group_of, now
        )
    return outcomes, changes, seconds


def run(
    cfg: Config,
    *,
    now: datetime | None = None,
    stop: threading.Event | None = None,
    environ: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    send: bool = True,
) -> RunOutcome:
    """Evaluate, record, deliver (``send=False``: record only; the notifications wait in the ledger)."""
    now = now or datetime.now(UTC)
    if not cfg.warehouse_path.exists():
        raise FileNotFoundError(
            f"warehouse {cfg.warehouse_path} does not exist yet: run `gpufinops ingest` or `gpufinops demo` first"
        )
    with run_lock.waiting_lock(cfg, "alerts", "alerts run"):
        _migrate(cfg)
        outcomes, changes, seconds = evaluate_and_record(cfg, now)
        result = RunOutcome(now, outcomes, changes, evaluate_seconds=round(seconds, 3))
        if send:
            result.delivered = deliver.deliver_pending(cfg, stop=stop, environ=environ, sleep=sleep)
    return result


def _migrate(cfg: Config) -> None:
    """The alert tables exist before a read-only evaluation looks for them (an older warehouse)."""
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit):
        pass
