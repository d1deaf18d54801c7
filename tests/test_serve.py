"""`gpufinops serve` as a real process with second-level schedules: jobs fire and are recorded, a
failed ingest is retried, a second daemon is refused, SIGTERM stops it cleanly, and the weekly
report the daemon mails goes to each reader once although the report job fires again and again
and the daemon is restarted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs import serve, serve_settings
from gpufinops.jobs.report.weeks import previous_week
from gpufinops.warehouse import db as wdb
from tests.conftest import FOCUS_SAMPLE
from tests.smtp_loopback import Recorder, Server
from tests.toml_config import assert_refused, config_file, recipient, smtp_report

ROOT = Path(__file__).resolve().parent.parent
FINANCE, LEAD = "finance@example.com", "lead@example.com"


def write_config(tmp_path: Path, smtp_port: int, extra_jobs: str = "") -> Path:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.csv").write_text("a,b\n1,2\n")  # not FOCUS: every ingest of it fails
    return config_file(
        tmp_path,
        f"""
[sources.focus]
type = "focus_files"
path = "{FOCUS_SAMPLE}"

[sources.broken]
type = "focus_files"
path = "{broken / "*.csv"}"

[jobs]
every_seconds = 2          # test schedule: every job every 2 s
ingest_retries = 1
retry_backoff_seconds = 0.2
misfire_grace_seconds = 30
{extra_jobs}

{smtp_report(smtp_port, recipient(FINANCE, "finance"), recipient(LEAD, "lead", ["vision"]), retry_backoff_seconds=0.05)}
""",
    )


def start(config: Path, tmp_path: Path, name: str) -> subprocess.Popen:
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(config), "serve"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def rows(db_path: Path, sql: str) -> list[tuple]:
    """Read while the daemon runs: it holds the write lock only during a job (a load, its allocation and the
    results it stores for the dashboard: seconds, more on a loaded machine), so retry for up to 90 s."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with duckdb.connect(str(db_path), read_only=True) as con:
                return con.execute(sql).fetchall()
        except duckdb.Error:
            time.sleep(0.1)
    raise AssertionError(f"warehouse {db_path} stayed locked")


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"daemon exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=120)


@pytest.fixture
def smtp():
    recorder = Recorder()
    with Server(recorder) as port:
        yield recorder, port


@pytest.mark.slow
def test_daemon_runs_jobs_refuses_a_second_and_stops_on_sigterm(tmp_path, smtp):
    recorder, port = smtp
    config = write_config(tmp_path, port)
    db_path = tmp_path / "wh" / "gpufinops.duckdb"
    # a run left 'running' by a daemon that was killed: the next start closes it as interrupted
    db_path.parent.mkdir(parents=True)
    with duckdb.connect(str(db_path)) as con:
        wdb.migrate(con)
        con.execute("INSERT INTO job_runs VALUES ('stale', 'recommend', now(), NULL, 'running', NULL)").fetchall()
    first = start(config, tmp_path, "first")
    try:

        def fired() -> bool:
            jobs = {
                r[0] for r in rows(db_path, "SELECT job FROM job_runs WHERE status <> 'running' AND run_id <> 'stale'")
            }
            ingests = {r[0] for r in rows(db_path, "SELECT source FROM ingest_runs WHERE status <> 'running'")}
            failed = rows(db_path, "SELECT count(*) FROM ingest_runs WHERE source = 'broken' AND status = 'failed'")[0][
                0
            ]
            return {"recommend", "report"} <= jobs and {"focus", "broken"} <= ingests and failed >= 2

        wait_for(fired, 240, "every job to fire", first)
        second = subprocess.run(
            [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(config), "serve"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert "already runs" in second.stderr and str(first.pid) in second.stderr
        wait_for(
            lambda: (
                rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'report' AND status = 'succeeded'")[0][0] >= 2
            ),
            240,
            "a second report run",
            first,
        )
    finally:
        code = stop(first)
    output = (tmp_path / "first.log").read_text()
    assert code == 0, output
    assert "stopped" in output and "SIGTERM" in output
    assert rows(db_path, "SELECT count(*) FROM job_runs WHERE status = 'running'")[0][0] == 0
    assert rows(db_path, "SELECT count(*) FROM ingest_runs WHERE status = 'running'")[0][0] == 0
    assert rows(db_path, "SELECT status, error FROM job_runs WHERE run_id = 'stale'")[0][0] == "failed"
    assert "interrupted" in rows(db_path, "SELECT error FROM job_runs WHERE run_id = 'stale'")[0][0]
    # a failed ingest is retried: each attempt is its own ledger row with the error
    errors = rows(db_path, "SELECT error FROM ingest_runs WHERE source = 'broken' AND status = 'failed'")
    assert len(errors) >= 2 and all("missing mandatory FOCUS column" in e[0] for e in errors)
    assert rows(db_path, "SELECT count(*) FROM ingest_runs WHERE source = 'focus' AND status = 'succeeded'")[0][0] >= 1
    # the report job fired repeatedly, yet each reader got the week's report once
    week = str(previous_week(datetime.now(UTC), UTC))
    assert sorted(r.rcpt_tos[0] for r in recorder.received) == sorted([FINANCE, LEAD])
    assert all(week in r.message["Subject"] for r in recorder.received)

    # a restarted daemon (the lock is free again) still mails no one twice
    again = start(config, tmp_path, "again")
    try:
        before = rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'report' AND status = 'succeeded'")[0][0]
        wait_for(
            lambda: (
                rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'report' AND status = 'succeeded'")[0][0]
                > before
            ),
            240,
            "the restarted daemon's report run",
            again,
        )
    finally:
        assert stop(again) == 0
    assert len(recorder.received) == 2


def test_six_field_cron_fires_at_second_level(tmp_path, smtp):
    """A [jobs] cron with a seconds field (no every_seconds): the recommend job fires within seconds."""
    _, port = smtp
    config = write_config(tmp_path, port)
    text = config.read_text().replace(
        "every_seconds = 2          # test schedule: every job every 2 s", 'recommend = "*/2 * * * * *"'
    )
    config.write_text(text)
    db_path = tmp_path / "wh" / "gpufinops.duckdb"
    proc = start(config, tmp_path, "cron")
    try:
        wait_for(
            lambda: (
                db_path.exists()
                and rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'recommend' AND status <> 'running'")[0][0]
                >= 2
            ),
            240,
            "two recommend runs",
            proc,
        )
    finally:
        assert stop(proc) == 0
    # the report keeps its weekly cron: it ran once, the start-up catch-up of the report last due
    assert rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'report'")[0][0] == 1
    assert rows(db_path, "SELECT count(*) FROM job_runs WHERE job = 'recommend' AND status = 'succeeded'")[0][0] >= 2
    assert "recommend" in (tmp_path / "cron.log").read_text()


def test_schedules_come_from_the_registry_and_config(tmp_path):
    config = write_config(tmp_path, 25)
    config.write_text(
        config.read_text().replace(
            "every_seconds = 2          # test schedule: every job every 2 s",
            'recommend = "15 4 * * *"\nreport = "0 7 * * 1"',
        )
    )
    cfg = config_mod.load(config)
    scheduler = serve.build_scheduler(cfg, serve.Daemon(cfg, cfg.jobs))
    jobs = {job.id: job for job in scheduler.get_jobs()}
    # no [[api.webhooks]]: no feed push
    assert set(jobs) == {"ingest:focus", "ingest:broken", "recommend", "report", "report:catch-up", "alerts"}
    assert "hour='4', minute='15', second='0'" in str(jobs["recommend"].trigger)
    # crontab's weekday 1 is Monday (APScheduler 3 counts from Monday = 0: translated, not passed through)
    assert jobs["report"].trigger.get_next_fire_time(None, datetime(2026, 11, 30, 9, tzinfo=UTC)) == datetime(
        2026, 12, 7, 7, tzinfo=UTC
    )
    assert cfg.sources["focus"].schedule.split()[1] in str(jobs["ingest:focus"].trigger)
    assert all(job.max_instances == 1 and job.coalesce and job.misfire_grace_time == 30 for job in jobs.values())


@pytest.mark.parametrize(
    "jobs_section, key",
    [
        ('recommend = "61 * * * *"', "jobs.recommend"),
        ('report = "*/2 * * * * * *"', "jobs.report"),
        ("every_seconds = 0", "jobs.every_seconds"),
        ("retry_backoff_seconds = -1", "jobs.retry_backoff_seconds"),
        ('timezone = "Nowhere/City"', "jobs.timezone"),
        ("recommnd = 1", "jobs.recommnd"),
    ],
)
def test_bad_jobs_config_names_the_key(tmp_path, jobs_section, key):
    assert_refused(tmp_path, f"[jobs]\n{jobs_section}\n", key)


@pytest.mark.parametrize(
    "crontab, expected",
    [
        ("1", "mon"),
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon-fri"),
        ("0-5", "sun,mon-fri"),
        ("*", "*"),
        ("*/2", "sun,tue,thu,sat"),
        ("1,3,5", "mon,wed,fri"),
        ("sat", "sat"),
    ],
)
def test_crontab_weekdays_keep_their_crontab_meaning(crontab, expected):
    assert serve_settings.crontab_weekdays(crontab) == expected


def test_a_report_missed_while_the_daemon_was_down_is_caught_up(tmp_path):
    trigger = serve_settings.cron_trigger("0 8 * * 1", "UTC")
    monday_late = datetime(2026, 11, 30, 10, tzinfo=UTC)  # Monday 10:00: 08:00 was missed
    assert str(serve.missed_report_week(trigger, UTC, monday_late)) == "2026-W48"
    thursday = datetime(2026, 12, 3, 10, tzinfo=UTC)
    assert str(serve.missed_report_week(trigger, UTC, thursday)) == "2026-W48"
    monday_early = datetime(2026, 11, 30, 7, tzinfo=UTC)  # before 08:00: last week's run was due
    assert str(serve.missed_report_week(trigger, UTC, monday_early)) == "2026-W47"
    config = write_config(tmp_path, 25)
    config.write_text(config.read_text().replace("every_seconds = 2          # test schedule: every job every 2 s", ""))
    cfg = config_mod.load(config)
    jobs = {job.id: job for job in serve.build_scheduler(cfg, serve.Daemon(cfg, cfg.jobs)).get_jobs()}
    assert jobs["report:catch-up"].args[0] == serve.missed_report_week(jobs["report"].trigger, UTC, datetime.now(UTC))


def test_the_feed_push_is_scheduled_when_webhooks_are_configured(tmp_path):
    config = write_config(tmp_path, 25)
    config.write_text(
        config.read_text() + '\n[[api.webhooks]]\nurl = "http://127.0.0.1:9/hook"\nsecret_env = "TEST_WEBHOOK_SECRET"\n'
    )
    cfg = config_mod.load(config)
    jobs = {job.id for job in serve.build_scheduler(cfg, serve.Daemon(cfg, cfg.jobs)).get_jobs()}
    assert "feed" in jobs
