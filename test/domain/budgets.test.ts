// Table-driven tests for the pure budget module: scopes (including escape attempts), periods, money, thresholds and
// the per-job entry changes the ledger applies. Expected figures are worked out by hand in micro-dollars.
import { describe, expect, it } from 'vitest';
import {
  accrualChange,
  BudgetExceeded,
  type BudgetFigures,
  claimChange,
  formatUsd,
  fractionUsed,
  InvalidBudgetInput,
  InvalidScope,
  isBlocked,
  isWholeCents,
  type JobEntry,
  jobScopes,
  limitChange,
  newBudgetFigures,
  parseJobId,
  parsePeriod,
  parseScope,
  periodBefore,
  periodOf,
  releaseChange,
  reopenChange,
  reservationEntry,
  settlementChange,
  thresholdsReached,
  topUpChange,
  topUpTakenBack,
  undoRunChange,
  usdToMicros,
  validateThresholds,
} from '../../lambdas/domain/budgets';

const USD = 1_000_000;
// Deltas in USD: [spent, reserved, available]; available always moves by −(spent + reserved) deltas.
const deltas = (change: ReturnType<typeof accrualChange>) =>
  change && [change.spentDelta / USD, change.reservedDelta / USD, change.availableDelta / USD];
const SHAPES = 'scopes are team:<team>, user:<team>/<user> or project:<team>/<project>';
const ID_RULE = "1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit";

describe('parseScope accepts well-formed scopes', () => {
  it.each([
    { text: 'team:nlp', expected: { kind: 'team', team: 'nlp', text: 'team:nlp' } },
    { text: 'user:nlp/alice', expected: { kind: 'user', team: 'nlp', id: 'alice', text: 'user:nlp/alice' } },
    {
      text: 'project:nlp/gpt-2_small.v1',
      expected: { kind: 'project', team: 'nlp', id: 'gpt-2_small.v1', text: 'project:nlp/gpt-2_small.v1' },
    },
    { text: 'team:0', expected: { kind: 'team', team: '0', text: 'team:0' } },
    {
      text: `team:${'a'.repeat(64)}`,
      expected: { kind: 'team', team: 'a'.repeat(64), text: `team:${'a'.repeat(64)}` },
    },
  ])('$text', ({ text, expected }) => {
    expect(parseScope(text)).toEqual(expected);
  });

  it('accepts a scope of the caller’s own team when a team is required', () => {
    expect(parseScope('user:nlp/alice', 'nlp').team).toBe('nlp');
  });
});

describe('parseScope rejects malformed scopes and escape attempts with a precise message', () => {
  it.each([
    { text: '', message: `scope is empty; ${SHAPES}` },
    { text: 42, message: 'scope must be a string, got 42' },
    { text: null, message: 'scope must be a string, got null' },
    {
      text: 'team:nlp#PERIOD#2026-01',
      message: `scope "team:nlp#PERIOD#2026-01" contains '#', which separates DynamoDB key parts and is never allowed`,
    },
    {
      text: 'SCOPE#team:nlp',
      message: `scope "SCOPE#team:nlp" contains '#', which separates DynamoDB key parts and is never allowed`,
    },
    {
      text: 'user:nlp/../vision/bob',
      message: `scope "user:nlp/../vision/bob" contains '..'; path segments like '/..' are never allowed in a scope`,
    },
    {
      text: 'project:nlp/..',
      message: `scope "project:nlp/.." contains '..'; path segments like '/..' are never allowed in a scope`,
    },
    { text: 'team:nlp ', message: `scope "team:nlp " contains whitespace; ${SHAPES}` },
    { text: 'user:nlp/\talice', message: `scope "user:nlp/\\talice" contains whitespace; ${SHAPES}` },
    { text: 'user:nlp/al\nice', message: `scope "user:nlp/al\\nice" contains whitespace; ${SHAPES}` },
    { text: 'org:nlp', message: `scope "org:nlp" has no known kind; ${SHAPES}` },
    { text: 'Team:nlp', message: `scope "Team:nlp" has no known kind; ${SHAPES}` },
    { text: 'nlp', message: `scope "nlp" has no known kind; ${SHAPES}` },
    {
      text: 'team:nlp/alice',
      message: `scope "team:nlp/alice" has 2 '/'-separated part(s); a team scope is team:<team> with exactly 1`,
    },
    {
      text: 'user:nlp',
      message: `scope "user:nlp" has 1 '/'-separated part(s); a user scope is user:<team>/<user> with exactly 2`,
    },
    {
      text: 'user:nlp/alice/x',
      message: `scope "user:nlp/alice/x" has 3 '/'-separated part(s); a user scope is user:<team>/<user> with exactly 2`,
    },
    { text: 'project:/gpt', message: `team id in scope "project:/gpt" is empty; it must be ${ID_RULE}` },
    { text: 'team:', message: `team id in scope "team:" is empty; it must be ${ID_RULE}` },
    { text: 'user:nlp/', message: `user id in scope "user:nlp/" is empty; it must be ${ID_RULE}` },
    { text: 'team:NLP', message: `team id "NLP" in scope "team:NLP" is invalid; it must be ${ID_RULE}` },
    {
      text: 'user:nlp/.hidden',
      message: `user id ".hidden" in scope "user:nlp/.hidden" is invalid; it must be ${ID_RULE}`,
    },
    {
      text: 'user:nlp/al:ice',
      message: `user id "al:ice" in scope "user:nlp/al:ice" is invalid; it must be ${ID_RULE}`,
    },
    { text: 'user:nlp/ålice', message: `user id "ålice" in scope "user:nlp/ålice" is invalid; it must be ${ID_RULE}` },
    { text: 'user:nlp/a*', message: `user id "a*" in scope "user:nlp/a*" is invalid; it must be ${ID_RULE}` },
    {
      text: `team:${'a'.repeat(65)}`,
      message: `team id "${'a'.repeat(65)}" in scope "team:${'a'.repeat(65)}" is invalid; it must be ${ID_RULE}`,
    },
    { text: `project:nlp/${'p'.repeat(130)}`, message: 'scope is 142 characters long; at most 137 are allowed' },
  ])('$text', ({ text, message }) => {
    expect(() => parseScope(text)).toThrow(new InvalidScope(message));
  });

  it.each([
    {
      text: 'team:vision',
      message: `scope "team:vision" belongs to team "vision"; only scopes of team "nlp" may be named here`,
    },
    {
      text: 'user:vision/alice',
      message: `scope "user:vision/alice" belongs to team "vision"; only scopes of team "nlp" may be named here`,
    },
    {
      text: 'project:nlpx/gpt',
      message: `scope "project:nlpx/gpt" belongs to team "nlpx"; only scopes of team "nlp" may be named here`,
    },
  ])("rejects another team's scope $text", ({ text, message }) => {
    expect(() => parseScope(text, 'nlp')).toThrow(new InvalidScope(message));
  });
});

describe('jobScopes', () => {
  it.each([
    { job: { team: 'nlp' }, expected: ['team:nlp'] },
    { job: { team: 'nlp', user: 'alice' }, expected: ['team:nlp', 'user:nlp/alice'] },
    { job: { team: 'nlp', project: 'gpt' }, expected: ['team:nlp', 'project:nlp/gpt'] },
    {
      job: { team: 'nlp', user: 'alice', project: 'gpt-small' },
      expected: ['team:nlp', 'user:nlp/alice', 'project:nlp/gpt-small'],
    },
    // A principal ARN is not a scope id: no user scope for it, and the job is still charged to its team.
    { job: { team: 'nlp', user: 'arn:aws:iam::123456789012:role/nlp' }, expected: ['team:nlp'] },
    // Nor an id that would escape its prefix.
    { job: { team: 'nlp', user: '../vision', project: 'a/b' }, expected: ['team:nlp'] },
  ])('$expected', ({ job, expected }) => {
    expect(jobScopes(job)).toEqual(expected);
  });

  it('rejects a team that is not a scope id', () => {
    expect(() => jobScopes({ team: 'nlp/vision' })).toThrow(InvalidScope);
  });
});

describe('periodOf: calendar month in UTC', () => {
  it.each([
    { at: '2026-01-01T00:00:00.000Z', period: '2026-01' },
    { at: '2025-12-31T23:59:59.999Z', period: '2025-12' },
    { at: '2026-01-31T23:59:59.999Z', period: '2026-01' },
    { at: '2026-02-01T00:00:00.000Z', period: '2026-02' },
    { at: '2028-02-29T12:00:00.000Z', period: '2028-02' },
    // 23:30 on 31 January in New York is already February in UTC.
    { at: '2026-01-31T23:30:00-05:00', period: '2026-02' },
    // 00:30 on 1 March in Tokyo is still February in UTC.
    { at: '2026-03-01T00:30:00+09:00', period: '2026-02' },
    { at: '2026-10-05T08:00:00.000Z', period: '2026-10' },
  ])('$at → $period', ({ at, period }) => {
    expect(periodOf(new Date(at))).toBe(period);
  });

  it('rejects an invalid date', () => {
    expect(() => periodOf(new Date('not a date'))).toThrow(
      new InvalidBudgetInput('cannot compute a budget period from an invalid date'),
    );
  });
});

describe('parsePeriod', () => {
  it.each(['2026-01', '2026-12', '1999-07'])('accepts %s', (text) => {
    expect(parsePeriod(text)).toBe(text);
  });

  it.each([
    { text: '2026-13', got: '"2026-13"' },
    { text: '0999-04', got: '"0999-04"' },
    { text: '2026-00', got: '"2026-00"' },
    { text: '2026-1', got: '"2026-1"' },
    { text: '2026-01-01', got: '"2026-01-01"' },
    { text: '2026-01#x', got: '"2026-01#x"' },
    { text: 202601, got: '202601' },
  ])('rejects $text', ({ text, got }) => {
    expect(() => parsePeriod(text)).toThrow(
      new InvalidBudgetInput(`period must be a calendar month like 2026-01 (YYYY-MM, year 1000 or later), got ${got}`),
    );
  });
});

describe('periodBefore', () => {
  it.each([
    ['2026-03', '2026-02'],
    ['2026-01', '2025-12'],
    ['2026-12', '2026-11'],
  ])('the month before %s is %s', (period, before) => {
    expect(periodBefore(period)).toBe(before);
  });

  it('refuses what is not a period', () => {
    expect(() => periodBefore('2026-13')).toThrow(
      'period must be a calendar month like 2026-01 (YYYY-MM, year 1000 or later), got "2026-13"',
    );
  });
});

describe('parseJobId', () => {
  it.each(['job-1', 'a', '01J8Z6Y3K2:attempt.1_x', 'x'.repeat(128)])('accepts %s', (id) => {
    expect(parseJobId(id)).toBe(id);
  });

  it.each(['', 'x'.repeat(129), 'job#1', 'job 1', 'job/1', '../x'])('rejects %j', (id) => {
    expect(() => parseJobId(id)).toThrow(InvalidBudgetInput);
  });
});

describe('money', () => {
  it.each([
    { usd: 0, micros: 0 },
    { usd: 0.01, micros: 10_000 },
    { usd: 12.5, micros: 12_500_000 },
    { usd: 62.1, micros: 62_100_000 },
    { usd: 0.1 + 0.2, micros: 300_000 },
    { usd: 0.0000004, micros: 0 },
    { usd: 1_000_000_000, micros: 1_000_000_000_000_000 },
  ])('usdToMicros($usd) = $micros', ({ usd, micros }) => {
    expect(usdToMicros(usd)).toBe(micros);
  });

  it.each([
    { usd: Number.NaN, got: 'NaN' },
    { usd: -0.01, got: '-0.01' },
    { usd: Number.POSITIVE_INFINITY, got: 'Infinity' },
    { usd: 1_000_000_001, got: '1000000001' },
    { usd: '12', got: '"12"' },
  ])('usdToMicros rejects $got', ({ usd, got }) => {
    expect(() => usdToMicros(usd, 'reservation amount')).toThrow(
      new InvalidBudgetInput(`reservation amount must be a number of USD from 0 to 1000000000, got ${got}`),
    );
  });

  it('sums of cents stay exact where floats drift', () => {
    const tenCents = Array.from({ length: 10 }, () => usdToMicros(0.1)).reduce((a, b) => a + b, 0);
    expect(tenCents).toBe(USD);
  });

  it.each([
    { micros: 62_100_000, text: '$62.10' },
    { micros: 0, text: '$0.00' },
    { micros: 7_900_000, text: '$7.90' },
    { micros: 4_217, text: '$0.004217' },
    { micros: -3_200_000, text: '-$3.20' },
    { micros: 1_234_567_890, text: '$1234.56789' },
  ])('formatUsd($micros) = $text', ({ micros, text }) => {
    expect(formatUsd(micros)).toBe(text);
  });

  it('BudgetExceeded names the scope, limit, spent, reserved, requested and available', () => {
    const error = new BudgetExceeded({
      scope: 'team:nlp',
      period: '2026-01',
      limitUsd: 100,
      spentUsd: 62.1,
      reservedUsd: 30,
      requestedUsd: 12.5,
      availableUsd: 7.9,
      blockThreshold: 1,
    });
    expect(error.name).toBe('BudgetExceeded');
    expect(error.message).toBe(
      'team:nlp would exceed its budget: limit $100.00, spent $62.10, reserved $30.00, requested $12.50, available $7.90',
    );
  });
});

describe('thresholds', () => {
  it.each([
    {
      thresholds: { warn: 0, block: 1 },
      message: 'warn threshold must be a fraction between 0 and 1 (exclusive), got 0',
    },
    {
      thresholds: { warn: 1, block: 1.5 },
      message: 'warn threshold must be a fraction between 0 and 1 (exclusive), got 1',
    },
    {
      thresholds: { warn: 0.5, block: 2.5 },
      message: 'block threshold must be a fraction above 0 and at most 2, got 2.5',
    },
    { thresholds: { warn: 0.8, block: 0.8 }, message: 'warn threshold (0.8) must be below block threshold (0.8)' },
    {
      thresholds: { warn: Number.NaN, block: 1 },
      message: 'warn threshold must be a fraction between 0 and 1 (exclusive), got NaN',
    },
  ])('rejects $thresholds', ({ thresholds, message }) => {
    expect(() => validateThresholds(thresholds)).toThrow(new InvalidBudgetInput(message));
  });

  const budget = (limitUsd: number, spentUsd: number, reservedUsd: number, block = 1): BudgetFigures => {
    const fresh = newBudgetFigures(limitUsd * USD, block);
    const spentMicros = spentUsd * USD;
    const reservedMicros = reservedUsd * USD;
    return {
      ...fresh,
      spentMicros,
      reservedMicros,
      availableMicros: fresh.blockLimitMicros - spentMicros - reservedMicros,
    };
  };

  it.each([
    { name: 'nothing committed', figures: budget(100, 0, 0), reached: [] },
    { name: 'just under warn', figures: budget(100, 39.99, 30), reached: [] },
    { name: 'exactly warn (spent + reserved)', figures: budget(100, 40, 30), reached: ['warn'] },
    { name: 'between warn and block', figures: budget(100, 99, 0.99), reached: ['warn'] },
    { name: 'exactly the limit', figures: budget(100, 60, 40), reached: ['warn', 'block'] },
    { name: 'beyond the limit', figures: budget(100, 120, 0), reached: ['warn', 'block'] },
    { name: 'block at 110 %: 105 committed', figures: budget(100, 105, 0, 1.1), reached: ['warn'] },
    { name: 'block at 110 %: 110 committed', figures: budget(100, 100, 10, 1.1), reached: ['warn', 'block'] },
    { name: 'zero limit, nothing committed', figures: budget(0, 0, 0), reached: [] },
    { name: 'zero limit, something spent', figures: budget(0, 1, 0), reached: ['warn', 'block'] },
  ])('thresholdsReached: $name', ({ figures, reached }) => {
    expect(thresholdsReached(figures, { warn: 0.7, block: 1 })).toEqual(reached);
  });

  it.each([
    { name: 'within budget', figures: budget(100, 50, 50), blocked: false },
    { name: 'spend reached the limit', figures: budget(100, 100, 0), blocked: true },
    { name: 'commitments beyond the limit', figures: budget(100, 60, 41), blocked: true },
    { name: 'reservations fill the budget exactly', figures: budget(100, 0, 100), blocked: false },
    { name: 'zero limit, nothing spent', figures: budget(0, 0, 0), blocked: false },
  ])('isBlocked: $name', ({ figures, blocked }) => {
    expect(isBlocked(figures)).toBe(blocked);
  });

  it.each([
    { figures: budget(100, 62.1, 30), fraction: 0.921 },
    { figures: budget(0, 5, 0), fraction: null },
    { figures: budget(200, 0, 0), fraction: 0 },
  ])('fractionUsed = $fraction', ({ figures, fraction }) => {
    expect(fractionUsed(figures)).toBe(fraction);
  });

  it.each([
    { old: 100, next: 120, block: 1, delta: 20 },
    { old: 100, next: 50, block: 1, delta: -50 },
    { old: 100, next: 100.01, block: 1, delta: 0.01 },
    { old: 100, next: 200, block: 1.1, delta: 110 },
  ])('limitChange $old → $next at block $block moves available by $delta', ({ old, next, block, delta }) => {
    const change = limitChange(newBudgetFigures(old * USD, block), next * USD, block);
    expect(change?.availableDelta).toBe(Math.round(delta * USD));
  });

  it('limitChange of the same limit is no change', () => {
    expect(limitChange(newBudgetFigures(100 * USD, 1), 100 * USD, 1)).toBeNull();
  });
});

describe('job entry changes', () => {
  const entry = (reserved: number, accrued: number, state: JobEntry['state'] = 'open'): JobEntry => ({
    reserved: reserved * USD,
    accrued: accrued * USD,
    state,
    version: 3,
  });

  it('a fresh reservation holds the whole amount', () => {
    expect(reservationEntry(10 * USD)).toEqual({ reserved: 10 * USD, accrued: 0, state: 'open', version: 1 });
  });

  it.each([
    { name: 'first accrual within the reservation', from: entry(10, 0), to: 4, deltas: [4, -4, 0], left: 6 },
    { name: 'accrual that uses the reservation up', from: entry(6, 4), to: 10, deltas: [6, -6, 0], left: 0 },
    { name: 'accrual past the reservation', from: entry(6, 4), to: 12, deltas: [8, -6, -2], left: 0 },
    { name: 'accrual with nothing left reserved', from: entry(0, 12, 'released'), to: 13, deltas: [1, 0, -1], left: 0 },
  ])('accrualChange: $name', ({ from, to, deltas: expected, left }) => {
    const change = accrualChange(from, to * USD);
    expect(deltas(change)).toEqual(expected);
    expect(change?.entry).toEqual({ reserved: left * USD, accrued: to * USD, state: from.state, version: 4 });
  });

  it.each([
    { name: 'the same figure', from: entry(6, 4), to: 4 },
    { name: 'an older figure', from: entry(6, 4), to: 3 },
    { name: 'a settled job', from: entry(0, 9, 'settled'), to: 20 },
  ])('accrualChange changes nothing for $name', ({ from, to }) => {
    expect(accrualChange(from, to * USD)).toBeNull();
  });

  it.each([
    { name: 'actual below the reservation', from: entry(10, 0), actual: 7.25, deltas: [7.25, -10, 2.75] },
    { name: 'actual above the reservation', from: entry(10, 0), actual: 12.4, deltas: [12.4, -10, -2.4] },
    { name: 'actual below what was accrued', from: entry(4, 6), actual: 5.5, deltas: [-0.5, -4, 4.5] },
    { name: 'actual above what was accrued', from: entry(0, 12.34, 'released'), actual: 13, deltas: [0.66, 0, -0.66] },
    { name: 'nothing spent', from: entry(10, 0), actual: 0, deltas: [0, -10, 10] },
  ])('settlementChange: $name', ({ from, actual, deltas: expected }) => {
    const change = settlementChange(from, Math.round(actual * USD));
    expect(deltas(change)).toEqual(expected);
    expect(change?.entry).toEqual({ reserved: 0, accrued: Math.round(actual * USD), state: 'settled', version: 4 });
  });

  it('settlementChange of a settled job changes nothing', () => {
    expect(settlementChange(entry(0, 5, 'settled'), 9 * USD)).toBeNull();
  });

  it.each([
    { name: 'untouched reservation', from: entry(10, 0), deltas: [0, -10, 10] },
    { name: 'partly accrued reservation', from: entry(6.67, 3.33), deltas: [0, -6.67, 6.67] },
  ])('releaseChange: $name', ({ from, deltas: expected }) => {
    const change = releaseChange(from);
    expect(deltas(change)).toEqual(expected);
    expect(change?.entry).toEqual({ reserved: 0, accrued: from.accrued, state: 'released', version: 4 });
  });

  it.each([{ state: 'released' as const }, { state: 'settled' as const }])(
    'releaseChange of a $state entry changes nothing',
    ({ state }) => {
      expect(releaseChange(entry(0, 1, state))).toBeNull();
    },
  );

  it('reopenChange takes a compensated, never-charged reservation again', () => {
    const change = reopenChange(entry(0, 0, 'released'), 20 * USD);
    expect(deltas(change)).toEqual([0, 20, -20]);
    expect(change?.entry).toEqual({ reserved: 20 * USD, accrued: 0, state: 'open', version: 4 });
  });

  it.each([
    { name: 'an open entry', from: entry(10, 0) },
    { name: 'a released entry that was charged', from: entry(0, 3, 'released') },
    { name: 'a settled entry', from: entry(0, 0, 'settled') },
  ])('reopenChange leaves $name alone', ({ from }) => {
    expect(reopenChange(from, 20 * USD)).toBeNull();
  });
});

describe('reserve saga runs', () => {
  const held = (run?: number, state: JobEntry['state'] = 'open'): JobEntry => ({
    reserved: 20 * USD,
    accrued: 0,
    state,
    version: 3,
    ...(run === undefined ? {} : { run }),
  });

  it('claimChange hands an earlier run’s open reservation to a later run, moving no money', () => {
    const change = claimChange(held(), 2);
    expect(deltas(change)).toEqual([0, 0, 0]);
    expect(change?.entry).toEqual({ reserved: 20 * USD, accrued: 0, state: 'open', version: 4, run: 2 });
  });

  it.each([
    { name: 'one the same run holds', from: held(2), run: 2 },
    { name: 'one a later run holds', from: held(3), run: 2 },
    { name: 'a released one', from: held(undefined, 'released'), run: 2 },
  ])('claimChange leaves $name alone', ({ from, run }) => {
    expect(claimChange(from, run)).toBeNull();
  });

  it('undoRunChange releases what the run or an earlier one holds, never what a later run holds', () => {
    expect(deltas(undoRunChange(held(), 0))).toEqual([0, -20, 20]);
    expect(deltas(undoRunChange(held(1), 1))).toEqual([0, -20, 20]);
    expect(undoRunChange(held(2), 1)).toBeNull();
  });

  it('every change keeps the run that holds the entry', () => {
    const entry = held(2);
    for (const change of [
      accrualChange(entry, 5 * USD),
      settlementChange(entry, 5 * USD),
      topUpChange(entry, 30 * USD),
      topUpTakenBack(entry, 5 * USD),
      releaseChange(entry),
      reopenChange(held(2, 'released'), 20 * USD, 2),
    ]) {
      expect(change?.entry.run).toBe(2);
    }
  });
});

describe('isWholeCents', () => {
  it('accepts every whole-cent amount up to the largest limit, however binary floating point holds it', () => {
    // Amounts written as decimals, parsed as a JSON body or a CLI argument is: some are off by an ulp when × 100.
    const amounts = ['592488068.44', '999999999.99', '1000000000', '0.01', '12.5', '86000000.07', '0.3'];
    let seed = 7;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 48271) % 2147483647;
      const cents = Math.floor((seed / 2147483647) * 100_000_000_000);
      amounts.push(`${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`);
    }
    expect(amounts.filter((text) => !isWholeCents(Number(text)))).toEqual([]);
    expect(isWholeCents(0.1 + 0.2)).toBe(true);
  });

  it('refuses fractions of a cent, near $0 and near the largest limit', () => {
    expect(
      ['12.345', '1e-9', '0.001', '999999999.995', '592488068.441'].filter((t) => isWholeCents(Number(t))),
    ).toEqual([]);
  });
});
