"""`gpufinops serve` runs the alert rules after every cost or metrics ingest and on their schedule:
the daemon's own job methods, driven directly (tests/test_serve.py runs the real process), with a
real FOCUS file ingested and the alert mailed through aiosmtpd on loopback."""

from __future__ import annotations

from pathlib import Path

from gpufinops.jobs import config as config_mod
from gpufinops.jobs import serve
from tests.alert_fleet import FINANCE, write_config
from tests.conftest import FOCUS_SAMPLE, query
from tests.smtp_loopback import Recorder, Server

SOURCES = f"""
[sources.focus]
type = "focus_files"
path = "{FOCUS_SAMPLE}"

[sources.gcp_prices]
type = "gcp_price_history"
path = "{Path(__file__).parent / "data" / "gcp-pricing-cyclenerd" / "gcp_gpu_machine_price_changes.csv"}"

[[budgets]]
name = "sample"
amount = 1
"""


def test_a_cost_ingest_runs_the_alert_rules_and_mails_what_opened(tmp_path):
    recorder = Recorder()
    with Server(recorder) as port:
        config = write_config(tmp_path, smtp_port=port, budgets=SOURCES, alerts='schedule = "*/10 * * * *"')
        cfg = config_mod.load(config)
        daemon = serve.Daemon(cfg, cfg.jobs)
        daemon.ingest("gcp_prices")  # a price load: the rules have nothing new to see
        assert query(cfg.warehouse_path, "SELECT count(*) FROM job_runs WHERE job = 'alerts'")[0][0] == 0
        daemon.ingest("focus")  # a cost load: the rules run right after it
        daemon.ingest("focus")  # unchanged files: skipped, no alert run
        jobs = query(cfg.warehouse_path, "SELECT job, status FROM job_runs ORDER BY started_at")
        scheduler = serve.build_scheduler(cfg, daemon)
    assert jobs == [("alerts", "succeeded")]
    assert query(cfg.warehouse_path, "SELECT DISTINCT rule, scope FROM alerts") == [("budget", "sample")]
    assert len(recorder.to(FINANCE)) == 1 and "sample" in recorder.to(FINANCE)[0]["Subject"]
    job = scheduler.get_job("alerts")
    assert job is not None and "*/10" in str(job.trigger)
