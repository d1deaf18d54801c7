"""Deliver the notifications the alert ledger holds: e-mail, Slack, the signed webhook.

Routing (``route``): a team's alerts go to the ``[[report.recipients]]`` leads of that team (an
alert over several teams only to a lead of all of them) and to every finance recipient; an alert of
no team (a budget over everything, stale data) to finance only. A Slack or webhook channel with
``teams`` gets the alerts of those teams; without, every alert.

Each notification walks ``pending`` → ``sending`` → ``sent`` (or ``failed``, retried by the next
run). E-mail is sent with the weekly report's SMTP client (jobs.report.deliver.smtp_send):
``sending`` is written once the server accepted the recipient, just before DATA, so a send that
timed out or lost its connection in DATA (or a process that died there) leaves ``sending``: its
state is unknown (the server may have queued it). It is not resent before
``[report] sending_timeout_minutes`` has passed, then resent with the SAME Message-ID (the
notification's), which receivers deduplicate on. A Slack post left ``sending`` is treated the same
way (Slack cannot deduplicate: at worst one duplicate post, never a lost one). The signed webhook
carries the notification id as ``delivery_id`` / ``X-Gpufinops-Delivery``, so a ``sending`` one is
posted again at once with the same id and the receiver deduplicates. A webhook is delivered only
on a 2xx to the POST itself (jobs.webhook: a redirect is never followed and is a failure).

Every notification is sent on its own: an error in one (a server refusing, a header it cannot
carry, a bug) is recorded on that notification as ``failed`` and the others are still sent.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from gpufinops.ingest.core.scrub import scrub
from gpufinops.jobs import webhook as signed
from gpufinops.jobs.alerts import render
from gpufinops.jobs.alerts.settings import AlertConfig, Channel
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.jobs.report import deliver as mail
from gpufinops.warehouse import alerts_queries, alerts_store, db

log = logging.getLogger("gpufinops.alerts")


@dataclass
class Delivered:
    sent: list[str] = field(default_factory=list)  # "channel target" per notification
    failed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # left 'sending' by a process that died
    cancelled: list[str] = field(default_factory=list)
    interrupted: bool = False


def _now() -> datetime:
    return datetime.now(UTC)


def route(cfg: Config) -> Callable[[tuple[str, ...]], list[tuple[str, str]]]:
    """teams of an alert → [(channel, target)] (see the module doc)."""
    alerts: AlertConfig = cfg.alerts
    recipients = cfg.report.recipients if alerts.email else ()

    def targets(teams: tuple[str, ...]) -> list[tuple[str, str]]:
        out = []
        for r in recipients:
            if r.role == "finance" or (teams and set(teams) <= set(r.teams or ())):
                out.append(("email", r.email.lower()))
        for channel in alerts.channels:
            if channel.teams is None or (teams and set(teams) <= set(channel.teams)):
                out.append((channel.kind, channel.target))
        return out

    return targets


def _record(cfg: Config, nid: str, status: str, **kwargs) -> None:
    if kwargs.get("error"):  # an error text never keeps a secret
        kwargs["error"] = " ".join(scrub(kwargs["error"], cfg.secrets()).split())[:1000]
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        alerts_store.mark(con, nid, status, _now(), **kwargs)


def _send_email(cfg: Config, note: dict, rows: list[dict], out: Delivered, stop: threading.Event) -> None:
    settings = cfg.report
    label = f"email {note['target']}"
    message = render.email(
        note["notification_id"],
        note["event"],
        rows,
        settings.sender,
        note["target"],
        dashboard_url=settings.dashboard_url,
    )
    payload = message.as_bytes()
    delay = settings.retry_backoff_seconds
    for attempt in range(1, settings.send_attempts + 1):
        reached: list[bool] = []

        def accepting(reached: list[bool] = reached) -> None:  # bound now: B023
            _record(cfg, note["notification_id"], "sending", attempt=True)
            reached.append(True)

        try:
            mail.smtp_send(settings, note["target"], payload, accepting)
        except mail.StateUnknown as exc:
            _record(
                cfg,
                note["notification_id"],
                "sending",
                error=f"state unknown ({exc}): resent with the same Message-ID after "
                f"{settings.sending_timeout_minutes:g} min unless it is confirmed",
            )
            log.warning(
                "alert %s to %s: state unknown: %s", note["notification_id"], label, mail._scrub(str(exc), settings)
            )
            out.unknown.append(label)
            return
        except mail.SendFailed as exc:
            error = mail._scrub(str(exc), settings)
            _record(cfg, note["notification_id"], "failed", attempt=not reached, error=error)
            log.warning("alert %s to %s: attempt %d failed: %s", note["notification_id"], label, attempt, error)
            if attempt == settings.send_attempts or stop.wait(delay):
                out.failed.append(label)
                out.interrupted = stop.is_set()
                return
            delay *= 2
            continue
        _record(cfg, note["notification_id"], "sent", message_id=message["Message-ID"])
        out.sent.append(label)
        return


def _send_http(
    cfg: Config,
    channel: Channel,
    note: dict,
    rows: list[dict],
    out: Delivered,
    stop: threading.Event,
    environ: dict[str, str],
    sleep: Callable[[float], None],
) -> None:
    label = f"{channel.kind} {channel.target}"
    secret_env = channel.url_env if channel.kind == "slack" else channel.secret_env
    assert secret_env is not None  # alerts.settings: a Slack channel has url_env, a webhook secret_env
    secret = environ[secret_env]  # checked up front
    nid = note["notification_id"]
    for number in range(1, channel.max_attempts + 1):
        if channel.kind == "slack":
            url, body = secret, json.dumps(render.slack(note["event"], rows, cfg.report.dashboard_url)).encode()
            headers = {"Content-Type": "application/json", "User-Agent": "gpufinops-alerts/1"}
        else:
            assert channel.url is not None  # alerts.settings: a webhook has its url
            url = channel.url
            body = json.dumps(render.webhook(nid, note["event"], rows, _now()), separators=(",", ":")).encode()
            stamp = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "gpufinops-alerts/1",
                signed.TIMESTAMP_HEADER: stamp,
                signed.SIGNATURE_HEADER: signed.sign(secret.encode(), stamp, body),
                signed.DELIVERY_HEADER: nid,
            }
        _record(cfg, nid, "sending", attempt=True)
        attempt = signed._post(url, body, headers, channel.timeout_s)
        if attempt.delivered:
            _record(cfg, nid, "sent", http_status=attempt.http_status)
            out.sent.append(label)
            return
        error = scrub(attempt.error or "", [secret])
        final = not attempt.retryable or number == channel.max_attempts
        _record(cfg, nid, "failed", http_status=attempt.http_status, error=error)
        log.warning("alert %s to %s: attempt %d/%d failed: %s", nid, label, number, channel.max_attempts, error)
        if final or stop.is_set():
            out.failed.append(label)
            out.interrupted = stop.is_set()
            return
        sleep(min(signed.BACKOFF_BASE_S * 2 ** (number - 1), signed.BACKOFF_MAX_S))


def deliver_pending(
    cfg: Config,
    *,
    stop: threading.Event | None = None,
    environ: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivered:
    """Send every notification the ledger holds that is not done (see the module doc)."""
    stop = stop or threading.Event()
    environ = dict(os.environ if environ is None else environ)
    out = Delivered()
    with db.reader(cfg.warehouse_path) as con:
        pending = alerts_queries.pending_notifications(con).to_dicts()
        ids = sorted({a for n in pending for a in n["alert_ids"]})
        rows = {r["alert_id"]: r for r in alerts_queries.alert_rows(con, ids).to_dicts()} if ids else {}
    channels = {c.target: c for c in cfg.alerts.channels}
    emails = {r.email.lower() for r in cfg.report.recipients} if cfg.alerts.email else set()
    for target in sorted({n["target"] for n in pending if n["target"] in channels}):
        channel = channels[target]  # a missing secret is a config error before anything is sent
        env = channel.url_env if channel.kind == "slack" else channel.secret_env
        if not environ.get(env or ""):
            raise ConfigError(
                f"{channel.key}.{'url_env' if channel.kind == 'slack' else 'secret_env'}: "
                f"environment variable {env} is not set"
            )
    stale_before = _now() - timedelta(minutes=cfg.report.sending_timeout_minutes)
    run = _Pass(cfg, rows, channels, emails, stale_before, out, stop, environ, sleep)
    for note in pending:
        if stop.is_set():
            out.interrupted = True
            break
        try:
            _deliver_one(run, note)
        except Exception as exc:  # one bad notification never blocks the others: recorded on it, next run retries
            label = f"{note['channel']} {note['target']}"
            error = f"{type(exc).__name__}: {exc}"
            log.warning("alert %s to %s: not sent: %s", note["notification_id"], label, scrub(error, cfg.secrets()))
            log.debug("traceback of the failed notification", exc_info=exc)
            _record(cfg, note["notification_id"], "failed", error=f"not sent: {error}")
            out.failed.append(label)
    return out


@dataclass(frozen=True)
class _Pass:
    """What one ``deliver_pending`` pass shares across its notifications."""

    cfg: Config
    rows: dict[str, dict]  # the alerts the notifications name, by id
    channels: dict[str, Channel]  # the configured channels, by target
    emails: set[str]  # the recipients an email notification may still go to
    stale_before: datetime  # a 'sending' row older than this is sent again
    out: Delivered
    stop: threading.Event
    environ: dict[str, str]
    sleep: Callable[[float], None]


def _deliver_one(run: _Pass, note: dict) -> None:
    """One notification, on its own (see ``deliver_pending``)."""
    cfg, rows, channels, emails, out = run.cfg, run.rows, run.channels, run.emails, run.out
    stale_before, stop, environ, sleep = run.stale_before, run.stop, run.environ, run.sleep
    label = f"{note['channel']} {note['target']}"
    channel = channels.get(note["target"])
    if (note["channel"] == "email" and note["target"] not in emails) or (
        note["channel"] != "email" and channel is None
    ):
        _record(cfg, note["notification_id"], "cancelled", error="the target is no longer configured")
        out.cancelled.append(label)
        return
    if note["status"] == "sending" and note["channel"] != "webhook":
        if not _older(note.get("updated_at"), stale_before):
            log.warning(
                "alert notification %s to %s: a send ended mid-delivery less than %g min ago; not resent yet "
                "(it may have arrived)",
                note["notification_id"],
                label,
                cfg.report.sending_timeout_minutes,
            )
            out.unknown.append(label)
            return
        log.warning(
            "alert notification %s to %s: left 'sending' since %s; sending again with the same %s",
            note["notification_id"],
            label,
            note.get("updated_at"),
            "Message-ID (receivers deduplicate on it)" if note["channel"] == "email" else "content",
        )
    alert_rows = [rows[a] for a in note["alert_ids"] if a in rows]
    if note["channel"] == "email":
        _send_email(cfg, note, alert_rows, out, stop)
    elif channel is not None:  # always: a target no longer configured was cancelled above
        _send_http(cfg, channel, note, alert_rows, out, stop, environ, sleep)


def _older(updated: datetime | None, moment: datetime) -> bool:
    if updated is None:
        return True
    return (updated if updated.tzinfo else updated.replace(tzinfo=UTC)) < moment
