"""A loopback IMDSv2 (token flow) that serves a spot interruption notice once armed.

Used by the harness tests (the `fake_imds` fixture) and by the checkpoint benchmark, so both exercise the same
fake of what EC2 serves at spot/instance-action.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeImds:
    """IMDSv2 on loopback: PUT /latest/api/token then GET spot/instance-action with the token.

    It answers 404 until a notice is armed: `serve_notice()` arms it now; `notice_from_request=N` arms it from the
    N-th instance-action request on (a point in poll ticks, independent of wall-clock time). The first
    `token_refusals` token requests are answered 503, as a throttling IMDS does.
    """

    def __init__(self, notice_from_request: int | None = None, action: str = 'terminate'):
        self.notice_from_request = notice_from_request
        self.action = action
        self.notice_armed = threading.Event()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.tokens_issued: list[str] = []
        self.reject_tokens: set[str] = set()
        self.token_refusals = 0
        self.action_requests = 0
        self.first_notice_served = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:
                return

            def _reply(self, status: int, body: bytes = b'') -> None:
                self.send_response(status)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self) -> None:
                fake.requests.append(('PUT', self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path != '/latest/api/token' or not self.headers.get('X-aws-ec2-metadata-token-ttl-seconds'):
                    self._reply(400)
                    return
                if fake.token_refusals > 0:
                    fake.token_refusals -= 1
                    self._reply(503)
                    return
                token = f'token-{len(fake.tokens_issued) + 1}'
                fake.tokens_issued.append(token)
                self._reply(200, token.encode())

            def do_GET(self) -> None:
                fake.requests.append(('GET', self.path, {k.lower(): v for k, v in self.headers.items()}))
                token = self.headers.get('X-aws-ec2-metadata-token')
                if token not in fake.tokens_issued or token in fake.reject_tokens:
                    self._reply(401)
                    return
                if self.path != '/latest/meta-data/spot/instance-action':
                    self._reply(404)
                    return
                fake.action_requests += 1
                armed = fake.notice_armed.is_set() or (
                    fake.notice_from_request is not None and fake.action_requests >= fake.notice_from_request
                )
                if not armed:
                    self._reply(404)
                    return
                fake.first_notice_served.set()
                body = json.dumps({'action': fake.action, 'time': '2026-11-21T06:30:00Z'}).encode()
                self._reply(200, body)

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f'http://127.0.0.1:{self.server.server_address[1]}'

    def serve_notice(self) -> None:
        """From now on spot/instance-action answers with a notice."""
        self.notice_armed.set()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
