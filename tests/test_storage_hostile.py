"""The storage inventories against servers that answer what no honest one does: each run fails with one
sentence naming the source, the call with its server, the object and the value (the issue's cases: a NaN
volume size, a 99,999,999,999 GB disk, a snapshot time "yesterday", a token answered again, a 503), and
the warehouse holds nothing of it. AWS: tests/scripted_aws.py (EC2's Query API, where moto refuses such
values); GCP: tests/gcp_storage_loopback.py with a planted answer."""

from __future__ import annotations

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests import scripted_aws as aws
from tests import test_storage_gcp as gcp
from tests.aws_loopback import DUMMY_CREDENTIALS
from tests.conftest import query
from tests.gcp_storage_loopback import serve as serve_gcp

REGISTRY = default_registry()
HOST = "127.0.0.1:"  # every sentence names the loopback server it asked

AWS_CASES = {
    "a NaN volume size": (
        {"DescribeVolumes": [aws.page("DescribeVolumes", aws.volume(size="NaN"))]},
        ["ec2 DescribeVolumes at 127.0.0.1:", "volumeId vol-0a1: size 'NaN' is not readable"],
    ),
    "a 99,999,999,999 GB volume": (
        {"DescribeVolumes": [aws.page("DescribeVolumes", aws.volume(size="99999999999"))]},
        ["ec2 DescribeVolumes at 127.0.0.1:", "(volume_id vol-0a1): column size_gib value '99999999999.0'"],
    ),
    "a snapshot started 'yesterday'": (
        {"DescribeSnapshots": [aws.page("DescribeSnapshots", aws.snapshot(started="yesterday"))]},
        ["ec2 DescribeSnapshots at 127.0.0.1:", "snapshotId snap-0b2: startTime 'yesterday' is not readable"],
    ),
    "the same token on every page": (
        {"DescribeVolumes": [aws.page("DescribeVolumes", aws.volume(), token="same")]},
        ["ec2 DescribeVolumes at 127.0.0.1:", "answered a page token it answered 1 page(s) before ('same', page 2)"],
    ),
    "a 503 from DescribeSnapshots": (
        {"DescribeSnapshots": [aws.UNAVAILABLE]},
        ["ec2 DescribeSnapshots at 127.0.0.1:", "failed: Unavailable: The service is unavailable."],
    ),
}


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("case", list(AWS_CASES))
def test_aws_storage_names_the_call_server_object_and_value(case, tmp_path):
    answers, said = AWS_CASES[case]
    warehouse = tmp_path / "gpufinops.duckdb"
    with aws.serve(aws.Script(answers)) as script:
        options = {"endpoint_url": script.url, "regions": ["us-east-1"], "max_attempts": 2}
        failed = run_source(REGISTRY, warehouse, "store", "aws_storage", options)
    assert failed.status == "failed", failed
    assert failed.error.startswith("store: ") and all(part in failed.error for part in said), failed.error
    assert query(warehouse, "SELECT count(*) FROM storage_volumes") == [(0,)]


def _disk(**fields):
    return lambda server: server.state["disks"][gcp.Z][0].update(fields)


def _answer(fragment: str, status: int, body: dict):
    return lambda server: server.answers.__setitem__(fragment, (status, body))


GCP_CASES = {
    "a NaN disk size": (
        _disk(sizeGb="NaN"),
        ["compute disks.aggregatedList at 127.0.0.1:", 'items[zones/us-central1-a].disks[0].sizeGb: value "NaN"'],
    ),
    "a 99,999,999,999 GB disk": (
        _disk(sizeGb="99999999999"),
        ["compute disks.aggregatedList at 127.0.0.1:", "column size_gib value '99999999999.0'"],
    ),
    "a disk created 'yesterday'": (
        _disk(creationTimestamp="yesterday"),
        ["disks.aggregatedList at 127.0.0.1:", "disks/data: creationTimestamp 'yesterday' is not an RFC 3339 time"],
    ),
    "the same token on every page": (
        _answer("/aggregated/disks", 200, {"items": {}, "nextPageToken": "same"}),
        ["compute disks.aggregatedList at 127.0.0.1:", "answered a page token it answered 1 page(s) before ('same'"],
    ),
    "a 503 from snapshots.list": (
        _answer("/snapshots", 503, {"error": {"code": 503, "message": "The service is unavailable."}}),
        ["compute snapshots.list at 127.0.0.1:", "failed: HTTP 503:", "The service is unavailable."],
    ),
}


@pytest.mark.parametrize("case", list(GCP_CASES))
def test_gcp_storage_names_the_call_server_object_and_value(case, tmp_path):
    pytest.importorskip("google.cloud.compute_v1", reason="the gcp-storage extra")
    plant, said = GCP_CASES[case]
    warehouse = tmp_path / "gpufinops.duckdb"
    with serve_gcp() as (url, server):
        gcp._state(server, attached=True)
        plant(server)
        options = {"endpoint": url, "project": gcp.P, "max_attempts": 2, "initial_backoff_s": 0.05}
        failed = run_source(REGISTRY, warehouse, "gstore", "gcp_storage", options)
    assert failed.status == "failed", failed
    assert failed.error.startswith("gstore: ") and all(part in failed.error for part in said), failed.error
    assert query(warehouse, "SELECT count(*) FROM storage_volumes") == [(0,)]


def test_aws_ca_bundle_is_honoured_through_the_transport(tmp_path, monkeypatch):
    """An HTTPS endpoint signed by a private CA (a corporate proxy's, an emulator's): botocore honours
    AWS_CA_BUNDLE, and so must the bounded transport that sends its requests; without it the run is
    refused as unverified. The certificate is made here with the system's openssl."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "ca.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    with aws.serve(aws.Script(), tls=(str(cert), str(key))) as script:
        options = {"endpoint_url": script.url, "regions": ["us-east-1"], "max_attempts": 1}
        refused = run_source(REGISTRY, tmp_path / "a.duckdb", "store", "aws_storage", options)
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
        loaded = run_source(REGISTRY, tmp_path / "b.duckdb", "store", "aws_storage", options)
    assert refused.status == "failed" and "DescribeVolumes at 127.0.0.1:" in refused.error, refused.error
    assert loaded.status == "succeeded", loaded.error
    assert "DescribeVolumes" in script.requests
