"""`gpufinops serve`: the scheduler daemon, the only process that starts APScheduler (docs/serve.md).

One job per configured source at its schedule (the ingestor registry's default unless the source
sets ``schedule``), a daily recommend run, the weekly report and the feed push, each overridable in
``[jobs]``. Jobs run one at a time in one worker thread (DuckDB allows one writer; a queue is
simpler than lock juggling), with ``max_instances=1``, coalescing and a misfire grace period. Failed
ingests are retried with exponential backoff. Ingest runs are recorded in ``ingest_runs`` by the
ingest runner; every other job in ``job_runs``. A lock file beside the warehouse makes a second
daemon refuse to start. SIGTERM/SIGINT stop the scheduler: a running job finishes and is recorded;
a job waiting out a retry backoff is recorded as interrupted. Runs left ``running`` by a killed
daemon are closed as interrupted on the next start.

Test schedules: ``[jobs] every_seconds = N`` runs every job every N seconds instead of its cron, and
the ``[jobs]`` crons accept 6 fields (second minute hour day month weekday).

Here: the jobs (``Daemon``), the scheduler and the process's life. The ``[jobs]`` settings and the cron
triggers are in ``jobs.serve_settings``; the lock and the ``job_runs`` ledger in ``jobs.serve_ledger``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from gpufinops.jobs.config import Config
from gpufinops.jobs.serve_ledger import (
    AlreadyRunning,
    acquire_lock,
    close_interrupted_runs,
    ledger_finish,
    ledger_start,
    lock_path,
    now_utc,
)
from gpufinops.jobs.serve_settings import JobSettings, cron_trigger

log = logging.getLogger("gpufinops.serve")

ALERT_TABLES = ("cost_line_items", "gpu_metrics_hourly")  # a load into these re-runs the alert rules


# --- the jobs ------------------------------------------------------------------------------------


class Interrupted(RuntimeError):
    """The daemon is stopping: a job waiting to retry gives up."""


class Daemon:
    """The jobs and their shared state (the stop event); the scheduler calls the bound methods."""

    def __init__(self, cfg: Config, settings: JobSettings) -> None:
        self.cfg = cfg
        self.settings = settings
        self.stopping = threading.Event()

    def ingest(self, source: str) -> None:
        """One source, retried with exponential backoff; every attempt is a row in ingest_runs."""
        from gpufinops.jobs.ingest_run import run_configured

        delay = self.settings.retry_backoff_seconds
        for attempt in range(self.settings.ingest_retries + 1):
            result = run_configured(self.cfg, [source])[0]
            log.info("ingest %s: %s, %d rows (attempt %d)", source, result.status, result.rows, attempt + 1)
            if result.ok:
                self.after_ingest(source, result.status)
                return
            if attempt == self.settings.ingest_retries:
                log.error("ingest %s failed after %d attempt(s): %s", source, attempt + 1, result.error)
                return
            log.warning("ingest %s failed (%s); retrying in %.0f s", source, result.error, delay)
            if self.stopping.wait(delay):
                log.warning("ingest %s: daemon stopping, retry abandoned", source)
                return
            delay *= 2

    def after_ingest(self, source: str, status: str) -> None:
        """A cost or metrics load changes what the alert rules see: evaluate them right after it."""
        from gpufinops.ingest.core.registry import default_registry

        source_type = self.cfg.sources[source].type
        target = default_registry().get(source_type).meta.target_table
        if status == "succeeded" and target in ALERT_TABLES:
            self.alerts(trigger=f"after ingest {source}")
            if self.cfg.enforce.apply:
                self.enforce(trigger=f"after ingest {source}")

    def enforce(self, trigger: str) -> None:
        """Apply the enforced budgets' quotas to the cluster (``[enforce] apply = true``; jobs/enforce/apply.py)."""

        def body() -> str | None:
            from gpufinops.jobs.enforce import apply as enforce_apply

            result = enforce_apply.after_load(self.cfg)
            if result is None:
                return None
            log.info("enforce (%s): %d applied, %d unchanged", trigger, len(result.applied), result.unchanged)
            if result.failed:
                raise RuntimeError(f"enforce: {len(result.failed)} object(s) refused: {'; '.join(result.failed)}")
            return None

        self.recorded("enforce", body)

    def alerts(self, trigger: str = "schedule") -> None:
        """Evaluate the alert rules and deliver what they opened or resolved (jobs/alerts)."""

        def body() -> str | None:
            from gpufinops.jobs.alerts import run as alerts_run

            result = alerts_run.run(self.cfg, stop=self.stopping)
            opened = len(result.changes.get("opened", []))
            log.info("alerts (%s): %d opened, %d notification(s) sent", trigger, opened, len(result.delivered.sent))
            if result.delivered.interrupted:
                raise Interrupted("daemon stopping; the remaining alert notifications go out on the next run")
            if result.delivered.failed:
                raise RuntimeError(
                    f"alerts: {len(result.delivered.failed)} delivery(ies) failed: {', '.join(result.delivered.failed)}"
                )
            return None

        self.recorded("alerts", body)

    def recorded(self, job: str, body: Callable[[], str | None]) -> None:
        """Run ``body`` as one ledger row in job_runs; its return value 'skipped' marks a skip."""
        run_id = ledger_start(self.cfg, job)
        try:
            outcome = body()
        except Interrupted as exc:
            ledger_finish(self.cfg, run_id, "failed", f"interrupted: {exc}")
            return
        except Exception as exc:  # recorded, and the daemon goes on with the next job
            log.exception("job %s failed", job)
            ledger_finish(self.cfg, run_id, "failed", " ".join(f"{type(exc).__name__}: {exc}".split())[:2000])
            return
        ledger_finish(self.cfg, run_id, "skipped" if outcome == "skipped" else "succeeded")
        log.info("job %s: %s", job, outcome or "succeeded")

    def recommend(self) -> None:
        def body() -> None:
            from gpufinops.models.run import run_models
            from gpufinops.warehouse import db

            with db.writer(self.cfg.warehouse_path, memory_limit=self.cfg.memory_limit) as con:
                recs = run_models(con, settings=self.cfg.models)
            log.info("recommend: %d recommendation(s)", len(recs))

        self.recorded("recommend", body)

    def report(self, week: Any = None) -> None:
        """The weekly report of ``week`` (default: last week) to every recipient not yet mailed."""

        def body() -> str | None:
            from gpufinops.jobs.report import deliver, weeks

            if not self.cfg.report.recipients:
                return "skipped"
            due = week or weeks.previous_week(now_utc(), self.cfg.report.tz)
            outcome = deliver.send_weekly(self.cfg, due, stop=self.stopping)
            if outcome.interrupted:
                raise Interrupted(
                    f"daemon stopping; weekly report {due} sent to {len(outcome.sent)}, the rest go out on the next run"
                )
            if outcome.failed:
                raise RuntimeError(
                    f"weekly report {due}: {len(outcome.failed)} send(s) failed: {', '.join(outcome.failed)}"
                )
            return None

        self.recorded("report", body)

    def feed(self) -> None:
        def body() -> str | None:
            webhook = _webhook_module()
            if webhook is None:
                return "skipped"
            result = webhook.push_new_recommendations(self.cfg)
            return "skipped" if result is None else None

        self.recorded("feed", body)


def _webhook_module():
    """jobs.webhook (the feed push) when it is installed, else None."""
    try:
        from gpufinops.jobs import webhook
    except ImportError:
        return None
    return webhook


def missed_report_week(trigger, tz, now: datetime):
    """The week whose report was due in the last 7 days (the daemon may have been down then)."""
    from datetime import timedelta

    from gpufinops.jobs.report.weeks import previous_week

    due = trigger.get_next_fire_time(None, now - timedelta(days=7))
    return previous_week(due, tz) if due is not None and due <= now else None


def build_scheduler(cfg: Config, daemon: Daemon):
    """A BlockingScheduler with one job per source, recommend, report and (when configured) feed."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.blocking import BlockingScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    s = daemon.settings
    scheduler = BlockingScheduler(executors={"default": ThreadPoolExecutor(max_workers=1)}, timezone="UTC")
    common = {"max_instances": 1, "coalesce": True, "misfire_grace_time": s.misfire_grace_seconds}

    def trigger(cron: str, tz: str):
        return IntervalTrigger(seconds=s.every_seconds) if s.every_seconds else cron_trigger(cron, tz)

    for name, source in cfg.sources.items():
        if source.enabled:
            scheduler.add_job(
                daemon.ingest,
                trigger(source.schedule, "UTC"),
                args=[name],
                id=f"ingest:{name}",
                name=f"ingest {name}",
                **common,
            )
    scheduler.add_job(daemon.recommend, trigger(s.recommend, s.timezone), id="recommend", name="recommend", **common)
    scheduler.add_job(
        daemon.report, trigger(s.report, cfg.report.timezone), id="report", name="weekly report", **common
    )
    missed = missed_report_week(scheduler.get_job("report").trigger, cfg.report.tz, now_utc())
    if missed is not None and not s.every_seconds:
        # the daemon may have been down at the last report time: on start, send what is missing of
        # that week's report (the delivery ledger skips whoever has it: nobody is mailed twice)
        scheduler.add_job(
            daemon.report,
            "date",
            args=[missed],
            id="report:catch-up",
            name=f"weekly report {missed} (catch-up)",
            **common,
        )
    alerts_cron = cfg.alerts.schedule if cfg.alerts is not None else None
    if alerts_cron:
        scheduler.add_job(daemon.alerts, trigger(alerts_cron, "UTC"), id="alerts", name="alerts", **common)
    if _webhook_module() is not None and cfg.api.webhooks:
        scheduler.add_job(daemon.feed, trigger(s.feed, s.timezone), id="feed", name="feed push", **common)
    else:
        log.info("feed push not scheduled: no webhook configured")
    return scheduler


def serve(cfg: Config, *, out: IO[str] | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT; exit 1 when another daemon holds the lock."""
    out = out or sys.stdout  # the stream at call time (the CLI's scrubbed one), not the one at import
    try:
        lock = acquire_lock(lock_path(cfg))
    except AlreadyRunning as exc:
        print(f"gpufinops serve: {exc}", file=sys.stderr)
        return 1
    try:
        closed = close_interrupted_runs(cfg)
        if closed:
            log.warning("closed %d job run(s) left running by a previous daemon as interrupted", closed)
        daemon = Daemon(cfg, cfg.jobs)
        scheduler = build_scheduler(cfg, daemon)

        def stop(signum: int, _frame: Any) -> None:
            log.warning("received %s: stopping after the running job", signal.Signals(signum).name)
            daemon.stopping.set()
            scheduler.shutdown(wait=False)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(f"gpufinops serve: {len(scheduler.get_jobs())} job(s) scheduled on {cfg.warehouse_path}", file=out)
        for job in scheduler.get_jobs():
            first = job.trigger.get_next_fire_time(None, datetime.now(UTC))
            print(f"  {job.id:<28} next {first:%Y-%m-%d %H:%M:%S %Z}  {job.trigger}", file=out)
        out.flush()
        scheduler.start()  # blocks until stop()
        _wait_for_running_jobs(scheduler)
        print("gpufinops serve: stopped", file=out)
        out.flush()
        return 0
    finally:
        lock.close()


def _wait_for_running_jobs(scheduler) -> None:
    """After shutdown(wait=False) from the signal handler: let the job in progress finish here, in
    the main thread, so its ledger row is written before the process exits."""
    # APScheduler 3's done-callback asks a cancelled future for its exception, which raises, and
    # concurrent.futures logs that as an ERROR with a traceback: expected here, so kept out of the log.
    logging.getLogger("concurrent.futures").addFilter(_drop_cancelled_callbacks)
    for executor in scheduler._executors.values():  # noqa: SLF001 - APScheduler 3 exposes no public join
        pool = getattr(executor, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # queued runs do not start after SIGTERM


def _drop_cancelled_callbacks(record: logging.LogRecord) -> bool:
    from concurrent.futures import CancelledError

    return not (record.exc_info and isinstance(record.exc_info[1], CancelledError))
