"""Spot interruption notices from the EC2 instance metadata service (IMDSv2 token flow)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from trainyard_harness.logs import Logger

TOKEN_PATH = '/latest/api/token'
INSTANCE_ACTION_PATH = '/latest/meta-data/spot/instance-action'
TOKEN_TTL_SECONDS = 21600
REQUEST_TIMEOUT_SECONDS = 2.0
# Polls in a row that IMDS must leave unanswered, before it ever answered, for the harness to conclude it is not on EC2.
# One is not enough: a busy instance starting its containers can miss the 2 s timeout, and the notice would be lost.
UNANSWERED_POLLS_BEFORE_GIVING_UP = 3


class NotOnEc2(Exception):
    """IMDS refused the connection or timed out: this is not an EC2 instance (or IMDS is blocked)."""


class ImdsRefused(Exception):
    """IMDS answered with an HTTP status other than the ones asked for (503 or 429 while it throttles): it is there,
    so this is an EC2 instance, and the next poll may get through."""


@dataclass(frozen=True)
class InstanceAction:
    """A spot interruption notice: the action (`terminate`, `stop`, `hibernate`) and when it happens."""

    action: str
    time: str


class ImdsClient:
    """Minimal IMDSv2 client: PUT a session token, then GET with it; refreshes the token on 401."""

    def __init__(self, endpoint: str, timeout: float = REQUEST_TIMEOUT_SECONDS):
        self.endpoint = endpoint.rstrip('/')
        self.timeout = timeout
        self._token: str | None = None
        # Whether IMDS has ever answered a request of this client with an HTTP status (the token's PUT included): it
        # is there, so this is EC2, whatever later requests do.
        self.answered = False

    def _request(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        request = urllib.request.Request(self.endpoint + path, method=method, headers=headers)
        # IMDS must never be reached through an HTTP proxy from the environment.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=self.timeout) as response:
                self.answered = True
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            self.answered = True
            return error.code, error.read()
        except (urllib.error.URLError, socket.timeout, ConnectionError, http.client.HTTPException) as error:
            reason = getattr(error, 'reason', error)
            raise NotOnEc2(f'IMDS at {self.endpoint} unreachable: {reason}') from error

    def _fetch_token(self) -> str:
        status, body = self._request('PUT', TOKEN_PATH, {'X-aws-ec2-metadata-token-ttl-seconds': str(TOKEN_TTL_SECONDS)})
        if status != 200:
            raise ImdsRefused(f'IMDS token request answered HTTP {status}')
        return body.decode().strip()

    def instance_action(self) -> InstanceAction | None:
        """The pending spot interruption, or None when IMDS answers 404 (no notice)."""
        for _ in range(2):
            if self._token is None:
                self._token = self._fetch_token()
            status, body = self._request('GET', INSTANCE_ACTION_PATH, {'X-aws-ec2-metadata-token': self._token})
            if status == 401:
                self._token = None  # expired or rejected token: fetch a new one once
                continue
            if status == 404:
                return None
            if status != 200:
                raise ImdsRefused(f'IMDS spot/instance-action answered HTTP {status}')
            try:
                document = json.loads(body)
                return InstanceAction(str(document.get('action', 'terminate')), str(document.get('time', '')))
            except (ValueError, AttributeError):
                # A 200 with an unexpected body is still a notice: AWS only serves this path when one exists.
                return InstanceAction('terminate', '')
        raise ImdsRefused('IMDS rejected two fresh tokens (HTTP 401)')


class InterruptionPoller:
    """Polls spot/instance-action every `interval` seconds on a thread and calls `on_notice` once.

    An IMDS that left UNANSWERED_POLLS_BEFORE_GIVING_UP polls in a row unanswered and never answered means the job is
    not on EC2 (local runs, Fargate): polling stops. Any HTTP answer, whatever its status, counts as an answer.
    Otherwise an unreachable or slow IMDS is transient (IMDS throttles, a busy instance can miss the 2 s timeout) and
    polling goes on: stopping then would miss the notice, and with it the checkpoint inside the two-minute warning.
    """

    def __init__(
        self, client: ImdsClient, interval: float, on_notice: Callable[[InstanceAction], None], log: Logger
    ):
        self.client = client
        self.interval = interval
        self.on_notice = on_notice
        self.log = log
        self.stopped = threading.Event()
        self.not_on_ec2 = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts polling in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name='imds-poller', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops polling and waits for the thread."""
        self.stopped.set()
        if self._thread is not None:
            self._thread.join()

    def poll_once(self) -> InstanceAction | None:
        """One poll; raises NotOnEc2 when IMDS is unreachable."""
        return self.client.instance_action()

    def _run(self) -> None:
        errors_logged = False
        answered = False
        unanswered = 0
        while not self.stopped.is_set():
            try:
                notice = self.poll_once()
                answered = True
            except NotOnEc2 as error:
                unanswered += 1
                # A poll whose token request was answered before its GET timed out proves IMDS is there too.
                answered = answered or getattr(self.client, 'answered', False)
                if not answered and unanswered >= UNANSWERED_POLLS_BEFORE_GIVING_UP:
                    self.not_on_ec2 = True
                    self.log.info('imds_unavailable', detail=str(error), polls=unanswered, polling='stopped')
                    return
                if answered and not errors_logged:
                    self.log.warn('imds_poll_error', error=str(error), polling='continues')
                    errors_logged = True
                notice = None
            except ImdsRefused as error:
                answered = True
                if not errors_logged:
                    self.log.warn('imds_poll_error', error=str(error), polling='continues')
                    errors_logged = True
                notice = None
            except Exception as error:  # an odd IMDS answer must not kill the poller; keep trying
                if not errors_logged:
                    self.log.warn('imds_poll_error', error=str(error))
                    errors_logged = True
                notice = None
            if notice is not None:
                self.log.info('spot_notice', action=notice.action, action_time=notice.time)
                self.on_notice(notice)
                return
            self.stopped.wait(self.interval)
