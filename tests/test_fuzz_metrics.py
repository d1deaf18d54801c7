"""Hostile input for the utilisation ingestors (nvidia-smi logs, DCGM exporter files and scrapes, Prometheus
answers) and for config values, through the real CLI: exit code, one sentence, nothing lost. The cost
ingestors' cases are in tests/test_fuzz.py; the harness in tests/fuzz_harness.py.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer

import pytest

from tests.conftest import query
from tests.fuzz_harness import SEED, assert_refused, count, good_run, ingest, report_outcomes, write_config
from tests.http_loopback import JsonHandler, QuietHandler, serving

# ---- nvidia-smi logs (query-gpu and compute-apps) -------------------------------------------------

SMI_HEADER = "timestamp, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"


def smi_log(minutes: int = 30, start: datetime = datetime(2026, 11, 20, 10)) -> list[str]:
    return [
        f"{(start + timedelta(minutes=m)).strftime('%Y/%m/%d %H:%M:%S')}.000, GPU-1, NVIDIA H100 80GB HBM3, "
        f"{(m * 7) % 100} %, {1000 + m} MiB, 81559 MiB, 300.00 W"
        for m in range(minutes)
    ]


SMI_MUTATIONS: dict[str, tuple[Callable[[list[str]], list[str]], str]] = {
    "utilisation 150": (
        lambda f: f[:3] + ["150 %"] + f[4:],
        "column utilization.gpu [%] value '150.0' is outside 0–100",
    ),
    "utilisation -5": (lambda f: f[:3] + ["-5 %"] + f[4:], "is outside 0–100"),
    "utilisation NaN": (lambda f: f[:3] + ["NaN"] + f[4:], "value 'nan' is not a finite number"),
    "memory inf": (lambda f: f[:4] + ["inf MiB"] + f[5:], "value 'inf' is not a finite number"),
    "memory above total": (lambda f: f[:4] + ["90000 MiB"] + f[5:], "is more than memory.total [MiB]"),
    "power negative": (lambda f: f[:6] + ["-1.00 W"], "column power.draw [W] value '-1.0' is below 0"),
    "time in 1999": (lambda f: ["1999/01/01 00:00:00.000"] + f[1:], "not a plausible time"),
    "time next year": (lambda f: ["2027/12/01 00:00:00.000"] + f[1:], "not a plausible time"),
    "utilisation abc": (lambda f: f[:3] + ["abc"] + f[4:], "'abc'"),
}


@pytest.mark.parametrize("case", list(SMI_MUTATIONS))
def test_nvidia_smi_refuses_a_bad_sample(tmp_path, case):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node1.csv").write_text("\n".join([SMI_HEADER] + smi_log()) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/*.csv"')
    good_run(config)
    lines = smi_log()
    at = random.Random(f"{SEED}-{case}").randrange(len(lines))
    mutate, reason = SMI_MUTATIONS[case]
    lines[at] = ", ".join(mutate([f.strip() for f in lines[at].split(",")]))
    (logs / "node2.csv").write_text("\n".join([SMI_HEADER] + lines) + "\n")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", f"node2.csv line {at + 2}:", reason)


def test_nvidia_smi_file_level_faults(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node1.csv").write_text("\n".join([SMI_HEADER] + smi_log()) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/**/*.csv"')
    good_run(config)
    (logs / "dup.csv").write_text("\n".join([SMI_HEADER + ", uuid"] + [ln + ", GPU-2" for ln in smi_log()]) + "\n")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dup.csv", "has column 'uuid' twice")
    (logs / "dup.csv").unlink()
    (logs / "empty.csv").write_text("")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "empty.csv", "is empty")
    (logs / "empty.csv").unlink()
    os.symlink(logs / "gone.csv", logs / "dangling.csv")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dangling.csv is a symbolic link", "does not exist")
    (logs / "dangling.csv").unlink()
    # a BOM loads; a symlink loop and a second path to node1.csv do not double its samples
    (logs / "bom.csv").write_bytes(
        b"\xef\xbb\xbf" + ("\n".join([SMI_HEADER] + [ln.replace("GPU-1", "GPU-9") for ln in smi_log()]) + "\n").encode()
    )
    (logs / "sub").mkdir()
    os.symlink(logs, logs / "sub" / "loop")
    os.symlink(logs / "node1.csv", logs / "sub" / "node1-again.csv")
    good_run(config)
    samples = dict(query(tmp_path / "wh.duckdb", "SELECT gpu_uuid, sum(samples) FROM gpu_metrics_hourly GROUP BY 1"))
    assert samples == {"GPU-1": 30, "GPU-9": 30}
    count("valid quirk loaded once", 2)


APPS_HEADER = "timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"


@pytest.mark.parametrize(
    "value, reason", [("inf MiB", "is not a finite number"), ("-5 MiB", "is below 0"), ("lots", "'lots'")]
)
def test_compute_apps_log_refuses_a_bad_sample(tmp_path, value, reason):
    logs = tmp_path / "logs"
    (logs / "apps").mkdir(parents=True)
    rows = [
        f"2026/11/20 10:{m:02d}:00.000, NVIDIA H100, 00000000:00:09.0, 123, GPU-1, 4242, python, {100 + m} MiB"
        for m in range(20)
    ]
    (logs / "apps" / "node1.csv").write_text("\n".join([APPS_HEADER] + rows) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/*/*.csv"')
    good_run(config)
    at = random.Random(f"{SEED}-{value}").randrange(len(rows))
    rows[at] = rows[at].rsplit(", ", 1)[0] + f", {value}"
    (logs / "apps" / "node2.csv").write_text("\n".join([APPS_HEADER] + rows) + "\n")
    assert_refused(tmp_path, config, "gpu_processes_hourly", f"node2.csv line {at + 2}:", reason)


# ---- dcgm_exporter: exposition files and scrapes ---------------------------------------------------


def exposition(minutes: int = 10, util: str | None = None, at: int = -1, stamp_cut: bool = False) -> str:
    start = int(datetime(2026, 11, 20, 10, tzinfo=UTC).timestamp() * 1000)
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    labels = 'gpu="0",UUID="GPU-7",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"'
    for m in range(minutes):
        ts = start + m * 60_000
        value = util if (util is not None and m == at) else str((m * 9) % 100)
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value} {ts}")
        lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {2000 + m} {ts}")
        lines.append(f"DCGM_FI_DEV_FB_FREE{{{labels}}} {79000 - m} {ts}")
    if stamp_cut:
        lines[-1] = lines[-1][:-11]  # the last line cut inside its timestamp
    return "\n".join(lines) + "\n"


DCGM_CASES = {
    "utilisation NaN": ("NaN", "DCGM_FI_DEV_GPU_UTIL value 'NaN' is not a finite number"),
    "utilisation +Inf": ("+Inf", "value '+Inf' is not a finite number"),
    "utilisation 150": ("150", "value '150' is outside 0–100"),
    "utilisation -1": ("-1", "is outside 0–100"),
    "utilisation garbage": ("lots", "the sample value 'lots' is not a number"),
}


@pytest.mark.parametrize("case", list(DCGM_CASES))
def test_dcgm_exposition_refuses_a_bad_sample(tmp_path, case):
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "node7.prom").write_text(exposition())
    config = write_config(tmp_path, f'[sources.dcgm]\ntype = "dcgm_exporter"\ntargets = ["{prom}/*.prom"]')
    good_run(config)
    value, reason = DCGM_CASES[case]
    at = random.Random(f"{SEED}-{case}").randrange(10)
    (prom / "node8.prom").write_text(exposition(util=value, at=at).replace("node7", "node8").replace("GPU-7", "GPU-8"))
    assert_refused(tmp_path, config, "gpu_metrics_hourly", f"node8.prom: line {3 + 3 * at}:", reason)


def test_dcgm_exposition_file_faults(tmp_path):
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "node7.prom").write_text(exposition())
    config = write_config(tmp_path, f'[sources.dcgm]\ntype = "dcgm_exporter"\ntargets = ["{prom}/*.prom"]')
    good_run(config)
    (prom / "cut.prom").write_text(exposition(stamp_cut=True).replace("GPU-7", "GPU-8"))
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "cut.prom: line 32:", "not a plausible time")
    (prom / "cut.prom").unlink()
    for name, body in (("empty.prom", ""), ("comments.prom", "# HELP x\n# TYPE x gauge\n")):
        (prom / name).write_text(body)
        assert_refused(tmp_path, config, "gpu_metrics_hourly", name, "holds no samples")
        (prom / name).unlink()
    os.symlink(prom / "gone.prom", prom / "dangling.prom")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dangling.prom is a symbolic link", "does not exist")


class _Exporter(QuietHandler):
    """A DCGM exporter's /metrics over loopback behind HTTP Basic auth (user:s3cret-passw0rd)."""

    body = exposition()

    def do_GET(self):  # noqa: N802
        import base64

        expected = "Basic " + base64.b64encode(b"user:s3cret-passw0rd").decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        self._send(200, type(self).body, "text/plain; version=0.0.4")


@contextlib.contextmanager
def serve(handler):
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"127.0.0.1:{server.server_address[1]}"


def test_dcgm_scrape_credentials_authenticate_and_never_leak(tmp_path):
    with serve(_Exporter) as address:
        config = write_config(
            tmp_path,
            f'[sources.dcgm]\ntype = "dcgm_exporter"\n'
            f'targets = ["http://user:s3cret-passw0rd@{address}/metrics"]\nretries = 1',
        )
        good_run(config)  # the credentials went as Basic auth
        _Exporter.body = exposition(util="NaN", at=4).replace("GPU-7", "GPU-8")
        try:
            assert_refused(
                tmp_path,
                config,
                "gpu_metrics_hourly",
                f"http://***@{address}/metrics: line 15:",
                "is not a finite number",
            )
            code, err = ingest(config)
        finally:
            _Exporter.body = exposition()
    errors = query(tmp_path / "wh.duckdb", "SELECT string_agg(error, ' ') FROM ingest_runs")[0][0]
    assert "s3cret-passw0rd" not in errors and "s3cret-passw0rd" not in err and code == 1


# ---- prometheus answers --------------------------------------------------------------------------


class _Prometheus(JsonHandler):
    """Prometheus' HTTP API over loopback, answering DCGM_FI_DEV_GPU_UTIL queries with ``value``
    (a real Prometheus answers NaN/+Inf as these strings; loading such samples into one is slower
    than this whole suite, so the wire format is served here)."""

    value = "42"

    def do_GET(self):  # noqa: N802
        from urllib.parse import parse_qs, urlparse

        url = urlparse(self.path)
        if url.path.endswith("buildinfo"):
            payload = {"status": "success", "data": {"version": "3.1.0"}}
        else:
            q = parse_qs(url.query)
            start, end, step = float(q["start"][0]), float(q["end"][0]), int(q["step"][0])
            result = []
            if "DCGM_FI_DEV_GPU_UTIL" in q["query"][0] and "count_over_time" not in q["query"][0]:
                stamps = [start + i * step for i in range(int((end - start) // step) + 1)]
                result = [
                    {
                        "metric": {"UUID": "GPU-P", "Hostname": "p1", "gpu": "0"},
                        "values": [[t, type(self).value] for t in stamps],
                    }
                ]
            elif "count_over_time(DCGM_FI_DEV_GPU_UTIL" in q["query"][0]:
                stamps = [start + i * step for i in range(int((end - start) // step) + 1)]
                result = [
                    {"metric": {"UUID": "GPU-P", "Hostname": "p1", "gpu": "0"}, "values": [[t, "60"] for t in stamps]}
                ]
            payload = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        self._json(200, payload)


@pytest.mark.parametrize(
    "value, reason",
    [("NaN", "which is not a finite number"), ("+Inf", "not a finite number"), ("150", "which is outside 0–100")],
)
def test_prometheus_answers_refused(tmp_path, value, reason):
    with serve(_Prometheus) as address:
        config = write_config(
            tmp_path,
            f'[sources.prom]\ntype = "prometheus"\nurl = "http://admin:hunter2-hunter2@'
            f'{address}"\nbackfill_days = 0.125\nretries = 1',
        )
        _Prometheus.value = "42"
        good_run(config)
        _Prometheus.value = value
        try:
            assert_refused(
                tmp_path, config, "gpu_metrics_hourly", f"Prometheus at http://***@{address} answered", reason
            )
        finally:
            _Prometheus.value = "42"
    assert (
        "hunter2-hunter2" not in query(tmp_path / "wh.duckdb", "SELECT string_agg(error, ' ') FROM ingest_runs")[0][0]
    )


# ---- onprem config and config errors -------------------------------------------------------------


@pytest.mark.parametrize(
    "line, named",
    [
        ("pue = nan", "sources.dc1.pue"),
        ("energy_usd_per_kwh = inf", "sources.dc1.energy_usd_per_kwh"),
        ("idle_power_fraction = 2", "sources.dc1.idle_power_fraction"),
    ],
)
def test_onprem_config_values_refused(tmp_path, line, named):
    key = line.split(" = ")[0]
    base = {"pue": "1.4", "energy_usd_per_kwh": "0.11", "idle_power_fraction": "0.1"}
    base[key] = line.split(" = ")[1]
    body = "\n".join(f"{k} = {v}" for k, v in base.items())
    config = write_config(
        tmp_path,
        f'[sources.dc1]\ntype = "onprem"\n{body}\namortisation_years = 4\n'
        f'[[sources.dc1.node_groups]]\nname = "g"\nnodes = ["n1"]\n'
        f'gpu_model = "A100-SXM4-80GB"\ngpus_per_node = 8\nserver_price_usd = 60000\n',
    )
    assert_refused(tmp_path, config, "cost_line_items", named, "must be")


@pytest.mark.parametrize(
    "body, named",
    [
        ("[warehouse]\npath = 5\n", "warehouse.path: must be a file path"),
        ('[warehouse]\nmemory_limit = "lots"\n', "warehouse.memory_limit: 'lots' is not a memory size"),
        ('[sources.f]\ntype = "focus_files"\npath = 5\n', "sources.f.path: must be a string or a list of strings"),
        ('[sources.f]\ntype = "focus_files"\npath = "x"\non_invalid = "ignore"\n', "sources.f.on_invalid"),
        ("warehouse = 5\n", "warehouse: must be a table"),
    ],
)
def test_config_errors_exit_2_naming_the_key(tmp_path, body, named):
    config = tmp_path / "gpufinops.toml"
    config.write_text(body)
    code, err = ingest(config)
    lines = [ln for ln in err.splitlines() if ln.startswith("gpufinops:")]
    assert code == 2 and len(lines) == 1 and named in lines[0] and "Traceback" not in err, err
    count("refused (exit 2)")


@pytest.fixture(scope="module", autouse=True)
def _outcome_counts(request):
    """Prints the closing note's figures after the module: how many hostile cases ended how."""
    yield
    report_outcomes(request)
