"""Azurite, Microsoft's Azure Storage emulator (the npm package ``azurite``), started on loopback for a test.

``.ci/run`` installs it into ``.azurite/`` (git-ignored); a test that needs it skips with the reason when Node.js
or the package is absent. Its account and key are the emulator's well-known development ones (public, in
Microsoft's Azurite documentation), not a secret.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests import cli_process

ROOT = Path(__file__).resolve().parents[1]
AZURITE_BLOB = ROOT / ".azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Azurite:
    def __init__(self, folder: Path) -> None:
        if shutil.which("node") is None:
            pytest.skip("Node.js is not installed: Azurite (the Azure Storage emulator) needs it")
        if not AZURITE_BLOB.exists():
            pytest.skip("Azurite is not installed: npm install --prefix .azurite azurite@3 (.ci/run does)")
        self.port = _free_port()
        self.process = subprocess.Popen(
            [str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", str(folder)]
            + ["--silent", "--skipApiVersionCheck", "--loose"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Azurite did not listen on 127.0.0.1:{self.port} within 30 s")

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};"
        )

    def upload(self, container: str, folder: Path) -> int:
        """Every file under ``folder`` as a blob of ``container`` (made first), named by its relative path."""
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(self.connection_string)
        client = service.create_container(container)
        count = 0
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.upload_blob(path.relative_to(folder).as_posix(), path.read_bytes(), overwrite=True)
            count += 1
        return count

    def stop(self) -> None:
        cli_process.terminate(self.process, 10)
