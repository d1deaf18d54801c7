"""Conformance-suite input for the ``aws_storage`` source (tests/test_conformance.py): a small account in a
moto server on loopback (started once, on first use; each input starts it empty and plants it again),
reached with dummy credentials: a GPU instance's io2 volume with a few measured hours, an unattached gp3
volume, a snapshot, and checkpoint objects under one configured prefix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests import storage_account as acct
from tests.aws_loopback import dummy_credentials_for_the_session, reset_moto
from tests.conftest import free_port

_ENDPOINT: str | None = None


def _endpoint() -> str:
    global _ENDPOINT
    dummy_credentials_for_the_session()
    if _ENDPOINT is None:
        from moto.server import ThreadedMotoServer

        port = free_port()
        ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()  # a daemon thread
        _ENDPOINT = f"http://127.0.0.1:{port}"
    return _ENDPOINT


def plant(endpoint: str) -> None:
    reset_moto(endpoint)  # moto keeps its backends per process: every input starts from an empty account
    c = acct.clients(endpoint)
    ec2, cw, s3 = c.ec2(acct.REGION), c.cloudwatch(acct.REGION), c.s3
    gpu = acct._instance(ec2, "p4d.24xlarge", "vision")
    io2 = acct._volume(ec2, "io2", 500, 16000, team="vision")
    ec2.attach_volume(VolumeId=io2, InstanceId=gpu, Device="/dev/sdf")
    spare = acct._volume(ec2, "gp3", 100)
    ec2.create_snapshot(VolumeId=spare)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    acct._ops(cw, io2, now, iops=1200, mibps=40, hours=3)
    s3.create_bucket(Bucket="ckpt")
    for step in ("step-000100", "step-000200"):
        s3.put_object(Bucket="ckpt", Key=f"llm/run-a/{step}/model.safetensors", Body=b"x")


def aws_storage_input(tmp: Path) -> tuple[dict, datetime]:
    endpoint = _endpoint()
    plant(endpoint)
    options = {
        "endpoint_url": endpoint,
        "regions": [acct.REGION],
        "prefixes": [{"bucket": "ckpt", "prefix": "llm/", "team": "llm"}],
    }
    return options, datetime.now(UTC) - timedelta(days=1)


_GCP: tuple | None = None
_GCP_SERVER = None  # the context manager itself: its server stops when it is collected


def gcp_storage_input(tmp: Path) -> tuple[dict, datetime]:
    """The GCP inventory's loopback server (tests/gcp_storage_loopback.py, started once) with the disks,
    snapshot and objects of tests/test_storage_gcp.py."""
    global _GCP, _GCP_SERVER
    from tests import test_storage_gcp as gcp
    from tests.gcp_storage_loopback import serve

    if _GCP is None:
        _GCP_SERVER = serve()
        _GCP = _GCP_SERVER.__enter__()  # a daemon thread, ends with the test session
    endpoint, server = _GCP
    gcp._state(server, attached=True)
    options = {
        "endpoint": endpoint,
        "project": gcp.P,
        "prefixes": [{"bucket": "ckpt", "prefix": "llm/", "team": "llm"}],
    }
    return options, gcp.NOW - timedelta(days=365)


FIXTURES = {"aws_storage": aws_storage_input, "gcp_storage": gcp_storage_input}
TIME_COLUMNS = {"storage_volumes": "created_at"}
