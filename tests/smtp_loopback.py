"""A real SMTP server on loopback (aiosmtpd) that records what it receives, and can refuse or stall.

aiosmtpd's Controller cannot take ``port=0`` (it connects to the port to check the server is up),
so a free port is picked first.
"""

from __future__ import annotations

import asyncio
import email
import threading
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.conftest import free_port


@dataclass
class Received:
    rcpt_tos: list[str]
    mail_from: str
    message: EmailMessage


@dataclass
class Recorder:
    """The handler: keeps every accepted message; ``refuse`` maps a recipient to the replies it gets
    for its next DATA commands (e.g. ["451 4.3.0 try later"]); ``stall`` holds a recipient's DATA
    (after the message has arrived) until ``release`` is set."""

    received: list[Received] = field(default_factory=list)
    refuse: dict[str, list[str]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    stall: set[str] = field(default_factory=set)
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    logins: list[str] = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        rcpt = envelope.rcpt_tos[0]
        if self.refuse.get(rcpt):
            reply = self.refuse[rcpt].pop(0)
            self.refused.append(rcpt)
            return reply
        message = email.message_from_bytes(envelope.original_content or envelope.content, policy=policy.default)
        self.received.append(Received(list(envelope.rcpt_tos), envelope.mail_from, message))
        if rcpt in self.stall:
            self.stalled.set()
            while not self.release.is_set():
                await asyncio.sleep(0.05)
        return "250 OK"

    def to(self, address: str) -> list[EmailMessage]:
        return [r.message for r in self.received if address in r.rcpt_tos]


class Server:
    """``with Server(recorder, users={...}, tls_context=ctx) as port:`` — AUTH LOGIN/PLAIN when users are
    given (over plain SMTP unless a TLS context makes STARTTLS required first)."""

    def __init__(self, recorder: Recorder, users: dict[str, str] | None = None, tls_context=None) -> None:
        self.recorder = recorder
        self.users = users
        self.port = free_port()
        kwargs: dict = {}
        if users:
            kwargs = {
                "authenticator": self._authenticate,
                "auth_required": True,
                "auth_require_tls": tls_context is not None,
            }
        if tls_context is not None:  # STARTTLS offered and required before anything else
            kwargs.update(tls_context=tls_context, require_starttls=True)
        self.controller = Controller(recorder, hostname="127.0.0.1", port=self.port, **kwargs)

    def _authenticate(self, server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and self.users is not None
            and self.users.get(auth_data.login.decode()) == auth_data.password.decode()
        )
        if ok:
            self.recorder.logins.append(auth_data.login.decode())
        return AuthResult(success=ok)

    def __enter__(self) -> int:
        self.controller.start()
        return self.port

    def __exit__(self, *exc) -> None:
        self.recorder.release.set()
        self.controller.stop()
