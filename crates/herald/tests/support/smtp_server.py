"""A real SMTP relay for herald's email channel tests (aiosmtpd).

    smtp_server.py MESSAGES_FILE [--auth-fail]

Listens on 127.0.0.1, port chosen by the OS, and prints that port on stdout (one line).
Recipients decide the reply to RCPT:
  tempfail@…  451 4.3.0 try later
  nouser@…    550 5.1.1 no such user
  anything    accepted
Every accepted message is appended to MESSAGES_FILE as one JSON line (flushed before the
server answers DATA, so a client that got its 250 can read it): the envelope, the headers
and the text/html bodies as Python's email parser reads them, and the raw bytes (base64).
With --auth-fail the server offers AUTH (also without TLS), requires it, and refuses
every login with 535.
Runs until stdin closes (the test that started it ends) or it is killed.
"""

import base64
import json
import logging
import sys
import threading
import warnings
from email import policy
from email.parser import BytesParser

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class Handler:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local == "tempfail":
            return "451 4.3.0 try later"
        if local == "nouser":
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        message = BytesParser(policy=policy.default).parsebytes(raw)
        text = message.get_body(preferencelist=("plain",))
        html = message.get_body(preferencelist=("html",))
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "message_id": message.get("Message-ID"),
            "subject": message.get("Subject"),
            "from": message.get("From"),
            "to": message.get("To"),
            "content_type": message.get_content_type(),
            "text": text.get_content() if text is not None else None,
            "html": html.get_content() if html is not None else None,
            "raw": base64.b64encode(raw).decode("ascii"),
        }
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
        return "250 Message accepted for delivery"


def refuse_everyone(server, session, envelope, mechanism, auth_data):
    return AuthResult(success=False, handled=False)


class PortZeroController(Controller):
    """aiosmtpd's Controller pokes the server on `self.port` once it is up; with port 0
    that is the port the OS chose."""

    def _trigger_server(self):
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


def main() -> None:
    args = sys.argv[1:]
    auth_fail = "--auth-fail" in args
    paths = [a for a in args if not a.startswith("--")]
    if len(paths) != 1:
        sys.exit("usage: smtp_server.py MESSAGES_FILE [--auth-fail]")
    options = {}
    # AUTH without TLS is the point of --auth-fail: keep aiosmtpd's warnings off stderr.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    if auth_fail:
        options = {
            "authenticator": refuse_everyone,
            "auth_required": True,
            "auth_require_tls": False,
        }
    controller = PortZeroController(
        Handler(paths[0]), hostname="127.0.0.1", port=0, **options
    )
    controller.start()
    print(controller.port, flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
