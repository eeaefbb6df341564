"""IMDSv2 poller against a loopback fake: token flow, 404 = no notice, notice at a chosen poll, not on EC2."""

import io
import json
import threading

from conftest import FakeImds, closed_port_endpoint

from trainyard_harness.imds import (
    UNANSWERED_POLLS_BEFORE_GIVING_UP,
    ImdsClient,
    ImdsRefused,
    InstanceAction,
    InterruptionPoller,
    NotOnEc2,
)
from trainyard_harness.logs import Logger


def test_uses_the_token_flow_and_reads_404_as_no_notice():
    imds = FakeImds()
    try:
        assert ImdsClient(imds.endpoint).instance_action() is None
        (put, get) = imds.requests
        assert put[0] == 'PUT' and put[1] == '/latest/api/token'
        assert put[2]['x-aws-ec2-metadata-token-ttl-seconds'] == '21600'
        assert get[0] == 'GET' and get[1] == '/latest/meta-data/spot/instance-action'
        assert get[2]['x-aws-ec2-metadata-token'] == 'token-1'
    finally:
        imds.close()


def test_reuses_the_token_and_fetches_a_new_one_after_401():
    imds = FakeImds()
    try:
        client = ImdsClient(imds.endpoint)
        client.instance_action()
        client.instance_action()
        imds.reject_tokens.add('token-1')
        client.instance_action()
        assert imds.tokens_issued == ['token-1', 'token-2']
        assert [r[0] for r in imds.requests] == ['PUT', 'GET', 'GET', 'GET', 'PUT', 'GET']
    finally:
        imds.close()


def test_poller_reports_the_notice_served_from_the_chosen_poll_once():
    imds = FakeImds(notice_from_request=4, action='terminate')
    notices: list[InstanceAction] = []
    done = threading.Event()
    log_stream = io.StringIO()

    def on_notice(notice):
        notices.append(notice)
        done.set()

    poller = InterruptionPoller(ImdsClient(imds.endpoint), 0.01, on_notice, Logger(log_stream))
    try:
        poller.start()
        assert done.wait(30), 'poller never reported the notice'
        poller.stop()
    finally:
        imds.close()
    assert notices == [InstanceAction('terminate', '2026-11-21T06:30:00Z')]
    assert imds.action_requests == 4  # three 404s, then the notice, then polling stops
    events = [json.loads(line)['event'] for line in log_stream.getvalue().splitlines()]
    assert events == ['spot_notice']


def test_unreachable_imds_means_not_on_ec2_and_polling_stops_after_one_log_line():
    log_stream = io.StringIO()
    poller = InterruptionPoller(
        ImdsClient(closed_port_endpoint()), 0.01, lambda notice: None, Logger(log_stream)
    )
    poller.start()
    poller._thread.join(30)
    assert not poller._thread.is_alive()
    assert poller.not_on_ec2
    records = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [r['event'] for r in records] == ['imds_unavailable']
    assert 'Connection refused' in records[0]['detail']


def test_an_imds_slow_to_answer_its_first_polls_is_still_polled_and_the_notice_arrives():
    # A busy instance starting its containers can miss IMDS's 2 s timeout: one miss is no proof of "not on EC2".
    notice = InstanceAction('terminate', '2026-11-23T03:00:00Z')
    client = ScriptedClient([NotOnEc2('timed out'), NotOnEc2('timed out'), None, notice])

    notices, poller, records = poll_until_notice(client)

    assert notices == [notice] and client.polls == 4 and not poller.not_on_ec2
    assert [r['event'] for r in records] == ['spot_notice']


def test_client_raises_not_on_ec2_when_nothing_listens():
    client = ImdsClient(closed_port_endpoint())
    try:
        client.instance_action()
    except NotOnEc2 as error:
        assert 'unreachable' in str(error)
    else:
        raise AssertionError('expected NotOnEc2')


class ScriptedClient:
    """An ImdsClient stand-in answering each poll from a script: None (404), an InstanceAction, or an error to raise."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.polls = 0

    def instance_action(self):
        self.polls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def poll_until_notice(client):
    """Polls `client` every 10 ms until a notice arrives: the notices served, the poller and its log records."""
    notices: list[InstanceAction] = []
    done = threading.Event()
    log_stream = io.StringIO()

    def on_notice(served):
        notices.append(served)
        done.set()

    poller = InterruptionPoller(client, 0.01, on_notice, Logger(log_stream))
    poller.start()
    assert done.wait(30), 'poller stopped before the notice'
    poller.stop()
    return notices, poller, [json.loads(line) for line in log_stream.getvalue().splitlines()]


def test_imds_unreachable_after_it_has_answered_is_transient_and_the_notice_still_arrives():
    notice = InstanceAction('terminate', '2026-11-21T06:30:00Z')
    client = ScriptedClient([None, NotOnEc2('timed out'), NotOnEc2('timed out'), None, notice])

    notices, poller, records = poll_until_notice(client)

    assert notices == [notice]
    assert client.polls == 5
    assert not poller.not_on_ec2
    assert [(r['event'], r.get('polling')) for r in records] == [('imds_poll_error', 'continues'), ('spot_notice', None)]


def test_an_imds_that_refuses_its_first_token_requests_is_there_and_is_polled_until_the_notice():
    # A throttling IMDS answers 503: any HTTP answer proves the job is on EC2, so the notice must not be missed.
    imds = FakeImds(notice_from_request=1)
    imds.token_refusals = 3
    try:
        notices, poller, records = poll_until_notice(ImdsClient(imds.endpoint))
    finally:
        imds.close()

    assert notices == [InstanceAction('terminate', '2026-11-21T06:30:00Z')] and not poller.not_on_ec2
    assert [(r['event'], r.get('polling')) for r in records] == [
        ('imds_poll_error', 'continues'),
        ('spot_notice', None),
    ]
    assert 'HTTP 503' in records[0]['error']


def test_after_an_http_answer_an_unreachable_imds_is_transient_and_the_notice_still_arrives():
    notice = InstanceAction('terminate', '2026-11-21T06:30:00Z')
    timed_out = [NotOnEc2('timed out')] * UNANSWERED_POLLS_BEFORE_GIVING_UP
    client = ScriptedClient([ImdsRefused('IMDS token request answered HTTP 503'), *timed_out, notice])

    notices, poller, records = poll_until_notice(client)

    assert notices == [notice] and not poller.not_on_ec2
    assert [r['event'] for r in records] == ['imds_poll_error', 'spot_notice']


def test_an_imds_that_answered_the_token_request_is_there_though_its_first_gets_time_out():
    # The PUT is answered, then the GETs of the first polls outlast the client's timeout (a busy instance): IMDS has
    # answered, so this is EC2, and polling goes on until the notice.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    gets = {'count': 0}
    slow = UNANSWERED_POLLS_BEFORE_GIVING_UP + 1

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            return

        def _reply(self, status: int, body: bytes = b'') -> None:
            try:
                self.send_response(status)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting

        def do_PUT(self) -> None:
            self._reply(200, b'token')

        def do_GET(self) -> None:
            gets['count'] += 1
            if gets['count'] <= slow:
                threading.Event().wait(0.5)  # past the client's 0.1 s
                self._reply(404)
                return
            self._reply(200, json.dumps({'action': 'terminate', 'time': '2026-11-30T01:00:00Z'}).encode())

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ImdsClient(f'http://127.0.0.1:{server.server_address[1]}', timeout=0.1)
        notices, poller, records = poll_until_notice(client)
    finally:
        server.shutdown()
        server.server_close()

    assert notices == [InstanceAction('terminate', '2026-11-30T01:00:00Z')] and not poller.not_on_ec2
    assert 'imds_unavailable' not in [r['event'] for r in records]
