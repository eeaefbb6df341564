import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildEvent } from '../../lambdas/domain/events';
import { type InstanceFacts, InvalidLogPosition } from '../../lambdas/shared/ports';
import {
  formatEventLine,
  type LocalBusEvent,
  localEventPublisher,
  localFleetFacts,
  localLogReader,
  MalformedDetail,
} from '../../lib/local/local-ports';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'trainyard-local-ports-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const started = () =>
  buildEvent('Job Started', {
    occurredAt: '2026-11-20T14:02:11Z',
    jobId: 'j1abc',
    team: 'vision',
    user: 'arn:aws:iam::123456789012:user/ada',
    attempt: 2,
    capacity: 'spot',
    queue: 'trainyard-gpu-small-spot',
    batchJobId: 'b-1',
  });

describe('localEventPublisher', () => {
  it('appends each entry to events.jsonl as the EventBridge event a rule target receives', async () => {
    const eventsFile = join(dir, '.trainyard', 'events.jsonl');
    const publisher = localEventPublisher({ eventsFile, now: () => Date.UTC(2026, 10, 20, 14, 2, 12, 500) });
    const entry = started();

    await publisher.publish([entry]);

    const lines = readFileSync(eventsFile, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    const event = JSON.parse(lines[0] ?? '') as LocalBusEvent;
    expect(event).toEqual({
      version: '0',
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      'detail-type': 'Job Started',
      source: 'trainyard',
      account: '000000000000',
      time: '2026-11-20T14:02:12Z',
      region: 'us-east-1',
      resources: [],
      detail: JSON.parse(entry.Detail),
    });
  });

  it('keeps earlier events and writes entries in order across calls', async () => {
    const eventsFile = join(dir, 'events.jsonl');
    const publisher = localEventPublisher({ eventsFile });
    const budget = buildEvent('Budget Threshold Crossed', {
      occurredAt: '2026-11-20T14:05:00Z',
      team: 'vision',
      scope: 'team:vision',
      period: '2026-11',
      thresholdPercent: 70,
      limitUsd: 100,
      spentUsd: 71,
      reservedUsd: 0,
    });

    await publisher.publish([started()]);
    await publisher.publish([budget, started()]);

    const types = readFileSync(eventsFile, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as LocalBusEvent)['detail-type']);
    expect(types).toEqual(['Job Started', 'Budget Threshold Crossed', 'Job Started']);
  });

  it('prints one readable line per event when a printer is given', async () => {
    const printed: string[] = [];
    const publisher = localEventPublisher({ eventsFile: join(dir, 'e.jsonl'), print: (l) => printed.push(l) });

    await publisher.publish([started()]);

    expect(printed).toEqual(['Job Started  job=j1abc team=vision attempt=2 capacity=spot']);
  });

  it('refuses an entry whose Detail is not a JSON object, writing nothing', async () => {
    const eventsFile = join(dir, 'e.jsonl');
    const publisher = localEventPublisher({ eventsFile });
    const good = started();

    await expect(publisher.publish([good, { ...good, Detail: '[1]' }])).rejects.toThrow(MalformedDetail);
    await expect(publisher.publish([{ ...good, Detail: '{oops' }])).rejects.toThrow(
      /entry 0 \(Job Started\) Detail is not JSON/,
    );
    expect(() => readFileSync(eventsFile)).toThrow(/ENOENT/);
  });
});

describe('formatEventLine', () => {
  it.each([
    [
      'Job Interrupted',
      { jobId: 'j1', team: 'vision', attempt: 1, capacity: 'spot', cause: 'reclaimed', reason: 'host went away' },
      'Job Interrupted  job=j1 team=vision attempt=1 capacity=spot cause=reclaimed — host went away',
    ],
    [
      'Budget Threshold Crossed',
      { team: 'vision', scope: 'team:vision', period: '2026-11', thresholdPercent: 70 },
      'Budget Threshold Crossed  team=vision scope=team:vision period=2026-11 thresholdPercent=70',
    ],
    [
      'Job Failed',
      { jobId: 'j2', outcome: 'app-error', costUsd: 0.12 },
      'Job Failed  job=j2 outcome=app-error costUsd=0.12',
    ],
  ])('%s', (detailType, detail, expected) => {
    expect(formatEventLine({ 'detail-type': detailType, detail })).toBe(expected);
  });
});

describe('localLogReader', () => {
  const stream = 'vision/default/0123456789abcdef0123456789abcdef';
  const write = (content: string) => {
    mkdirSync(join(dir, 'logs', 'vision', 'default'), { recursive: true });
    writeFileSync(join(dir, 'logs', `${stream}.log`), content);
  };

  const tail = async (name: string, limit: number) =>
    (await localLogReader(join(dir, 'logs')).readLines(name, 'tail', limit)).lines;

  it('reads the last `limit` lines for a tail, oldest first', async () => {
    write('one\ntwo\nthree\nfour\n');

    expect(await tail(stream, 2)).toEqual(['three', 'four']);
    expect(await tail(stream, 10)).toEqual(['one', 'two', 'three', 'four']);
  });

  it('leaves a last line without a trailing newline for the next read, and hands back the offset before it', async () => {
    write('a\nb');

    expect(await localLogReader(join(dir, 'logs')).readLines(stream, 'tail', 5)).toEqual({
      lines: ['a'],
      next: '2',
      atEnd: true,
    });
  });

  it('reads the tail of a log larger than one read chunk, multi-byte characters intact', async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i} — ünïcødé ${'x'.repeat(i % 50)}`);
    write(`${lines.join('\n')}\n`);

    expect(await tail(stream, 3000)).toEqual(lines.slice(-3000));
  });

  it.each([
    ['a stream that does not exist', 'vision/default/missing'],
    ['a name that climbs out of the logs directory', '../../etc/passwd'],
    ['an absolute name', '/etc/passwd'],
  ])('reads no lines for %s (CloudWatch: ResourceNotFound)', async (_label, name) => {
    write('secret\n');

    expect(await tail(name, 10)).toEqual([]);
  });

  it('reads no lines for a limit of 0', async () => {
    write('a\n');

    expect(await tail(stream, 0)).toEqual([]);
  });

  it('reads on from where the last read ended: every line once, repeats kept, however many arrived', async () => {
    const reader = localLogReader(join(dir, 'logs'));
    write('one\ntwo\n');
    const tail = await reader.readLines(stream, 'tail', 1);
    write('one\ntwo\nsame\nsame\nsame\nlast\n');

    const first = await reader.readLines(stream, { after: tail?.next ?? '' }, 3);
    const second = await reader.readLines(stream, { after: first?.next ?? '' }, 3);

    expect(tail).toEqual({ lines: ['two'], next: '8', atEnd: true });
    expect(first).toEqual({ lines: ['same', 'same', 'same'], next: '23', atEnd: false });
    expect(second).toEqual({ lines: ['last'], next: '28', atEnd: true });
  });

  it('leaves a line still being written for the next read, multi-byte characters intact across chunks', async () => {
    const reader = localLogReader(join(dir, 'logs'));
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i} — ünïcødé ${'x'.repeat(i % 50)}`);
    write(`${lines.join('\n')}\npartial`);

    const head = await reader.readLines(stream, 'head', 4000);
    const rest = await reader.readLines(stream, { after: head?.next ?? '' }, 4000);

    expect(head?.lines).toEqual(lines.slice(0, 4000));
    expect(rest?.lines).toEqual(lines.slice(4000));
    expect(rest?.atEnd).toBe(true);
  });

  it('answers a stream that does not exist yet with no lines and no position (read its head later)', async () => {
    expect(await localLogReader(join(dir, 'logs')).readLines('vision/default/missing', 'tail', 5)).toEqual({
      lines: [],
      atEnd: true,
    });
  });

  it.each([
    ['not a byte offset', 'f/123', '"f/123" is not a byte offset into a local log'],
    ['past the end of the log', '999', 'byte 999 is past the end of the log, which holds 2 bytes'],
  ])('refuses a position %s', async (_label, after, message) => {
    write('a\n');

    await expect(localLogReader(join(dir, 'logs')).readLines(stream, { after }, 5)).rejects.toThrow(
      new InvalidLogPosition(message),
    );
  });
});

describe('localFleetFacts', () => {
  it('answers instance facts from the lookup and no spot price history (config fallback)', async () => {
    const facts: InstanceFacts = {
      instanceId: 'i-0123456789abcdef0',
      instanceType: 'g4dn.xlarge',
      availabilityZone: 'local-1a',
      lifecycle: 'spot',
    };
    const arn = 'arn:aws:ecs:us-east-1:000000000000:container-instance/trainyard-local/abc';
    const fleet = localFleetFacts((a) => (a === arn ? facts : undefined));

    expect(await fleet.instanceFor(arn)).toEqual(facts);
    expect(await fleet.instanceFor(`${arn}x`)).toBeUndefined();
    expect(await fleet.spotPriceAt('g4dn.xlarge', 'local-1a', Date.now())).toBeUndefined();
  });

  it('reports spot capacity as available: the local runner starts every spot attempt at once', async () => {
    const fleet = localFleetFacts(() => undefined);
    expect(await fleet.spotCapacityAvailable?.(['g4dn.xlarge'])).toBe(true);
    expect(await fleet.spotCapacityAvailable?.([])).toBe(true);
  });
});
