"""Deliver the weekly report: SMTP once per (week, recipient), recorded in ``report_deliveries``.

The ledger row walks ``failed`` (retryable) → ``sending`` → ``sent``. A recipient whose row is
``sent`` is never mailed again, so a re-run or a restarted daemon mails only whoever is left.
``sending`` is written only after the server accepted sender and recipient, just before DATA; a row
still ``sending`` means the process died (or the connection dropped) while the server was taking
the message, which it may have queued. Such a row younger than ``sending_timeout_minutes`` is left
alone (unknown); an older one is sent again with the same Message-ID (stable per week, recipient
and scope), which SMTP servers and mail clients de-duplicate on. A refusal (4xx/5xx) is ``failed``,
retried with backoff within the run and again by the next run. Credentials come from the
environment variables the config names; AUTH without TLS is refused unless
``smtp_allow_plaintext_auth = true`` (then it warns).
"""

from __future__ import annotations

import contextlib
import logging
import smtplib
import ssl
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpufinops.ingest.core.scrub import scrub
from gpufinops.jobs import run_lock
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.jobs.report import mime
from gpufinops.jobs.report.render import Report, render
from gpufinops.jobs.report.settings import Recipient, ReportSettings
from gpufinops.jobs.report.weeks import Week
from gpufinops.warehouse import db, queries

log = logging.getLogger("gpufinops.report")

REPORT = "weekly"


@dataclass
class Outcome:
    week: Week
    sent: list[str] = field(default_factory=list)
    already_sent: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # left 'sending': may have been delivered
    interrupted: bool = False


class SendFailed(RuntimeError):
    """The server refused (or never took) the message: safe to retry."""


class StateUnknown(RuntimeError):
    """The connection ended while the server was taking the message: not retried."""


def _now() -> datetime:
    return datetime.now(UTC)


def ledger(cfg: Config, week: Week) -> dict[str, dict]:
    """recipient (lower-case) → its report_deliveries row for this week."""
    with db.writer(
        cfg.warehouse_path, memory_limit=cfg.memory_limit, create=False
    ) as con:  # writer: migrates a v3 file
        frame = queries.report_delivery_status(con, REPORT, str(week))
    return {row["recipient"].lower(): row for row in frame.iter_rows(named=True)}


def _record(
    cfg: Config,
    week: Week,
    recipient: str,
    status: str,
    *,
    attempt: bool = False,
    message_id: str | None = None,
    error: str | None = None,
) -> None:
    """Upsert one recipient's row (no key index on the table: update, else insert, in one transaction)."""
    key = [REPORT, str(week), recipient.lower()]
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit, create=False) as con:
        con.execute("BEGIN TRANSACTION")
        found = con.execute(
            "SELECT count(*) FROM report_deliveries WHERE report = ? AND week = ? AND recipient = ?", key
        ).fetchall()[0][0]
        if not found:
            con.execute(
                "INSERT INTO report_deliveries VALUES (?, ?, ?, ?, 0, NULL, NULL, NULL, ?)", [*key, status, _now()]
            ).fetchall()
        con.execute(
            """UPDATE report_deliveries SET status = ?, attempts = attempts + ?,
                              message_id = coalesce(?, message_id), error = ?,
                              sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END, updated_at = ?
                       WHERE report = ? AND week = ? AND recipient = ?""",
            [status, 1 if attempt else 0, message_id, error, status, _now(), _now(), *key],
        ).fetchall()
        con.execute("COMMIT")


def _scrub(text: str, settings: ReportSettings) -> str:
    try:
        secrets = [v for v in (settings.credentials() or ()) if v and len(v) >= 4]
    except ConfigError:  # credentials missing: nothing to scrub
        secrets = []
    return " ".join(scrub(text, secrets).split())[:1000]  # the one scrubber (ingest.core.scrub)


def _text(reply: bytes | str) -> str:
    """An SMTP reply as text (smtplib gives bytes; its exceptions are typed bytes or str)."""
    return reply.decode(errors="replace") if isinstance(reply, bytes) else reply


def smtp_send(settings: ReportSettings, recipient: str, payload: bytes, on_accepting) -> None:
    """One SMTP transaction; ``on_accepting`` runs after RCPT is accepted, just before DATA."""
    try:
        smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.smtp_timeout_seconds)
    except OSError as exc:
        raise SendFailed(f"cannot connect to {settings.smtp_host}:{settings.smtp_port}: {exc}") from exc
    try:
        smtp.ehlo()
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
        credentials = settings.credentials()
        if credentials and not settings.smtp_starttls:
            if not settings.smtp_allow_plaintext_auth:
                raise SendFailed(
                    f"refusing to send the SMTP password to {settings.smtp_host}:{settings.smtp_port} "
                    f"without TLS (set smtp_starttls = true, or smtp_allow_plaintext_auth = true)"
                )
            log.warning(
                "SMTP AUTH to %s:%s without TLS (smtp_allow_plaintext_auth = true): the password crosses "
                "the network in plain text",
                settings.smtp_host,
                settings.smtp_port,
            )
        if credentials:
            smtp.login(*credentials)
        code, reply = smtp.mail(_address(settings.sender))
        if code != 250:
            raise SendFailed(f"sender refused: {code} {reply.decode(errors='replace')}")
        code, reply = smtp.rcpt(recipient)
        if code not in (250, 251):
            raise SendFailed(f"recipient refused: {code} {reply.decode(errors='replace')}")
        on_accepting()
        try:
            code, reply = smtp.data(payload)
        except smtplib.SMTPDataError as exc:  # DATA itself refused: nothing was sent
            raise SendFailed(f"message refused: {exc.smtp_code} {_text(exc.smtp_error)}") from exc
        except (smtplib.SMTPServerDisconnected, OSError) as exc:
            raise StateUnknown(f"connection lost while the server took the message: {exc}") from exc
        if code != 250:  # the server answered after the message: it did not take it
            raise SendFailed(f"message refused: {code} {reply.decode(errors='replace')}")
    except smtplib.SMTPException as exc:
        raise SendFailed(f"{type(exc).__name__}: {exc}") from exc
    finally:
        with contextlib.suppress(Exception):
            smtp.quit()


def _address(sender: str) -> str:
    return sender.split("<")[-1].rstrip(">").strip() if "<" in sender else sender


def _send_one(
    cfg: Config, week: Week, recipient: Recipient, report: Report, outcome: Outcome, stop: threading.Event
) -> None:
    settings: ReportSettings = cfg.report
    message = mime.build(report, settings.sender, recipient.email)
    payload = message.as_bytes()
    delay = settings.retry_backoff_seconds
    for attempt in range(1, settings.send_attempts + 1):
        reached_data: list[bool] = []

        def accepting(reached_data: list[bool] = reached_data) -> None:  # bound now: B023
            _record(cfg, week, recipient.email, "sending", attempt=True, message_id=message["Message-ID"])
            reached_data.append(True)

        try:
            smtp_send(settings, recipient.email, payload, accepting)
        except StateUnknown as exc:
            _record(
                cfg,
                week,
                recipient.email,
                "sending",
                error=f"state unknown, not resent automatically: {_scrub(str(exc), settings)}",
            )
            outcome.unknown.append(recipient.email)
            return
        except SendFailed as exc:
            error = _scrub(str(exc), settings)
            _record(cfg, week, recipient.email, "failed", attempt=not reached_data, error=error)
            log.warning("weekly report %s to %s: attempt %d failed: %s", week, recipient.email, attempt, error)
            if attempt == settings.send_attempts or stop.wait(delay):
                outcome.failed.append(recipient.email)
                outcome.interrupted = stop.is_set()
                return
            delay *= 2
            continue
        _record(cfg, week, recipient.email, "sent", message_id=message["Message-ID"])
        outcome.sent.append(recipient.email)
        log.info("weekly report %s sent to %s", week, recipient.email)
        return


def send_weekly(
    cfg: Config, week: Week, *, stop: threading.Event | None = None, now: datetime | None = None
) -> Outcome:
    """Mail the week's report to every configured recipient not yet mailed; see the module doc."""
    stop = stop or threading.Event()
    settings: ReportSettings = cfg.report
    outcome = Outcome(week)
    if not cfg.warehouse_path.exists():
        raise db.missing(cfg.warehouse_path)
    with run_lock.waiting_lock(cfg, "report", "report delivery"):  # the daemon and a `report weekly --send` by hand
        done = ledger(cfg, week)
        pending = []
        stale_before = _now() - timedelta(minutes=settings.sending_timeout_minutes)
        for recipient in settings.recipients:
            row = done.get(recipient.email.lower())
            if row and row["status"] == "sent":
                outcome.already_sent.append(recipient.email)
            elif row and row["status"] == "sending" and not _older(row, stale_before):
                log.warning(
                    "weekly report %s to %s: a send ended mid-transaction less than %g min ago; not resent "
                    "yet (it may have been delivered)",
                    week,
                    recipient.email,
                    settings.sending_timeout_minutes,
                )
                outcome.unknown.append(recipient.email)
            else:
                if row and row["status"] == "sending":
                    log.warning(
                        "weekly report %s to %s: left 'sending' since %s; sending again with the same "
                        "Message-ID (servers de-duplicate on it)",
                        week,
                        recipient.email,
                        row.get("updated_at"),
                    )
                pending.append(recipient)
        reports: dict[tuple, Report] = {}
        for recipient in pending:
            if stop.is_set():
                outcome.interrupted = True
                break
            key = (recipient.role, recipient.teams)
            try:  # one recipient's failure (a bug, a header it cannot carry) never blocks the others
                if key not in reports:
                    with db.reader(cfg.warehouse_path) as con:
                        reports[key] = render(
                            con,
                            week,
                            recipient.scope,
                            tz=settings.timezone,
                            dashboard_url=settings.dashboard_url,
                            now=now,
                        )
                _send_one(cfg, week, recipient, reports[key], outcome, stop)
            except Exception as exc:
                error = _scrub(f"not sent: {type(exc).__name__}: {exc}", settings)
                log.warning("weekly report %s to %s: %s", week, recipient.email, error)
                _record(cfg, week, recipient.email, "failed", error=error)
                outcome.failed.append(recipient.email)
    return outcome


def _older(row: dict, moment: datetime) -> bool:
    updated = row.get("updated_at")
    if updated is None:
        return True
    if updated.tzinfo is None:
        updated = updated.replace(tzinfo=UTC)
    return updated < moment


def write_file(report: Report, path: Path, settings: ReportSettings, recipient: str | None = None) -> list[Path]:
    """``--out``: ``.eml`` is the MIME message exactly as mailed; any other name gets the same HTML
    with its images inlined (opens in a browser) and the CSV attachment written beside it."""
    from gpufinops.jobs import files  # the one file writer: refused targets, temp beside, rename

    if path.suffix.lower() == ".eml":
        files.write_bytes(path, mime.build(report, settings.sender, recipient).as_bytes(), make_parents=True)
        return [path]
    csv_path = path.with_name(report.csv_name)
    files.write_text(path, report.standalone_html(), make_parents=True)
    files.write_bytes(csv_path, report.csv_bytes, make_parents=True)
    return [path, csv_path]
