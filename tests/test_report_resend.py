"""Deliveries left ``sending`` are resent after the timeout with the same Message-ID; ``--send`` exits 1
while anyone is unsent, naming them; SMTP AUTH never goes out without TLS unless allowed."""

from __future__ import annotations

import logging

import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.report import deliver
from gpufinops.jobs.report.cli import default_week
from tests.conftest import query
from tests.smtp_loopback import Recorder, Server
from tests.test_report import FINANCE, RESEARCH, VISION, cli, make_config


def _age(db_path, week: str, recipient: str, minutes: int) -> None:
    import duckdb

    with duckdb.connect(str(db_path)) as con:
        con.execute(
            "UPDATE report_deliveries SET status = 'sending', updated_at = now() - to_minutes(?) "
            "WHERE week = ? AND recipient = ?",
            [minutes, week, recipient],
        )


def test_a_delivery_left_sending_is_resent_after_the_timeout_with_the_same_message_id(report_demo, tmp_path):
    recorder = Recorder()
    with Server(recorder) as port:
        config = make_config(report_demo, tmp_path, port)
        cfg = config_mod.load(config)
        week = str(default_week(cfg))
        assert len(deliver.send_weekly(cfg, default_week(cfg)).sent) == 3
        first_id = recorder.to(VISION)[0]["Message-ID"]
        _age(cfg.warehouse_path, week, VISION, minutes=2)  # a process died mid-DATA two minutes ago
        fresh = cli(config, "report", "weekly", "--week", week, "--send")
        assert fresh.returncode == 1 and f"{VISION} (unknown)" in fresh.stderr, fresh.stderr
        assert len(recorder.to(VISION)) == 1  # not resent yet: it may have been delivered
        _age(cfg.warehouse_path, week, VISION, minutes=20)  # past sending_timeout_minutes (15)
        stale = cli(config, "report", "weekly", "--week", week, "--send")
    assert stale.returncode == 0, stale.stdout + stale.stderr
    assert f"{VISION:<40} sent" in stale.stdout and stale.stdout.count("already sent") == 2
    resent = recorder.to(VISION)
    assert len(resent) == 2 and resent[1]["Message-ID"] == first_id  # servers de-duplicate on it
    assert {a: len(recorder.to(a)) for a in (FINANCE, RESEARCH)} == {FINANCE: 1, RESEARCH: 1}
    status = dict(query(cfg.warehouse_path, "SELECT recipient, status FROM report_deliveries WHERE week = ?", [week]))
    assert set(status.values()) == {"sent"}


def test_send_exits_1_naming_whoever_is_unsent(report_demo, tmp_path):
    recorder = Recorder(refuse={RESEARCH: ["554 5.7.1 rejected by policy"] * 3})
    with Server(recorder) as port:
        config = make_config(report_demo, tmp_path, port, attempts=1)
        result = cli(config, "report", "weekly", "--week", str(default_week(config_mod.load(config))), "--send")
    assert result.returncode == 1
    assert "1 recipient(s) not sent" in result.stderr and f"{RESEARCH} (failed)" in result.stderr, result.stderr


def test_smtp_auth_without_tls_is_refused_unless_allowed(report_demo, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TEST_SMTP_USER", "mailer")
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "pa55-w0rd-secret")
    recorder = Recorder()
    with Server(recorder, users={"mailer": "pa55-w0rd-secret"}) as port:
        config = make_config(report_demo, tmp_path, port, auth=True)
        text = config.read_text().replace("smtp_allow_plaintext_auth = true\n", "")
        config.write_text(text)
        with pytest.raises(
            config_mod.ConfigError,
            match="report.smtp_starttls: false with smtp_user_env set would send the SMTP password in plain text",
        ):
            config_mod.load(config)
        refused = cli(config, "report", "weekly", "--send")
        assert refused.returncode == 2 and "smtp_allow_plaintext_auth" in refused.stderr
        config.write_text(
            text.replace("smtp_starttls = false", "smtp_starttls = false\nsmtp_allow_plaintext_auth = true")
        )
        cfg = config_mod.load(config)
        caplog.set_level(logging.WARNING, logger="gpufinops.report")
        assert len(deliver.send_weekly(cfg, default_week(cfg)).sent) == 3
    assert "without TLS (smtp_allow_plaintext_auth = true)" in caplog.text
    assert "pa55-w0rd-secret" not in caplog.text and recorder.logins


def test_a_server_that_never_answers_data_leaves_unknown_then_resends_the_same_message_id(report_demo, tmp_path):
    recorder = Recorder(stall={VISION})  # aiosmtpd takes VISION's message and never answers its DATA
    with Server(recorder) as port:
        config = make_config(report_demo, tmp_path, port, attempts=1)
        config.write_text(config.read_text().replace("smtp_timeout_seconds = 20", "smtp_timeout_seconds = 1"))
        cfg = config_mod.load(config)
        week = str(default_week(cfg))
        stalled = cli(config, "report", "weekly", "--week", week, "--send")
        assert stalled.returncode == 1 and f"{VISION} (unknown)" in stalled.stderr, stalled.stdout + stalled.stderr
        recorder.release.set()
        recorder.stall.clear()
        assert {a: len(recorder.to(a)) for a in (FINANCE, RESEARCH)} == {FINANCE: 1, RESEARCH: 1}  # not blocked
        first_id = recorder.to(VISION)[0]["Message-ID"]
        _age(cfg.warehouse_path, week, VISION, minutes=20)  # past sending_timeout_minutes (15)
        again = cli(config, "report", "weekly", "--week", week, "--send")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [m["Message-ID"] for m in recorder.to(VISION)] == [first_id, first_id]
