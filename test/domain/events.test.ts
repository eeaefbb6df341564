import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  buildEvent,
  DETAIL_TYPES,
  type DetailType,
  EVENT_SCHEMAS,
  type EventDetailInput,
  eventIdFor,
  InvalidEventDetail,
  MAX_ENTRY_BYTES,
  MAX_SUMMARY_CHARS,
  oneLine,
  parseEventDetail,
} from '../../lambdas/domain/events';

const DOC = readFileSync(join(import.meta.dirname, '../../docs/events.md'), 'utf8');

/** The `### <detail-type>` sections of docs/events.md: their field tables and JSON examples. */
function docSection(detailType: string): { fields: string[]; example: Record<string, unknown> } {
  const start = DOC.indexOf(`\n### ${detailType}\n`);
  if (start < 0) throw new Error(`docs/events.md has no section "### ${detailType}"`);
  const end = DOC.indexOf('\n### ', start + 1);
  const body = DOC.slice(start, end < 0 ? undefined : end);
  const fields = [...body.matchAll(/^\| `([A-Za-z]+)` \|/gm)].map((m) => m[1] ?? '');
  const json = /```json\n([\s\S]*?)\n```/.exec(body)?.[1];
  if (json === undefined) throw new Error(`section "${detailType}" has no JSON example`);
  return { fields, example: JSON.parse(json) as Record<string, unknown> };
}

function withoutBuilderFields(detail: Record<string, unknown>): Record<string, unknown> {
  const { version: _version, eventId: _eventId, summary: _summary, ...rest } = detail;
  return rest;
}

const JOB = {
  occurredAt: '2026-11-20T13:40:02Z',
  jobId: '01JDA7Q6ZK3V8N2M4P5R6S7T8W',
  team: 'vision',
  user: 'arn:aws:iam::123456789012:user/alice',
};

describe('docs/events.md', () => {
  it('documents every detail-type and nothing else', () => {
    const documented = [...DOC.matchAll(/^### (.+)$/gm)].map((m) => m[1]);

    expect(documented).toEqual(DETAIL_TYPES);
  });

  it.each(DETAIL_TYPES)('"%s": the field table lists exactly the schema fields', (detailType) => {
    const { fields } = docSection(detailType);

    expect([...fields].sort()).toEqual(Object.keys(EVENT_SCHEMAS[detailType].shape).sort());
  });

  it.each(DETAIL_TYPES)(
    '"%s": the example is a valid detail whose eventId is the one the builder makes',
    (detailType) => {
      const { example } = docSection(detailType);

      const parsed = parseEventDetail(detailType, example);
      const rebuilt = buildEvent(detailType, withoutBuilderFields(example) as EventDetailInput<typeof detailType>);

      expect(parsed).toEqual(example);
      expect(JSON.parse(rebuilt.Detail)).toEqual(example);
    },
  );
});

describe('buildEvent', () => {
  it('returns the PutEvents entry: source trainyard, the detail-type, the detail as JSON, the bus when given', () => {
    const entry = buildEvent(
      'Job Started',
      { ...JOB, attempt: 2, capacity: 'on-demand', queue: 'trainyard-gpu-small-on-demand', batchJobId: 'b-2' },
      { eventBusName: 'trainyard-events' },
    );

    expect(entry.Source).toBe('trainyard');
    expect(entry.DetailType).toBe('Job Started');
    expect(entry.EventBusName).toBe('trainyard-events');
    expect(JSON.parse(entry.Detail)).toEqual({
      version: '1',
      eventId: '01JDA7Q6ZK3V8N2M4P5R6S7T8W/started/2',
      ...JOB,
      attempt: 2,
      capacity: 'on-demand',
      queue: 'trainyard-gpu-small-on-demand',
      batchJobId: 'b-2',
      summary: 'Job 01JDA7Q6ZK3V8N2M4P5R6S7T8W started attempt 2 on on-demand (trainyard-gpu-small-on-demand).',
    });
  });

  it('leaves EventBusName out when none is given (PutEvents then uses the default bus)', () => {
    const entry = buildEvent('Job Cancelled', {
      ...JOB,
      attempts: 0,
      costUsd: 0,
      reason: 'Cancelled before it started.',
    });

    expect(Object.keys(entry).sort()).toEqual(['Detail', 'DetailType', 'Source']);
  });

  it.each([
    ['Job Submitted', { jobId: 'j1' }, 'j1/submitted'],
    ['Job Interrupted', { jobId: 'j1', attempt: 3 }, 'j1/interrupted/3'],
    ['Job Resumed', { jobId: 'j1', attempt: 4 }, 'j1/resumed/4'],
    ['Job FellBackToOnDemand', { jobId: 'j1', attempt: 4 }, 'j1/fell-back-to-on-demand/4'],
    ['Job Succeeded', { jobId: 'j1' }, 'j1/succeeded'],
    ['Job Failed', { jobId: 'j1' }, 'j1/failed'],
    ['Job PausedForBudget', { jobId: 'j1', attempt: 2, pause: 3 }, 'j1/paused-for-budget/3'],
    [
      'Budget Threshold Crossed',
      { scope: 'user:vision/alice', period: '2026-12', thresholdPercent: 70 },
      'budget/user:vision/alice/2026-12/threshold/70',
    ],
    [
      'Budget Exhausted',
      { scope: 'team:vision', period: '2026-12', limitUsd: 750 },
      'budget/team:vision/2026-12/exhausted/750',
    ],
    [
      'Cost Report Ready',
      { team: undefined, report: 'daily', periodStart: '2026-12-01', periodEnd: '2026-12-01' },
      'report/daily/2026-12-01/2026-12-01/all-teams',
    ],
  ] as const)('gives "%s" a deterministic eventId built from what it is about', (detailType, change, eventId) => {
    const example = withoutBuilderFields(docSection(detailType).example);
    const merged: Record<string, unknown> = { ...example, ...change };
    if ('team' in change && change.team === undefined) delete merged.team;
    const detail = merged as EventDetailInput<DetailType>;

    const first = buildEvent(detailType, detail);
    const again = buildEvent(detailType, structuredClone(detail));

    expect(eventIdFor(detailType, detail)).toBe(eventId);
    expect(JSON.parse(first.Detail).eventId).toBe(eventId);
    expect(again).toEqual(first);
  });

  it('gives the same event a different id when what it is about differs', () => {
    const base = withoutBuilderFields(docSection('Job Interrupted').example) as EventDetailInput<'Job Interrupted'>;

    expect(eventIdFor('Job Interrupted', base)).not.toBe(eventIdFor('Job Interrupted', { ...base, attempt: 2 }));
    expect(eventIdFor('Job Interrupted', base)).toBe(
      eventIdFor('Job Interrupted', { ...base, occurredAt: '2027-01-01T00:00:00Z' }),
    );
  });

  it.each([
    ['Job Submitted', { estimatedCostUsd: -1 }, /invalid "Job Submitted" detail: estimatedCostUsd: /],
    ['Job Started', { capacity: 'reserved' }, /capacity: .*"spot".*"on-demand"/],
    ['Job Started', { jobId: 'has space' }, /jobId: must be 1-80 characters/],
    ['Job Interrupted', { cause: 'succeeded' }, /cause: /],
    ['Job Resumed', { checkpointUri: 'https://example.com/ckpt' }, /checkpointUri: .*s3:\/\//],
    ['Job PausedForBudget', { scope: 'team:vision/alice' }, /scope: must be a budget scope/],
    ['Budget Threshold Crossed', { period: '2026-13' }, /period: must be a calendar month/],
    ['Budget Exhausted', { pausedJobIds: ['ok', 'not ok'] }, /pausedJobIds\[1\]: /],
    ['Cost Report Ready', { periodStart: '2026-11-31' }, /periodStart: /],
    ['Job Failed', { surprise: 1 }, /Unrecognized key.*surprise/],
    ['Job Succeeded', { occurredAt: '2026-11-20 15:31' }, /occurredAt: /],
  ] as const)('refuses a "%s" detail with %j, naming the field', (detailType, change, message) => {
    const detail = {
      ...withoutBuilderFields(docSection(detailType).example),
      ...change,
    } as EventDetailInput<DetailType>;

    expect(() => buildEvent(detailType, detail)).toThrow(InvalidEventDetail);
    expect(() => buildEvent(detailType, detail)).toThrow(message);
  });

  it.each(['version', 'eventId', 'summary'])('refuses a caller-supplied %s', (field) => {
    const documented = docSection('Job Succeeded').example;
    const detail = { ...withoutBuilderFields(documented), [field]: documented[field] };

    expect(() => buildEvent('Job Succeeded', detail as EventDetailInput<'Job Succeeded'>)).toThrow(
      'version, eventId and summary are set by buildEvent, not by callers',
    );
  });

  it('keeps a summary to one line the alert templates can hold, whatever the reason says', () => {
    const failed = buildEvent('Job Failed', {
      ...JOB,
      tier: 'gpu-small',
      attempts: 2,
      costUsd: 1.5,
      outcome: 'app-error',
      exitCode: 2,
      reason: 'Container exit code 2:\n  Traceback "train.py", line 3\\n',
    });

    expect(JSON.parse(failed.Detail).summary).toBe(
      "Job 01JDA7Q6ZK3V8N2M4P5R6S7T8W (team vision) failed on gpu-small after 2 attempts (app-error, exit code 2), having cost $1.50. Container exit code 2: Traceback 'train.py', line 3/n",
    );
  });

  it(`cuts a summary at ${MAX_SUMMARY_CHARS} characters`, () => {
    const pausedJobIds = Array.from({ length: 100 }, (_, i) => `job-${String(i).padStart(20, '0')}`);
    const detail = { ...withoutBuilderFields(docSection('Budget Exhausted').example), pausedJobIds };

    const summary = JSON.parse(buildEvent('Budget Exhausted', detail as EventDetailInput<'Budget Exhausted'>).Detail)
      .summary as string;

    expect(summary).toHaveLength(MAX_SUMMARY_CHARS);
    expect(summary.startsWith('Budget project:vision/shakespeare for 2026-11 is exhausted: $50.02 spent')).toBe(true);
    expect(summary.endsWith('…')).toBe(true);
    expect(oneLine(' a\t"b"\n\\c ')).toBe("a 'b' /c");
    // Other control characters too: the alert templates put the summary into JSON as it is.
    expect(oneLine('exit\u0001code\u001b[31m 1\u007f')).toBe('exit code [31m 1');
    // A cut never splits a character: half a surrogate pair would be written as a lone \uD83D escape.
    expect(oneLine(`${'x'.repeat(598)}🚀🚀`)).toBe(`${'x'.repeat(598)}…`);
    expect(oneLine(`${'x'.repeat(597)}🚀🚀`)).toBe(`${'x'.repeat(597)}🚀…`);
  });

  it('refuses an unknown detail-type and lists the known ones', () => {
    expect(() => parseEventDetail('Job Exploded' as DetailType, {})).toThrow(
      /unknown detail-type "Job Exploded"; Trainyard emits "Job Submitted", .*"Cost Report Ready"/,
    );
  });

  it(`refuses an entry larger than PutEvents' ${MAX_ENTRY_BYTES} bytes`, () => {
    const pausedJobIds = Array.from({ length: 12_000 }, (_, i) => `job-${String(i).padStart(20, '0')}`);
    const detail = { ...withoutBuilderFields(docSection('Budget Exhausted').example), pausedJobIds };

    expect(() => buildEvent('Budget Exhausted', detail as EventDetailInput<'Budget Exhausted'>)).toThrow(
      /bytes; PutEvents accepts at most 262144 bytes per entry/,
    );
  });
});

describe('money in event summaries', () => {
  const summaryOf = (entry: { Detail: string }) => (JSON.parse(entry.Detail) as { summary: string }).summary;

  it('rounds a half cent up, as the platform rounds money (2.675 is 2.67499… in binary)', () => {
    const report = buildEvent('Cost Report Ready', {
      occurredAt: '2026-11-16T01:30:00Z',
      report: 'weekly',
      periodStart: '2026-11-09',
      periodEnd: '2026-11-15',
      team: 'vision',
      uri: 's3://b/reports/weekly/2026-11-09/teams/vision.json',
      totalUsd: 2.675,
      jobs: 3,
    });
    expect(summaryOf(report)).toContain(': $2.68 over 3 job(s)');
    const crossed = buildEvent('Budget Threshold Crossed', {
      occurredAt: '2026-11-20T17:00:00Z',
      team: 'vision',
      scope: 'team:vision',
      period: '2026-11',
      thresholdPercent: 70,
      limitUsd: 1.4,
      spentUsd: 1.005,
      reservedUsd: 1000.005,
    });
    expect(summaryOf(crossed)).toContain('crossed 70 %: $1.01 spent');
    expect(summaryOf(crossed)).toContain('$1000.01');
  });
});
