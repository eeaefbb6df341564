import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { awsTimestamp, FakeImds, InvalidSpotNotice } from '../../lib/local/fake-imds';

const INSTANCE_ID = 'i-0123456789abcdef0';

describe('FakeImds (IMDSv2 on loopback)', () => {
  let clockMs: number;
  let imds: FakeImds;
  let base: string;

  beforeEach(async () => {
    clockMs = Date.UTC(2026, 10, 20, 14, 0, 0);
    imds = new FakeImds({ instanceId: INSTANCE_ID, now: () => clockMs });
    base = await imds.start();
  });
  afterEach(async () => {
    await imds.stop();
  });

  const token = async (ttl = '21600') => {
    const response = await fetch(`${base}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': ttl },
    });
    return {
      status: response.status,
      body: await response.text(),
      ttl: response.headers.get('x-aws-ec2-metadata-token-ttl-seconds'),
    };
  };
  const get = async (path: string, withToken?: string) => {
    const response = await fetch(`${base}${path}`, {
      headers: withToken === undefined ? {} : { 'X-aws-ec2-metadata-token': withToken },
    });
    return { status: response.status, body: await response.text() };
  };

  it('listens on 127.0.0.1 with a random port', () => {
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it.each([
    ['no TTL header', undefined, 400],
    ['a TTL of 0', '0', 400],
    ['a TTL above 6 hours', '21601', 400],
    ['a non-numeric TTL', 'soon', 400],
    ['a TTL of 1 second', '1', 200],
    ['the maximum TTL', '21600', 200],
  ])('answers a token PUT with %s with HTTP %i', async (_label, ttl, expected) => {
    const response = await fetch(`${base}/latest/api/token`, {
      method: 'PUT',
      headers: ttl === undefined ? {} : { 'X-aws-ec2-metadata-token-ttl-seconds': ttl },
    });
    expect(response.status).toBe(expected);
  });

  it('echoes the granted TTL and returns a non-empty token', async () => {
    const answer = await token('600');
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBeGreaterThan(20);
    expect(answer.ttl).toBe('600');
  });

  it('refuses a GET for the token path (tokens are PUT only)', async () => {
    expect((await get('/latest/api/token')).status).toBe(405);
  });

  it('answers 401 to metadata GETs without a token or with one it never issued (IMDSv1 is off)', async () => {
    expect((await get('/latest/meta-data/instance-id')).status).toBe(401);
    expect((await get('/latest/meta-data/spot/instance-action', 'made-up')).status).toBe(401);
  });

  it('serves the instance id with a valid token', async () => {
    const { body } = await token();
    expect(await get('/latest/meta-data/instance-id', body)).toEqual({ status: 200, body: INSTANCE_ID });
  });

  it('answers spot/instance-action 404 until a notice is served, then 200 with the action and time', async () => {
    const { body: t } = await token();
    expect((await get('/latest/meta-data/spot/instance-action', t)).status).toBe(404);

    imds.serveNotice('terminate', '2026-11-20T14:02:00Z');

    const answer = await get('/latest/meta-data/spot/instance-action', t);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ action: 'terminate', time: '2026-11-20T14:02:00Z' });
  });

  it('rejects a token once its TTL has passed', async () => {
    const { body: t } = await token('60');
    clockMs += 59_999;
    expect((await get('/latest/meta-data/instance-id', t)).status).toBe(200);
    clockMs += 1;
    expect((await get('/latest/meta-data/instance-id', t)).status).toBe(401);
  });

  it('answers 404 for metadata paths it does not model', async () => {
    const { body: t } = await token();
    expect((await get('/latest/meta-data/placement/availability-zone', t)).status).toBe(404);
  });

  it.each([
    ['an unknown action', 'reboot', '2026-11-20T14:02:00Z', /terminate, stop or hibernate, got reboot/],
    [
      'a time with milliseconds',
      'terminate',
      '2026-11-20T14:02:00.000Z',
      /ISO 8601 UTC .* got 2026-11-20T14:02:00.000Z/,
    ],
    ['a time without a zone', 'terminate', '2026-11-20T14:02:00', /got 2026-11-20T14:02:00$/],
  ])('refuses a notice with %s', (_label, action, time, message) => {
    expect(() => imds.serveNotice(action as 'terminate', time)).toThrow(InvalidSpotNotice);
    expect(() => imds.serveNotice(action as 'terminate', time)).toThrow(message);
  });
});

describe('awsTimestamp', () => {
  it.each([
    [Date.UTC(2026, 10, 20, 14, 2, 11, 999), '2026-11-20T14:02:11Z'],
    [Date.UTC(2027, 0, 1, 0, 0, 0, 0), '2027-01-01T00:00:00Z'],
  ])('formats %i as %s (seconds precision, UTC)', (ms, expected) => {
    expect(awsTimestamp(ms)).toBe(expected);
  });
});
