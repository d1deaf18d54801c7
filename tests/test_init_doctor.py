"""`gpufinops init` writes a config for the sources a user picks; `gpufinops doctor` checks it against
the real servers those sources name, here on loopback: moto's S3 and EC2 server, the bqemulator
BigQuery API, a Cloud Billing Catalog REST server, a DCGM exporter endpoint, a real Prometheus
scraping it, and nvidia-smi log files. Each check is one line with its fix; exit 1 when one fails.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gpufinops.interfaces import cli, doctor, init_cmd
from gpufinops.jobs import config
from tests import gpu_series as gs
from tests.aws_loopback import moto_s3, use_dummy_credentials
from tests.bq_emulator import DATASET, PROJECT
from tests.gcp_loopback import catalog_server
from tests.prometheus_fixture import ExporterServer, PrometheusServer, requires_prometheus

NVIDIA_SMI = Path(__file__).parent / "data" / "nvidia-smi"
DCGM_BODY = gs.exposition(gs.samples()[:40])
LIVE_BODY = (
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-doctor-0",modelName="NVIDIA L40S",Hostname="node-1"} 37\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-doctor-1",modelName="NVIDIA L40S",Hostname="node-1"} 3\n'
)


def init(tmp_path: Path, *flags: str) -> Path:
    out = tmp_path / "gpufinops.toml"
    args = cli._parser().parse_args(["init", "--out", str(out), "--yes", *flags])
    assert init_cmd.run(args) == 0
    return out


def run_doctor(path: Path, timeout: float = 5.0) -> tuple[int, dict[str, str]]:
    """The exit status and each check's printed line (by check name)."""
    buffer = io.StringIO()
    status = doctor.run(str(path), timeout=timeout, out=buffer)
    lines: dict[str, str] = {}
    for line in buffer.getvalue().splitlines():
        found = re.match(r"^(ok|warn|FAIL|skip)\s+(\S+(?: \S+)?)\s{2,}(.*)$", line)
        if found:
            lines[found.group(2)] = f"{found.group(1)} {found.group(3)}"
        elif lines and line.startswith(" "):  # a wrapped detail
            last = next(reversed(lines))
            lines[last] += " " + line.strip()
    return status, lines


@pytest.fixture
def quiet_env(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per check, however long
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google-auth: no metadata-server probe
    use_dummy_credentials(monkeypatch)


def test_init_writes_a_commented_config_that_loads_for_every_source_kind(tmp_path):
    path = init(
        tmp_path,
        "--aws-cur-bucket",
        "acme-cur",
        "--aws-cur-prefix",
        "cur2/acme",
        "--aws-region",
        "eu-west-1",
        "--aws-storage-prefix",
        "s3://acme-ckpt/train/",
        "--bigquery-table",
        "acme-billing.billing.gcp_billing_export_resource_v1_X",
        "--dcgm-target",
        "http://gpu-1:9400/metrics",
        "--dcgm-target",
        "http://gpu-2:9400/metrics",
        "--prometheus-url",
        "http://prometheus:9090",
        "--nvidia-smi-path",
        "logs/*.csv",
        "--focus-path",
        "focus/*.parquet",
        "--onprem-group",
        "name=hgx nodes=gpu-1,gpu-2 gpu_model=A100-SXM4-80GB gpus_per_node=8 server_price_usd=60000",
    )
    text = path.read_text()
    cfg = config.load(path, environ={})
    assert {s.type for s in cfg.sources.values()} == {
        "aws_cur",
        "aws_spot_prices",
        "aws_pricing",
        "aws_spot_advisor",
        "aws_storage",
        "gcp_billing_export",
        "gcp_catalog",
        "dcgm_exporter",
        "prometheus",
        "nvidia_smi_csv",
        "focus_files",
        "onprem",
    }
    raw = tomllib.loads(text)["sources"]
    assert raw["aws_cur"] == {"type": "aws_cur", "bucket": "acme-cur", "prefix": "cur2/acme", "region": "eu-west-1"}
    assert raw["gcp_billing"]["table"] == "gcp_billing_export_resource_v1_X"
    assert raw["storage"]["prefixes"] == [{"bucket": "acme-ckpt", "prefix": "train/", "purpose": "checkpoint"}]
    assert raw["storage"]["regions"] == ["eu-west-1"]
    assert raw["dcgm"]["targets"] == ["http://gpu-1:9400/metrics", "http://gpu-2:9400/metrics"]
    assert raw["onprem"]["node_groups"][0]["nodes"] == ["gpu-1", "gpu-2"]
    assert list(raw).index("onprem") > list(raw).index("nvidia_smi")  # on-prem costs follow its metrics
    assert "never this file" in text and "GOOGLE_APPLICATION_CREDENTIALS" in text  # where credentials come from
    assert sum(1 for line in text.splitlines() if line.startswith("#")) >= 10
    args = cli._parser().parse_args(["init", "--out", str(path), "--yes"])
    assert init_cmd.run(args) == 2 and path.read_text() == text  # an existing file is kept without --force


def test_init_asks_one_question_per_source(tmp_path):
    answers = iter(
        [
            "",
            "acme-cur",
            "exports/cur2",
            "us-west-2",
            "s3://ckpt/llm/",
            "",
            "http://gpu-1:9400/metrics",
            "",
            "",
            "",
            "n",
        ]
    )
    args = cli._parser().parse_args(["init", "--out", str(tmp_path / "gpufinops.toml"), "--interactive"])
    assert init_cmd.run(args, prompt=lambda question: next(answers)) == 0
    raw = tomllib.loads((tmp_path / "gpufinops.toml").read_text())
    assert raw["sources"]["aws_cur"]["region"] == "us-west-2" and raw["warehouse"]["path"] == "data/gpufinops.duckdb"
    assert raw["sources"]["dcgm"]["targets"] == ["http://gpu-1:9400/metrics"]
    assert "gcp_billing" not in raw["sources"]
    assert raw["sources"]["storage"]["prefixes"][0]["bucket"] == "ckpt"


def test_init_refuses_a_bad_answer_with_one_sentence(tmp_path, capsys):
    args = cli._parser().parse_args(
        ["init", "--out", str(tmp_path / "gpufinops.toml"), "--yes", "--bigquery-table", "just-a-table"]
    )
    assert init_cmd.run(args) == 2
    assert "PROJECT.DATASET.TABLE" in capsys.readouterr().err and not (tmp_path / "gpufinops.toml").exists()
    args = cli._parser().parse_args(
        ["init", "--out", str(tmp_path / "gpufinops.toml"), "--yes", "--aws-storage-prefix", "s3://ckpt"]
    )
    assert init_cmd.run(args) == 2
    assert "listing a whole bucket is refused" in capsys.readouterr().err and not (tmp_path / "gpufinops.toml").exists()


@pytest.mark.slow
def test_doctor_checks_aws_sources_against_moto(tmp_path, quiet_env):
    import boto3

    with moto_s3() as endpoint, ExporterServer() as advisor:
        advisor.bodies["/spot-advisor-data.json"] = '{"spot_advisor": {}, "ranges": []}'
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="acme-cur")
        s3.put_object(Bucket="acme-cur", Key="cur2/acme/metadata/BILLING_PERIOD=2026-10/acme-Manifest.json", Body=b"{}")
        path = init(
            tmp_path, "--aws-cur-bucket", "acme-cur", "--aws-cur-prefix", "cur2/acme", "--aws-endpoint-url", endpoint
        )
        with path.open("a") as f:  # the public spot advisor feed is not reachable from the tests: a loopback copy
            f.write(
                f'\n[sources.aws_spot_advisor_copy]\ntype = "aws_spot_advisor"\n'
                f'url = "{advisor.url("/spot-advisor-data.json")}"\n'
                f'\n[sources.storage]\ntype = "aws_storage"\nendpoint_url = "{endpoint}"\n'
                '[[sources.storage.prefixes]]\nbucket = "acme-cur"\nprefix = "ckpt/"\n'
            )
        text = path.read_text().replace(
            '[sources.aws_spot_advisor]\ntype = "aws_spot_advisor"\nregions = ["us-east-1"]\n', ""
        )
        path.write_text(text)
        status, lines = run_doctor(path, timeout=30.0)  # moto imports each service on its first call: slow under load
        assert status == 0, lines
        assert lines["credentials aws"].startswith("ok found by boto3 (env)")
        assert "AKIA" not in "".join(lines.values())  # never the key
        assert lines["source aws_cur"].startswith("ok") and "1 manifest(s)" in lines["source aws_cur"]
        assert lines["source aws_spot"].startswith("ok") and lines["source aws_prices"].startswith("ok")
        assert lines["source aws_spot_advisor_copy"].startswith("ok")
        assert lines["source storage"].startswith("ok") and "1 bucket(s) reachable" in lines["source storage"]
        assert lines["warehouse"].startswith("warn") and "gpufinops ingest creates it" in lines["warehouse"]
        path.write_text(path.read_text().replace('bucket = "acme-cur"', 'bucket = "no-such-bucket"'))
        status, lines = run_doctor(path, timeout=30.0)
        assert status == 1
        assert lines["source aws_cur"].startswith("FAIL aws_cur: s3://no-such-bucket: 404")
        assert "fix: " in lines["source aws_cur"]
        assert "s3:ListBucket" in lines["source aws_cur"]
        assert lines["source storage"].startswith("warn") and "s3://no-such-bucket: 404" in lines["source storage"]


def test_doctor_without_credentials_names_the_chain_and_skips_what_needs_them(tmp_path, quiet_env, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    path = init(tmp_path, "--aws-cur-bucket", "acme-cur", "--no-aws-prices")
    status, lines = run_doctor(path)
    assert status == 1
    assert lines["credentials aws"].startswith("FAIL boto3's default chain found no credentials")
    assert "AWS_PROFILE" in lines["credentials aws"]
    assert lines["source aws_cur"].startswith("skip")


def test_doctor_checks_the_bigquery_export_and_the_catalogue(tmp_path, quiet_env, bq_emulator):
    table = "gcp_billing_export_resource_v1_DOCTOR"
    bq_emulator.create_export_table(table)
    with catalog_server() as catalog:
        path = init(
            tmp_path,
            "--bigquery-table",
            f"{PROJECT}.{DATASET}.{table}",
            "--gcp-endpoint",
            bq_emulator.endpoint,
            "--gcp-catalog-endpoint",
            catalog.url,
        )
        status, lines = run_doctor(path, timeout=20)
        assert status == 0, lines
        assert lines["credentials gcp"].startswith("ok anonymous")
        assert lines["source gcp_billing"].startswith(f"ok gcp_billing_export: BigQuery {PROJECT}.{DATASET}.{table}")
        assert "billing export schema" in lines["source gcp_billing"]
        assert lines["source gcp_prices"].startswith("ok gcp_catalog: Cloud Billing Catalog answers")
        path.write_text(path.read_text().replace(table, "no_such_table"))
        status, lines = run_doctor(path, timeout=20)
        assert status == 1 and lines["source gcp_billing"].startswith("FAIL") and "fix: " in lines["source gcp_billing"]


@pytest.mark.emulator
@requires_prometheus
def test_doctor_checks_dcgm_prometheus_and_nvidia_smi(tmp_path, quiet_env):
    with ExporterServer() as exporter:
        exporter.bodies["/metrics"] = LIVE_BODY  # scraped live, stamped with the scrape time
        prom = PrometheusServer(tmp_path / "prom", gs.openmetrics(gs.samples()[:4]), [f"127.0.0.1:{exporter.port}"])
        try:
            prom.wait_ready()
            prom.wait_scraped()
            path = init(
                tmp_path,
                "--dcgm-target",
                exporter.url("/metrics"),
                "--prometheus-url",
                prom.url,
                "--nvidia-smi-path",
                str(NVIDIA_SMI / "*query-gpu.csv"),
            )
            status, lines = run_doctor(path)
            assert status == 0, lines
            assert lines["source dcgm"] == "ok dcgm_exporter: 1 target(s) answer with GPU metrics"
            assert re.match(
                r"ok prometheus: Prometheus http://127\.0\.0\.1:\d+: 2 DCGM_FI_DEV_GPU_UTIL series in the "
                r"last day",
                lines["source prometheus"],
            ), lines["source prometheus"]
            assert lines["source nvidia_smi"].startswith("ok nvidia_smi_csv: ")
            text = path.read_text().replace(exporter.url("/metrics"), exporter.url("/missing"))
            path.write_text(text.replace(str(NVIDIA_SMI / "*query-gpu.csv"), str(tmp_path / "none" / "*.csv")))
            status, lines = run_doctor(path)
            assert status == 1
            assert lines["source dcgm"].startswith("FAIL") and "HTTP 404" in lines["source dcgm"]
            assert lines["source nvidia_smi"].startswith("FAIL") and "matches no file" in lines["source nvidia_smi"]
        finally:
            prom.stop()


def test_doctor_times_out_a_source_that_never_answers(tmp_path, quiet_env):
    with ExporterServer() as exporter:
        exporter.bodies["/metrics"] = DCGM_BODY
        exporter.stall_s["/metrics"] = 10
        path = init(tmp_path, "--dcgm-target", exporter.url("/metrics"))
        status, lines = run_doctor(path, timeout=1)
        assert status == 1 and lines["source dcgm"].startswith("FAIL") and "timed out" in lines["source dcgm"]


def test_doctor_reports_a_config_error_and_the_warehouse(tmp_path, quiet_env):
    bad = tmp_path / "bad.toml"
    bad.write_text('[sources.x]\ntype = "focus_files"\n')
    status, lines = run_doctor(bad)
    assert status == 1 and lines["config"].startswith("FAIL sources.x.path: missing required key")
    from gpufinops.warehouse import db

    path = init(tmp_path, "--nvidia-smi-path", str(NVIDIA_SMI / "*query-gpu.csv"))
    with db.writer(tmp_path / "data" / "gpufinops.duckdb"):
        pass
    status, lines = run_doctor(path)
    assert status == 0 and re.match(r"ok .*gpufinops\.duckdb: schema version \d+, 0 cost lines", lines["warehouse"])


def test_doctor_reads_the_gcp_credentials_from_the_sources_typed_options(tmp_path, quiet_env, monkeypatch):
    """A credentials_file a Google Cloud API source names is looked for beside the config; sources that all
    name an emulator endpoint need none; otherwise Application Default Credentials must resolve."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no gcloud ADC file of this machine's
    path = tmp_path / "gpufinops.toml"
    emulated = '[sources.emulated]\ntype = "gcp_catalog"\nendpoint = "http://127.0.0.1:9"\n'
    keyed = '[sources.keyed]\ntype = "gcp_catalog"\ncredentials_file = "keys/sa.json"\n'
    plain = '[sources.plain]\ntype = "gcp_catalog"\n'

    def credentials(text: str) -> doctor.Check:
        path.write_text(text)
        return doctor.gcp_credentials(config.load(path, environ={}))

    assert credentials(emulated) == doctor.Check(
        "credentials gcp", "ok", "anonymous (the sources name an emulator endpoint)"
    )
    key = tmp_path / "keys" / "sa.json"
    assert credentials(emulated + keyed) == doctor.Check(
        "credentials gcp", "FAIL", f"credentials_file {key} does not exist", "fix sources.keyed.credentials_file"
    )
    key.parent.mkdir()
    key.write_text("{}")
    assert credentials(emulated + keyed) == doctor.Check("credentials gcp", "ok", f"credentials_file {key}")
    no_adc = credentials(emulated + plain)
    assert (no_adc.status, no_adc.detail) == ("FAIL", "no Application Default Credentials")


def test_version_and_a_help_text_on_every_option_of_every_command():
    result = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and re.fullmatch(r"gpufinops \d+\.\d+\.\d+\S*\n", result.stdout)
    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append(f"{path} {name} (the command)")
                    walk(sub, f"{path} {name}")
            elif not action.help and action.dest != "help":
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(cli._parser(), "gpufinops")
    assert not missing, missing


def test_doctor_aws_calls_go_through_the_bounded_transport(tmp_path, quiet_env, monkeypatch):
    """A server that answers 200 and then a line every 0.5 s, never the end: botocore's per-read timeout
    never trips (doctor's own clients waited for ever); through the transport the check's timeout is the
    whole request's deadline. tests/hostile_servers.py's real loopback server."""
    import time

    from tests.aws_loopback import use_dummy_credentials
    from tests.hostile_servers import Hostile, serve

    use_dummy_credentials(monkeypatch)
    with serve(Hostile("endless")) as server:
        path = tmp_path / "gpufinops.toml"
        path.write_text(
            f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"\n\n[sources.storage]\ntype = "aws_storage"\n'
            f'endpoint_url = "{server.url}"\n[[sources.storage.prefixes]]\nbucket = "ckpt"\nprefix = "runs/"\n'
        )
        started = time.monotonic()
        status, lines = run_doctor(path, timeout=2.0)
        elapsed = time.monotonic() - started
    assert elapsed < 15, (elapsed, lines)
    assert status == 1 and lines["source storage"].startswith("FAIL"), lines
    assert "2 s deadline (timeout_s)" in lines["source storage"], lines
