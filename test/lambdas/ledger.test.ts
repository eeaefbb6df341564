// The budgets ledger against dynalite: a real engine speaking the DynamoDB API, conditional writes included.
// Expected figures are worked out here in whole cents, independently of the ledger's micro-dollar arithmetic.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DocumentClient, DynamoDbError } from '../../lambdas/shared/dynamo';
import {
  BudgetExceeded,
  BudgetJobConflict,
  BudgetLedger,
  BudgetNotFound,
  ConcurrentUpdate,
  InvalidScope,
  type ThresholdCrossing,
  UnknownBudgetJob,
} from '../../lambdas/shared/ledger';
import { budgetKeys } from '../../lambdas/shared/table-design';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';

const PERIOD = '2026-03';
const cents = (c: number) => c / 100;

let dynamo: TestDynamo;
let teamSeq = 0;

beforeAll(async () => {
  dynamo = await startTestDynamo();
});

afterAll(async () => {
  await dynamo?.stop();
});

/** A fresh team name per test, so tests never see each other's budgets. */
function freshTeam(): string {
  teamSeq += 1;
  return `team-${teamSeq}`;
}

function newLedger(thresholds = { warn: 0.7, block: 1 }): BudgetLedger {
  return new BudgetLedger({
    client: dynamo.doc,
    tableName: dynamo.tables.budgets,
    thresholds,
    now: () => new Date('2026-03-15T12:00:00.000Z'),
  });
}

/** What the client throws once it has run out of attempts on a dropped connection. */
const wireError = () => new DynamoDbError('DynamoDbNetworkError', 'socket hang up', { retryable: true });

/**
 * A ledger whose every write (PutItem or UpdateItem, counted from 1) first goes through `onWrite(n, pk)`, which may
 * hold it back or fail it the way a dropped connection does: the engine is real, only the wire is played with.
 */
function ledgerWithWrites(onWrite: (n: number, pk: string) => Promise<void>): BudgetLedger {
  let seen = 0;
  const doc: DocumentClient = {
    ...dynamo.doc,
    put: async (input) => {
      await onWrite(++seen, String(input.Item.pk));
      return dynamo.doc.put(input);
    },
    update: async (input) => {
      await onWrite(++seen, String(input.Key.pk));
      return dynamo.doc.update(input);
    },
  };
  return new BudgetLedger({ client: doc, tableName: dynamo.tables.budgets, thresholds: { warn: 0.7, block: 1 } });
}

/**
 * A ledger whose connection to dynalite drops for good after `writes` successful writes, the way a Lambda dies
 * mid-saga (or, with `until`, is back after the `until`-th write).
 */
function ledgerThatCrashesAfter(writes: number, until = Number.POSITIVE_INFINITY): BudgetLedger {
  return ledgerWithWrites(async (n) => {
    if (n > writes && n <= until) throw wireError();
  });
}

/** A write held back until the test lets it go: `reached` resolves once the write is waiting. */
function heldWrite(): { reached: Promise<void>; wait: () => Promise<void>; letGo: () => void } {
  let arrive = () => {};
  let letGo = () => {};
  const reached = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  return {
    reached,
    letGo,
    wait: () => {
      arrive();
      return released;
    },
  };
}

async function snapshot() {
  return dynamo.scanAll(dynamo.tables.budgets);
}

async function figures(ledger: BudgetLedger, scope: string) {
  const usage = await ledger.usage(scope, PERIOD);
  if (!usage) throw new Error(`no budget for ${scope}`);
  return usage;
}

/** The job entry a scope item holds for a job, read straight from the table. */
async function entryOf(scope: string, jobId: string) {
  const items = await snapshot();
  const item = items.find((i) => i.pk === `SCOPE#${scope}` && i.sk === `PERIOD#${PERIOD}`);
  const jobs = (item?.jobs ?? {}) as Record<string, { reserved: number; accrued: number; state: string }>;
  return jobs[jobId];
}

async function settledOutcome<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

describe('concurrent reservations', () => {
  it('admits exactly the 37 of 200 concurrent $2.70 reservations that fit a $100.00 budget', async () => {
    const team = freshTeam();
    const scope = `team:${team}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    const budgetCents = 10_000;
    const amountCents = 270;
    const fits = Math.floor(budgetCents / amountCents);
    expect(fits).toBe(37);

    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        settledOutcome(ledger.reserve(`job-${i}`, [scope], cents(amountCents), PERIOD)),
      ),
    );

    const admitted = outcomes.filter((o) => o.ok);
    const refused = outcomes.filter((o) => !o.ok);
    expect(admitted).toHaveLength(fits);
    expect(refused).toHaveLength(200 - fits);
    for (const outcome of refused) expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(BudgetExceeded);
    const usage = await figures(ledger, scope);
    expect(usage.reservedUsd).toBe(cents(fits * amountCents));
    expect(usage.availableUsd).toBe(cents(budgetCents - fits * amountCents));
    expect(usage.spentUsd).toBe(0);
    // 70 % of $100 is crossed by exactly one of the admitted reservations; $99.90 never reaches the block threshold.
    const crossings = admitted.flatMap((o) => (o.ok ? o.value.crossings : []));
    expect(crossings.map((c) => c.threshold)).toEqual(['warn']);
  });

  it('admits exactly the jobs that fit the tighter of two scopes and leaves no reservation of refused jobs', async () => {
    const team = freshTeam();
    const ledger = newLedger();
    const teamScope = `team:${team}`;
    const projectScope = `project:${team}/shared`;
    await ledger.ensureBudget(teamScope, PERIOD, 100);
    await ledger.setLimit(projectScope, PERIOD, 25);

    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        settledOutcome(ledger.reserve(`multi-${i}`, [teamScope, projectScope], 5, PERIOD)),
      ),
    );

    expect(outcomes.filter((o) => o.ok)).toHaveLength(5);
    expect((await figures(ledger, teamScope)).reservedUsd).toBe(25);
    expect((await figures(ledger, teamScope)).availableUsd).toBe(75);
    expect((await figures(ledger, projectScope)).availableUsd).toBe(0);
  });
});

describe('concurrent duplicates of one operation', () => {
  it('ten concurrent duplicates of one multi-scope reservation reserve it once and all answer ok', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `project:${team}/dup`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 100);

    const results = await Promise.all(
      Array.from({ length: 10 }, () => ledger.reserve(`${team}-once`, scopes, 12.34, PERIOD)),
    );

    expect(results.every((r) => r.ok)).toBe(true);
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(12.34);
    expect((await figures(ledger, scopes[1] as string)).reservedUsd).toBe(12.34);
  });

  it('five concurrent settles with different amounts apply one amount once and all return it', async () => {
    const team = freshTeam();
    const scope = `team:${team}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve(`${team}-fin`, [scope], 10, PERIOD);

    const results = await Promise.all([1, 2, 3, 4, 5].map((usd) => ledger.settle(`${team}-fin`, usd)));

    const actual = results[0]?.actualUsd;
    expect(results.every((r) => r.actualUsd === actual)).toBe(true);
    const usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd]).toEqual([actual, 0]);
    expect(usage.availableUsd).toBe(cents(10_000 - Math.round((actual ?? Number.NaN) * 100)));
  });
});

describe('overlapping invocations of one reservation, one failing on the wire', () => {
  async function twoScopes(user: string) {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/${user}`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 50);
    return {
      team,
      scopes,
      ledger,
      reserved: async () => Promise.all(scopes.map(async (s) => (await figures(ledger, s)).reservedUsd)),
    };
  }

  it('the one that fails after its twin finished undoes nothing: the reservation stands in every scope', async () => {
    const { team, scopes, ledger, reserved } = await twoScopes('gus');
    const userWrite = heldWrite();
    // The failing twin's writes: its job record, the team scope, then the user scope, held and then cut.
    const failing = settledOutcome(
      ledgerWithWrites(async (n) => {
        if (n !== 3) return;
        await userWrite.wait();
        throw wireError();
      }).reserve(`${team}-t1`, scopes, 20, PERIOD),
    );
    await userWrite.reached;

    expect((await ledger.reserve(`${team}-t1`, scopes, 20, PERIOD)).ok).toBe(true);
    userWrite.letGo();
    const outcome = await failing;

    expect(outcome.ok ? undefined : (outcome.error as Error).message).toBe('socket hang up');
    expect(await reserved()).toEqual([20, 20]);
    await expect(ledger.reserve(`${team}-t1`, scopes, 20, PERIOD)).resolves.toMatchObject({ ok: true });
    expect(await reserved()).toEqual([20, 20]);
  });

  it('one mid-saga does not complete over the undo of the one that failed; the retry reserves once', async () => {
    const { team, scopes, ledger, reserved } = await twoScopes('hal');
    const userWrite = heldWrite();
    // The first invocation's writes: its job record, the team scope, then the user scope, held.
    const first = settledOutcome(
      ledgerWithWrites(async (n) => {
        if (n === 3) await userWrite.wait();
      }).reserve(`${team}-t2`, scopes, 20, PERIOD),
    );
    await userWrite.reached;
    // The overlapping one finds the team scope reserved, is cut at the user scope, and undoes the team scope.
    const failing = ledgerWithWrites(async (n) => {
      if (n === 3) throw wireError();
    });
    await expect(failing.reserve(`${team}-t2`, scopes, 20, PERIOD)).rejects.toThrow('socket hang up');
    expect(await reserved()).toEqual([0, 0]);

    userWrite.letGo();
    const outcome = await first;

    expect(outcome.ok).toBe(false);
    expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(ConcurrentUpdate);
    expect(await reserved()).toEqual([0, 20]);
    await expect(ledger.reserve(`${team}-t2`, scopes, 20, PERIOD)).resolves.toMatchObject({ ok: true });
    expect(await reserved()).toEqual([20, 20]);
  });

  it('a reservation given back because the job was released meanwhile leaves no crossing behind', async () => {
    const team = freshTeam();
    const scope = `team:${team}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    const finalWrite = heldWrite();
    // Writes: the job record, the scope ($80 of $100: past the 70 % warning), the warn marker, then the job record's
    // `reserved`, held while Finalize releases the job (cancelled before its cost gate finished).
    const reserving = settledOutcome(
      ledgerWithWrites(async (n) => {
        if (n === 4) await finalWrite.wait();
      }).reserve(`${team}-gone`, [scope], 80, PERIOD),
    );
    await finalWrite.reached;
    expect((await figures(ledger, scope)).thresholdsCrossed).toEqual(['warn']);

    await ledger.release(`${team}-gone`);
    finalWrite.letGo();
    const outcome = await reserving;

    expect(outcome.ok ? undefined : outcome.error).toBeInstanceOf(BudgetJobConflict);
    expect(await figures(ledger, scope)).toMatchObject({ reservedUsd: 0, availableUsd: 100, thresholdsCrossed: [] });
    expect((await ledger.unpublishedAlerts(team, PERIOD)).crossings).toEqual([]);
    // The threshold is marked when money that stays crosses it.
    const real = await ledger.reserve(`${team}-real`, [scope], 75, PERIOD);
    expect(real.crossings.map((c) => c.threshold)).toEqual(['warn']);
  });

  it("a slow undo of the failed run leaves alone what the cost gate's retry reserved meanwhile", async () => {
    const { team, scopes, ledger, reserved } = await twoScopes('ida');
    const undoWrite = heldWrite();
    // Writes: the job record, the team scope, the user scope (cut); then the undo, whose write to the team scope is
    // held while the retry runs.
    const failing = settledOutcome(
      ledgerWithWrites(async (n, pk) => {
        if (n === 3) throw wireError();
        if (n > 3 && pk === `SCOPE#${scopes[0]}`) await undoWrite.wait();
      }).reserve(`${team}-t3`, scopes, 20, PERIOD),
    );
    await undoWrite.reached;

    expect((await ledger.reserve(`${team}-t3`, scopes, 20, PERIOD)).ok).toBe(true);
    expect(await reserved()).toEqual([20, 20]);
    undoWrite.letGo();
    const outcome = await failing;

    expect(outcome.ok ? undefined : (outcome.error as Error).message).toBe('socket hang up');
    expect(await reserved()).toEqual([20, 20]);
    expect(await entryOf(scopes[0] as string, `${team}-t3`)).toMatchObject({ reserved: 20_000_000, state: 'open' });
  });
});

describe('replays change nothing the second time', () => {
  it('ensureBudget: the second call with another limit keeps the first budget', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    expect(await ledger.ensureBudget(scope, PERIOD, 100)).toEqual({ created: true });
    const before = await snapshot();

    expect(await ledger.ensureBudget(scope, PERIOD, 250)).toEqual({ created: false });

    expect(await snapshot()).toEqual(before);
    expect((await figures(ledger, scope)).limitUsd).toBe(100);
  });

  it('setLimit: setting the same limit twice writes once', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('sl-1', [scope], 30, PERIOD);
    const first = await ledger.setLimit(scope, PERIOD, 120);
    const before = await snapshot();

    const second = await ledger.setLimit(scope, PERIOD, 120);

    expect(await snapshot()).toEqual(before);
    expect(second.usage).toEqual(first.usage);
    expect(first.usage.availableUsd).toBe(90);
  });

  it('reserve: the second call returns the first result and writes nothing', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    const first = await ledger.reserve('r-1', [scope], 80, PERIOD);
    const before = await snapshot();

    const second = await ledger.reserve('r-1', [scope], 80, PERIOD);

    expect(second).toEqual(first);
    expect(first.crossings.map((c) => c.threshold)).toEqual(['warn']);
    expect(await snapshot()).toEqual(before);
  });

  it('reserve: a refused reservation replayed is refused again with the same message', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 10);
    const first = await settledOutcome(ledger.reserve('r-2', [scope], 12.5, PERIOD));
    const before = await snapshot();

    const second = await settledOutcome(ledger.reserve('r-2', [scope], 12.5, PERIOD));

    expect(first.ok).toBe(false);
    expect(second.ok).toBe(false);
    const message = (o: typeof first) => (o.ok ? '' : (o.error as Error).message);
    expect(message(second)).toBe(message(first));
    expect(await snapshot()).toEqual(before);
  });

  it('accrue: the same figure, then an older one, change nothing', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('a-1', [scope], 10, PERIOD);
    await ledger.accrue('a-1', 4);
    const before = await snapshot();

    const same = await ledger.accrue('a-1', 4);
    const older = await ledger.accrue('a-1', 3.5);

    expect(same).toEqual({ crossings: [], blockedScopes: [] });
    expect(older).toEqual({ crossings: [], blockedScopes: [] });
    expect(await snapshot()).toEqual(before);
    const usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd]).toEqual([4, 6, 90]);
  });

  it('settle: a second settle with another amount returns the first result and writes nothing', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('s-1', [scope], 10, PERIOD);
    const first = await ledger.settle('s-1', 7.25);
    const before = await snapshot();

    const second = await ledger.settle('s-1', 9.99);

    expect(second).toEqual(first);
    expect(first.actualUsd).toBe(7.25);
    expect(await snapshot()).toEqual(before);
  });

  it('release: a second release returns the first result and writes nothing', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('rl-1', [scope], 10, PERIOD);
    const first = await ledger.release('rl-1');
    const before = await snapshot();

    const second = await ledger.release('rl-1');

    expect(second).toEqual(first);
    expect(first.returned).toEqual([{ scope, returnedUsd: 10 }]);
    expect(await snapshot()).toEqual(before);
  });
});

describe('multi-scope saga', () => {
  it('a saga that fails on its third scope leaves no reservation behind in the first two', async () => {
    const team = freshTeam();
    const ledger = newLedger();
    const scopes = [`team:${team}`, `user:${team}/alice`, `project:${team}/tiny`];
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 50);
    await ledger.setLimit(scopes[2] as string, PERIOD, 5);
    await ledger.reserve('earlier', [scopes[2] as string], 1.2, PERIOD);
    await ledger.settle('earlier', 1.1);

    const outcome = await settledOutcome(ledger.reserve('too-big', scopes, 12.5, PERIOD));

    expect(outcome.ok).toBe(false);
    const error = outcome.ok ? undefined : outcome.error;
    expect(error).toBeInstanceOf(BudgetExceeded);
    expect((error as Error).message).toBe(
      `project:${team}/tiny would exceed its budget: limit $5.00, spent $1.10, reserved $0.00, requested $12.50, available $3.90`,
    );
    const team0 = await figures(ledger, scopes[0] as string);
    const user = await figures(ledger, scopes[1] as string);
    expect([team0.reservedUsd, team0.availableUsd]).toEqual([0, 100]);
    expect([user.reservedUsd, user.availableUsd]).toEqual([0, 50]);
    expect(await entryOf(scopes[0] as string, 'too-big')).toMatchObject({ reserved: 0, state: 'released' });
    expect(await entryOf(scopes[1] as string, 'too-big')).toMatchObject({ reserved: 0, state: 'released' });
    expect(await entryOf(scopes[2] as string, 'too-big')).toBeUndefined();
  });

  it('a saga that died after its first scope is completed exactly once by a replay', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/carol`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 50);

    // Writes: the job record, then the team scope; the user scope's write and the compensation never arrive.
    await expect(ledgerThatCrashesAfter(2).reserve(`${team}-c1`, scopes, 20, PERIOD)).rejects.toThrow('socket hang up');
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(20);
    expect((await figures(ledger, scopes[1] as string)).reservedUsd).toBe(0);
    const replay = await ledger.reserve(`${team}-c1`, scopes, 20, PERIOD);

    expect(replay.ok).toBe(true);
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(20);
    expect((await figures(ledger, scopes[1] as string)).reservedUsd).toBe(20);
  });

  it('a release after a saga died mid-way returns what the dead saga had reserved', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/dave`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 50);
    await expect(ledgerThatCrashesAfter(2).reserve(`${team}-c2`, scopes, 20, PERIOD)).rejects.toThrow('socket hang up');

    const released = await ledger.release(`${team}-c2`);

    expect(released.returned).toEqual([
      { scope: scopes[0], returnedUsd: 20 },
      { scope: scopes[1], returnedUsd: 0 },
    ]);
    expect((await figures(ledger, scopes[0] as string)).availableUsd).toBe(100);
    expect((await figures(ledger, scopes[1] as string)).availableUsd).toBe(50);
  });

  it('a saga whose second scope fails on the wire compensates the first before rethrowing', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/erin`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 50);
    let updates = 0;
    const doc: DocumentClient = {
      ...dynamo.doc,
      update: async (input) => {
        // Exactly the second UpdateItem (the user scope's reservation) fails; everything else goes through.
        if (++updates === 2) throw new DynamoDbError('DynamoDbNetworkError', 'connection reset', { retryable: true });
        return dynamo.doc.update(input);
      },
    };
    const flaky = new BudgetLedger({
      client: doc,
      tableName: dynamo.tables.budgets,
      thresholds: { warn: 0.7, block: 1 },
    });

    await expect(flaky.reserve(`${team}-c3`, scopes, 20, PERIOD)).rejects.toThrow('connection reset');

    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(0);
    expect((await figures(ledger, scopes[1] as string)).reservedUsd).toBe(0);
    const retried = await ledger.reserve(`${team}-c3`, scopes, 20, PERIOD);
    expect(retried.ok).toBe(true);
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(20);
    expect((await figures(ledger, scopes[1] as string)).reservedUsd).toBe(20);
    expect(await entryOf(scopes[0] as string, `${team}-c3`)).toMatchObject({ reserved: 20_000_000, state: 'open' });
  });

  it("a refusal whose undo was cut off is undone by the replay, and by a release, not held till the month's end", async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/fay`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 10);
    // Writes: the job record, the team scope, the user scope (refused), the refusal; then the undo never arrives.
    await expect(ledgerThatCrashesAfter(4).reserve(`${team}-r1`, scopes, 20, PERIOD)).rejects.toThrow('socket hang up');
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(20);

    // The cost gate's retry answers the recorded refusal, and gives back what the cut-off saga held.
    await expect(ledger.reserve(`${team}-r1`, scopes, 20, PERIOD)).rejects.toBeInstanceOf(BudgetExceeded);
    expect(await figures(ledger, scopes[0] as string)).toMatchObject({ reservedUsd: 0, availableUsd: 100 });

    // Without a replay (the same cut, then Finalize of the REJECTED job): the release gives it back.
    await expect(ledgerThatCrashesAfter(4).reserve(`${team}-r2`, scopes, 30, PERIOD)).rejects.toThrow('socket hang up');
    expect((await figures(ledger, scopes[0] as string)).reservedUsd).toBe(30);
    expect((await ledger.release(`${team}-r2`)).returned).toEqual([
      { scope: scopes[0], returnedUsd: 30 },
      { scope: scopes[1], returnedUsd: 0 },
    ]);
    expect(await figures(ledger, scopes[0] as string)).toMatchObject({ reservedUsd: 0, availableUsd: 100 });
    expect((await ledger.release(`${team}-r2`)).returned).toEqual([
      { scope: scopes[0], returnedUsd: 0 },
      { scope: scopes[1], returnedUsd: 0 },
    ]);
  });

  it('a reservation the saga undoes crosses no threshold; the crossing is reported when money is committed', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/gil`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 100);
    await ledger.setLimit(scopes[1] as string, PERIOD, 10);

    // $80 would take the team to 80 % (over its 70 % warning), but the user's $10 refuses it.
    await expect(ledger.reserve(`${team}-big`, scopes, 80, PERIOD)).rejects.toBeInstanceOf(BudgetExceeded);
    expect((await figures(ledger, scopes[0] as string)).thresholdsCrossed).toEqual([]);

    const committed = await ledger.reserve(`${team}-real`, [scopes[0] as string], 75, PERIOD);
    expect(committed.crossings.map((c) => [c.scope, c.threshold])).toEqual([[scopes[0], 'warn']]);
    expect((await figures(ledger, scopes[0] as string)).thresholdsCrossed).toEqual(['warn']);
  });

  it('user and project scopes without a budget are unlimited and not reserved against', async () => {
    const team = freshTeam();
    const ledger = newLedger();
    await ledger.ensureBudget(`team:${team}`, PERIOD, 100);

    const result = await ledger.reserve('free-1', [`team:${team}`, `user:${team}/bob`], 40, PERIOD);

    expect(result.unlimitedScopes).toEqual([`user:${team}/bob`]);
    expect(await ledger.usage(`user:${team}/bob`, PERIOD)).toBeUndefined();
    expect((await figures(ledger, `team:${team}`)).reservedUsd).toBe(40);
  });

  it('refuses to reserve against a team scope that has no budget yet', async () => {
    const team = freshTeam();
    const ledger = newLedger();

    await expect(ledger.reserve('nb-1', [`team:${team}`], 1, PERIOD)).rejects.toThrow(
      new BudgetNotFound(
        `team:${team} has no budget for ${PERIOD}; the cost gate must create it (ensureBudget) before reserving`,
      ),
    );
  });

  it('refuses scopes of two teams in one reservation, and escape attempts, before writing anything', async () => {
    const team = freshTeam();
    const ledger = newLedger();
    await ledger.ensureBudget(`team:${team}`, PERIOD, 100);
    const before = await snapshot();

    await expect(ledger.reserve('x-1', [`team:${team}`, 'user:other/bob'], 1, PERIOD)).rejects.toThrow(
      new InvalidScope(`a job's scopes must all belong to one team: user:other/bob is not of team "${team}"`),
    );
    await expect(ledger.reserve('x-2', [`team:${team}#PERIOD#2026-04`], 1, PERIOD)).rejects.toBeInstanceOf(
      InvalidScope,
    );
    expect(await snapshot()).toEqual(before);
  });

  it('refuses to reuse a job id for a different reservation', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('dup-1', [scope], 10, PERIOD);

    await expect(ledger.reserve('dup-1', [scope], 11, PERIOD)).rejects.toBeInstanceOf(BudgetJobConflict);
    expect((await figures(ledger, scope)).reservedUsd).toBe(10);
  });
});

describe('settlement, accrual and release', () => {
  it.each([
    { name: 'less than reserved', reservedCents: 1000, actualCents: 725 },
    { name: 'more than reserved', reservedCents: 1000, actualCents: 1240 },
    { name: 'exactly the reservation', reservedCents: 1000, actualCents: 1000 },
    { name: 'nothing at all', reservedCents: 1000, actualCents: 0 },
  ])('settlement replaces the reservation with the actual cost ($name)', async ({ reservedCents, actualCents }) => {
    const team = freshTeam();
    const scope = `team:${team}`;
    const jobId = `${team}-st-1`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve(jobId, [scope], cents(reservedCents), PERIOD);

    await ledger.settle(jobId, cents(actualCents));

    const usage = await figures(ledger, scope);
    expect(usage.spentUsd).toBe(cents(actualCents));
    expect(usage.reservedUsd).toBe(0);
    expect(usage.availableUsd).toBe(cents(10_000 - actualCents));
    expect(await entryOf(scope, jobId)).toMatchObject({ reserved: 0, accrued: actualCents * 10_000, state: 'settled' });
  });

  it('settlement after accruals charges exactly the actual cost, below or above what was accrued', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('acc-1', [scope], 10, PERIOD);
    await ledger.reserve('acc-2', [scope], 10, PERIOD);
    await ledger.accrue('acc-1', 6);
    await ledger.accrue('acc-2', 12.34);
    // acc-1: spent 6, reserved 4; acc-2: spent 12.34 (2.34 beyond its reservation), reserved 0.
    let usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd]).toEqual([18.34, 4, 77.66]);

    await ledger.settle('acc-1', 5.5);
    await ledger.settle('acc-2', 13);

    usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd]).toEqual([18.5, 0, 81.5]);
  });

  it('release returns the remaining reservation and keeps what was already accrued as spent', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('rel-1', [scope], 10, PERIOD);
    await ledger.reserve('rel-2', [scope], 10, PERIOD);
    await ledger.accrue('rel-2', 3.33);

    const untouched = await ledger.release('rel-1');
    const partly = await ledger.release('rel-2');

    expect(untouched.returned).toEqual([{ scope, returnedUsd: 10 }]);
    expect(partly.returned).toEqual([{ scope, returnedUsd: 6.67 }]);
    const usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd]).toEqual([3.33, 0, 96.67]);
  });

  it('a release that arrives before the reservation blocks that reservation', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);

    expect(await ledger.release('early-1')).toEqual({ jobId: 'early-1', returned: [] });
    await expect(ledger.reserve('early-1', [scope], 10, PERIOD)).rejects.toBeInstanceOf(BudgetJobConflict);
    expect((await figures(ledger, scope)).reservedUsd).toBe(0);
  });

  it('settle and accrue of a job that was never reserved throw UnknownBudgetJob', async () => {
    const ledger = newLedger();

    await expect(ledger.settle('ghost-1', 1)).rejects.toThrow(
      new UnknownBudgetJob('job ghost-1 has no reservation in the budget ledger; settle needs a prior reserve'),
    );
    await expect(ledger.accrue('ghost-1', 1)).rejects.toBeInstanceOf(UnknownBudgetJob);
  });

  it('a recorded cost charged after settlement raises the job to its new total in every scope, once, with the crossings it makes', async () => {
    const team = freshTeam();
    const [teamScope, projectScope] = [`team:${team}`, `project:${team}/nlp`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 10);
    await ledger.ensureBudget(projectScope, PERIOD, 100);
    await ledger.reserve('late-1', [teamScope, projectScope], 5, PERIOD);
    await ledger.settle('late-1', 6.5);
    const afterSettle = await snapshot();

    // An orphaned Batch job's $1.25 recorded after the settlement: the job's total is now $7.75.
    const charged = await ledger.chargeRecorded('late-1', 7.75);

    expect(charged.chargedScopes.sort()).toEqual([projectScope, teamScope].sort());
    // $7.75 of $10 is 77.5 %: past the team's 70 % warning, which $6.50 (65 %) was not; the project is at 7.75 %.
    expect(charged.crossings).toEqual([
      expect.objectContaining({ scope: teamScope, threshold: 'warn', spentUsd: 7.75 }),
    ]);
    const team$ = await figures(ledger, teamScope);
    expect([team$.spentUsd, team$.reservedUsd, team$.availableUsd]).toEqual([7.75, 0, 2.25]);
    const project$ = await figures(ledger, projectScope);
    expect([project$.spentUsd, project$.reservedUsd, project$.availableUsd]).toEqual([7.75, 0, 92.25]);
    expect(await entryOf(teamScope, 'late-1')).toMatchObject({ reserved: 0, accrued: 7_750_000, state: 'settled' });

    // The same total again, or an older one, changes nothing.
    const settledAgain = await snapshot();
    expect(await ledger.chargeRecorded('late-1', 7.75)).toEqual({ jobId: 'late-1', chargedScopes: [], crossings: [] });
    expect(await ledger.chargeRecorded('late-1', 6.5)).toEqual({ jobId: 'late-1', chargedScopes: [], crossings: [] });
    expect(await snapshot()).toEqual(settledAgain);
    expect(settledAgain).not.toEqual(afterSettle);
  });

  it('a recorded cost charged to a released job adds to what it had accrued; to an open one, as an accrual', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('late-rel', [scope], 10, PERIOD);
    await ledger.accrue('late-rel', 0.4);
    await ledger.release('late-rel');
    await ledger.reserve('late-open', [scope], 10, PERIOD);

    await ledger.chargeRecorded('late-rel', 1.1);
    const open = await ledger.chargeRecorded('late-open', 3);

    expect(await entryOf(scope, 'late-rel')).toMatchObject({ reserved: 0, accrued: 1_100_000, state: 'released' });
    // The open job's $3 comes out of its $10 reservation, as budget-watch's accrual of it would.
    expect(open.chargedScopes).toEqual([scope]);
    expect(await entryOf(scope, 'late-open')).toMatchObject({ reserved: 7_000_000, accrued: 3_000_000, state: 'open' });
    // Spent: $1.10 of the released job and $3 of the open one; reserved: the open job's $7 left.
    const usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd]).toEqual([4.1, 7, 88.9]);
    // budget-watch's accrual of the same figure, or a lower one, changes nothing: the two never count a cost twice.
    const charged = await snapshot();
    await ledger.accrue('late-open', 3);
    await ledger.chargeRecorded('late-open', 2);
    expect(await snapshot()).toEqual(charged);
    // Settled at $3.50: only the $0.50 not yet charged is added, and the rest of the reservation returns.
    await ledger.settle('late-open', 3.5);
    const settled = await figures(ledger, scope);
    expect([settled.spentUsd, settled.reservedUsd, settled.availableUsd]).toEqual([4.6, 0, 95.4]);
  });

  it('a recorded cost of a job paused for budget, which gave its reservation back, is charged out of available', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 1);
    await ledger.reserve('paused-1', [scope], 0.5, PERIOD);
    await ledger.returnHeld('paused-1');
    expect(await figures(ledger, scope)).toMatchObject({ spentUsd: 0, reservedUsd: 0, availableUsd: 1 });

    // An orphaned Batch job of one of its attempts ends while it is paused: $0.17 recorded.
    const charged = await ledger.chargeRecorded('paused-1', 0.17);

    expect(charged.chargedScopes).toEqual([scope]);
    expect(await figures(ledger, scope)).toMatchObject({ spentUsd: 0.17, reservedUsd: 0, availableUsd: 0.83 });
    // So another job cannot be admitted against the money it spent.
    await expect(ledger.reserve('paused-2', [scope], 0.9, PERIOD)).rejects.toBeInstanceOf(BudgetExceeded);
  });

  it('a recorded cost of a job still holding its reservation is charged to a scope budgeted since, as accrue does', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/dora`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    await ledger.reserve('adopt-rec', [teamScope, userScope], 10, PERIOD);
    await ledger.setLimit(userScope, PERIOD, 5);

    const charged = await ledger.chargeRecorded('adopt-rec', 2);

    expect(charged.chargedScopes.sort()).toEqual([teamScope, userScope].sort());
    expect(await figures(ledger, userScope)).toMatchObject({ spentUsd: 2, reservedUsd: 0, availableUsd: 3 });
    expect(await figures(ledger, teamScope)).toMatchObject({ spentUsd: 2, reservedUsd: 8 });
  });

  it('charging the recorded cost of a job the ledger never saw throws UnknownBudgetJob and writes nothing', async () => {
    const ledger = newLedger();
    const before = await snapshot();

    await expect(ledger.chargeRecorded('ghost-2', 1)).rejects.toThrow(
      new UnknownBudgetJob(
        'job ghost-2 has no record in the budget ledger; charging its recorded cost needs a prior reserve',
      ),
    );
    expect(await snapshot()).toEqual(before);
  });

  it('a budget set on a scope after a job reserved there (unlimited then) is charged all the job costs, and blocks it', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/alice`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    expect((await ledger.reserve('adopt-1', [teamScope, userScope], 50, PERIOD)).unlimitedScopes).toEqual([userScope]);
    // Alice's job is running away: an admin caps her at $20.
    await ledger.setLimit(userScope, PERIOD, 20);

    const within = await ledger.accrue('adopt-1', 12);
    expect(within.blockedScopes).toEqual([]);
    let alice = await figures(ledger, userScope);
    expect([alice.spentUsd, alice.reservedUsd, alice.availableUsd]).toEqual([12, 0, 8]);

    const beyond = await ledger.accrue('adopt-1', 25);
    expect(beyond.blockedScopes).toEqual([userScope]);
    expect(beyond.crossings.map((c) => [c.scope, c.threshold])).toEqual([
      [userScope, 'warn'],
      [userScope, 'block'],
    ]);
    alice = await figures(ledger, userScope);
    expect([alice.spentUsd, alice.availableUsd, alice.blocked]).toEqual([25, -5, true]);

    await ledger.settle('adopt-1', 30);
    alice = await figures(ledger, userScope);
    expect([alice.spentUsd, alice.reservedUsd, alice.availableUsd]).toEqual([30, 0, -10]);
    expect(await entryOf(userScope, 'adopt-1')).toMatchObject({ reserved: 0, accrued: 30_000_000, state: 'settled' });
    // The team scope held the reservation all along: $50 reserved, $30 spent, the rest returned.
    const team$ = await figures(ledger, teamScope);
    expect([team$.spentUsd, team$.reservedUsd, team$.availableUsd]).toEqual([30, 0, 970]);
    // Settled: a late accrual changes nothing.
    const settled = await snapshot();
    await ledger.accrue('adopt-1', 40);
    expect(await snapshot()).toEqual(settled);
  });

  it('concurrent first charges of a job in a scope budgeted after it reserved write its entry once', async () => {
    const team = freshTeam();
    const [teamScope, projectScope] = [`team:${team}`, `project:${team}/nlp`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    await ledger.reserve('adopt-2', [teamScope, projectScope], 100, PERIOD);
    await ledger.setLimit(projectScope, PERIOD, 500);

    await Promise.all([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((usd) => ledger.accrue('adopt-2', usd)));

    const project = await figures(ledger, projectScope);
    expect([project.spentUsd, project.reservedUsd, project.availableUsd]).toEqual([10, 0, 490]);
    expect(await entryOf(projectScope, 'adopt-2')).toMatchObject({ reserved: 0, accrued: 10_000_000, state: 'open' });
  });

  it('a job that ended before a budget was set is not charged to it, late costs included', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/bob`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    await ledger.reserve('adopt-3', [teamScope, userScope], 10, PERIOD);
    await ledger.settle('adopt-3', 4);
    await ledger.setLimit(userScope, PERIOD, 100);

    const charged = await ledger.chargeRecorded('adopt-3', 6);

    expect(charged.chargedScopes).toEqual([teamScope]);
    const bob = await figures(ledger, userScope);
    expect([bob.spentUsd, bob.reservedUsd, bob.availableUsd]).toEqual([0, 0, 100]);
    expect(await entryOf(userScope, 'adopt-3')).toBeUndefined();
    expect((await figures(ledger, teamScope)).spentUsd).toBe(6);
    // A release charges nothing, so it writes nothing into a scope the job holds nothing in.
    const carol = `user:${team}/carol`;
    await ledger.reserve('adopt-4', [teamScope, carol], 10, PERIOD);
    await ledger.setLimit(carol, PERIOD, 200);
    await ledger.release('adopt-4');
    expect(await entryOf(carol, 'adopt-4')).toBeUndefined();
  });

  it('a stale accrual after a job settled does not charge a budget set after it ended', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/dana`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    await ledger.reserve('adopt-5', [teamScope, userScope], 10, PERIOD);
    await ledger.settle('adopt-5', 5);
    // The admin caps dana, then a budget-watch tick that read the job as running before it ended accrues.
    await ledger.setLimit(userScope, PERIOD, 100);

    const late = await ledger.accrue('adopt-5', 4.5);

    expect(late).toEqual({ crossings: [], blockedScopes: [] });
    expect(await entryOf(userScope, 'adopt-5')).toBeUndefined();
    const dana = await figures(ledger, userScope);
    expect([dana.spentUsd, dana.reservedUsd, dana.availableUsd]).toEqual([0, 0, 100]);
    const team$ = await figures(ledger, teamScope);
    expect([team$.spentUsd, team$.reservedUsd]).toEqual([5, 0]);
  });

  it('an accrual past the reservation that exhausts the budget reports the scope as blocked', async () => {
    const team = freshTeam();
    const scope = `team:${team}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 20);
    await ledger.reserve('over-1', [scope], 15, PERIOD);

    const within = await ledger.accrue('over-1', 15);
    const beyond = await ledger.accrue('over-1', 21);

    expect(within.blockedScopes).toEqual([]);
    expect(beyond.blockedScopes).toEqual([scope]);
    expect(beyond.crossings.map((c) => c.threshold)).toEqual(['block']);
    const usage = await figures(ledger, scope);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd, usage.blocked]).toEqual([21, 0, -1, true]);
  });
});

describe('top-up before a paused job resumes', () => {
  it('a pause gives back what the job holds, keeps what it accrued spent, and the resume raises it again', async () => {
    const team = freshTeam();
    const scopes = [`team:${team}`, `user:${team}/jo`];
    const ledger = newLedger();
    await ledger.ensureBudget(scopes[0] as string, PERIOD, 10);
    await ledger.setLimit(scopes[1] as string, PERIOD, 5);
    await ledger.reserve(`${team}-p`, scopes, 4, PERIOD);
    await ledger.accrue(`${team}-p`, 1);

    expect((await ledger.returnHeld(`${team}-p`)).returned).toEqual([
      { scope: scopes[0], returnedUsd: 3 },
      { scope: scopes[1], returnedUsd: 3 },
    ]);
    expect(await figures(ledger, scopes[0] as string)).toMatchObject({ spentUsd: 1, reservedUsd: 0, availableUsd: 9 });
    expect(await figures(ledger, scopes[1] as string)).toMatchObject({ spentUsd: 1, reservedUsd: 0, availableUsd: 4 });
    const afterFirst = await snapshot();
    expect((await ledger.returnHeld(`${team}-p`)).returned.map((r) => r.returnedUsd)).toEqual([0, 0]);
    expect(await snapshot()).toEqual(afterFirst);

    await ledger.reserveTo(`${team}-p`, 2.5);
    expect(await figures(ledger, scopes[0] as string)).toMatchObject({
      spentUsd: 1,
      reservedUsd: 2.5,
      availableUsd: 6.5,
    });
    // The settlement charges what it cost, whatever it held in between.
    await ledger.settle(`${team}-p`, 3.25);
    expect(await figures(ledger, scopes[1] as string)).toMatchObject({
      spentUsd: 3.25,
      reservedUsd: 0,
      availableUsd: 1.75,
    });
    expect((await ledger.returnHeld(`${team}-p`)).returned).toEqual([]);
    expect((await ledger.returnHeld(`${team}-never`)).returned).toEqual([]);
  });

  it('raises the reservation to the target in every scope, out of available, and a replay changes nothing', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/ada`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 100);
    await ledger.ensureBudget(userScope, PERIOD, 20);
    await ledger.reserve('up-1', [teamScope, userScope], 10, PERIOD);
    await ledger.accrue('up-1', 12.5); // past its $10: reserved 0, spent 12.50 in each scope

    const raised = await ledger.reserveTo('up-1', 6.25);

    expect(raised).toEqual({
      jobId: 'up-1',
      raised: [
        { scope: teamScope, addedUsd: 6.25 },
        { scope: userScope, addedUsd: 6.25 },
      ],
      crossings: [expect.objectContaining({ scope: userScope, threshold: 'warn' })],
    });
    // $100: 12.50 spent + 6.25 reserved; $20: 12.50 + 6.25 of 20, 1.25 available (93.75 %, past the 70 % warning).
    const team_ = await figures(ledger, teamScope);
    expect([team_.spentUsd, team_.reservedUsd, team_.availableUsd]).toEqual([12.5, 6.25, 81.25]);
    const user = await figures(ledger, userScope);
    expect([user.spentUsd, user.reservedUsd, user.availableUsd]).toEqual([12.5, 6.25, 1.25]);
    expect(await entryOf(userScope, 'up-1')).toMatchObject({ reserved: 6_250_000, accrued: 12_500_000 });

    const before = await snapshot();
    expect(await ledger.reserveTo('up-1', 6.25)).toEqual({ jobId: 'up-1', raised: [], crossings: [] });
    expect(await ledger.reserveTo('up-1', 3)).toEqual({ jobId: 'up-1', raised: [], crossings: [] });
    expect(await snapshot()).toEqual(before);

    // Settling returns what the top-up held, as any reservation.
    await ledger.settle('up-1', 15);
    const settled = await figures(ledger, userScope);
    expect([settled.spentUsd, settled.reservedUsd, settled.availableUsd]).toEqual([15, 0, 5]);
  });

  it('raises nothing when one scope cannot cover its increase: what the others took is given back', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/bo`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 30);
    await ledger.ensureBudget(userScope, PERIOD, 20);
    await ledger.reserve('up-2', [teamScope, userScope], 10, PERIOD);
    // The user's $20 has $4 available and the top-up asks $8; the team's $30 could take it (to 80 %, past its warning).
    await ledger.accrue('up-2', 16);
    const before = await Promise.all([figures(ledger, teamScope), figures(ledger, userScope)]);

    const refused = await ledger.reserveTo('up-2', 8).catch((error: unknown) => error);

    expect(refused).toBeInstanceOf(BudgetExceeded);
    expect((refused as BudgetExceeded).details).toEqual({
      scope: userScope,
      period: PERIOD,
      limitUsd: 20,
      spentUsd: 16,
      reservedUsd: 0,
      requestedUsd: 8,
      availableUsd: 4,
      blockThreshold: 1,
    });
    // The team scope, raised first, is back where it was, and its warning was not recorded for the raise.
    expect(await Promise.all([figures(ledger, teamScope), figures(ledger, userScope)])).toEqual(before);
    expect(await entryOf(teamScope, 'up-2')).toMatchObject({ reserved: 0, accrued: 16_000_000, state: 'open' });
    const { crossings } = await ledger.unpublishedAlerts(team, PERIOD);
    expect(crossings.map((c) => `${c.crossing.scope} ${c.crossing.threshold}`)).toEqual([`${userScope} warn`]);
  });

  it('takes back what it raised when a later scope’s raise fails on the wire, and rethrows', async () => {
    const team = freshTeam();
    const [teamScope, userScope] = [`team:${team}`, `user:${team}/cy`];
    const setup = newLedger();
    await setup.ensureBudget(teamScope, PERIOD, 100);
    await setup.ensureBudget(userScope, PERIOD, 100);
    await setup.reserve('up-4', [teamScope, userScope], 10, PERIOD);
    await setup.accrue('up-4', 10);
    const scopes = [teamScope, userScope];
    const before = await Promise.all(scopes.map((scope) => figures(setup, scope)));

    // Write 1 raises the team scope, write 2 (the user scope) is lost, write 3 takes the team's raise back.
    const flaky = ledgerThatCrashesAfter(1, 2);
    await expect(flaky.reserveTo('up-4', 5)).rejects.toMatchObject({ name: 'DynamoDbNetworkError' });

    expect(await Promise.all(scopes.map((scope) => figures(setup, scope)))).toEqual(before);
    for (const scope of scopes) {
      expect(await entryOf(scope, 'up-4')).toMatchObject({ reserved: 0, accrued: 10_000_000, state: 'open' });
    }
  });

  it('reserves in a scope budgeted since the job reserved, and is refused by it as by any other', async () => {
    // The project had no budget when the job reserved (unlimited), so the job holds no entry there; nothing was spent.
    const team = freshTeam();
    const [teamScope, projectScope] = [`team:${team}`, `project:${team}/p`];
    const ledger = newLedger();
    await ledger.ensureBudget(teamScope, PERIOD, 1000);
    await ledger.reserve('up-5', [teamScope, projectScope], 100, PERIOD);
    await ledger.returnHeld('up-5'); // paused before spending anything
    await ledger.setLimit(projectScope, PERIOD, 10);
    const before = await Promise.all([figures(ledger, teamScope), figures(ledger, projectScope)]);

    // $100 to finish against the project's $10: refused there, nothing raised anywhere.
    const refused = await ledger.reserveTo('up-5', 100).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BudgetExceeded);
    expect((refused as BudgetExceeded).details).toMatchObject({
      scope: projectScope,
      requestedUsd: 100,
      availableUsd: 10,
    });
    expect(await Promise.all([figures(ledger, teamScope), figures(ledger, projectScope)])).toEqual(before);

    // $6 fits: both scopes hold it, the project in an entry made for the job.
    const raised = await ledger.reserveTo('up-5', 6);
    expect(raised.raised).toEqual([
      { scope: teamScope, addedUsd: 6 },
      { scope: projectScope, addedUsd: 6 },
    ]);
    const project = await figures(ledger, projectScope);
    expect([project.spentUsd, project.reservedUsd, project.availableUsd]).toEqual([0, 6, 4]);
    expect(await entryOf(projectScope, 'up-5')).toMatchObject({ reserved: 6_000_000, accrued: 0, state: 'open' });
  });

  it('leaves a closed job as it is, and refuses a job it never reserved', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('up-3', [scope], 10, PERIOD);
    await ledger.settle('up-3', 4);
    const before = await snapshot();

    expect(await ledger.reserveTo('up-3', 50)).toEqual({ jobId: 'up-3', raised: [], crossings: [] });
    expect(await snapshot()).toEqual(before);
    await expect(ledger.reserveTo('up-never', 5)).rejects.toBeInstanceOf(UnknownBudgetJob);
  });
});

describe('limits and thresholds', () => {
  it('reports each threshold once per scope and period even under 20 concurrent accruals', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    const jobs = Array.from({ length: 20 }, (_, i) => `th-${i}`);
    for (const job of jobs) await ledger.reserve(job, [scope], 1, PERIOD);

    // Each job's running cost reaches $5: spent goes to $100, i.e. 100 % of the limit.
    const results = await Promise.all(jobs.map((job) => ledger.accrue(job, 5)));
    const replays = await Promise.all(jobs.map((job) => ledger.accrue(job, 5)));

    const crossings: ThresholdCrossing[] = results.flatMap((r) => r.crossings);
    expect(crossings.map((c) => c.threshold).sort()).toEqual(['block', 'warn']);
    expect(crossings.every((c) => c.scope === scope && c.period === PERIOD && c.limitUsd === 100)).toBe(true);
    expect(replays.flatMap((r) => r.crossings)).toEqual([]);
    const usage = await figures(ledger, scope);
    expect(usage.thresholdsCrossed).toEqual(['warn', 'block']);
    expect([usage.spentUsd, usage.reservedUsd, usage.availableUsd, usage.percentUsed]).toEqual([100, 0, 0, 100]);
  });

  it('keeps each crossing unpublished until marked, oldest first, and takes a marker without the flag as published', async () => {
    const team = freshTeam();
    const ledger = newLedger();
    await ledger.ensureBudget(`team:${team}`, PERIOD, 10);
    await ledger.ensureBudget(`user:${team}/bo`, PERIOD, 10);
    const team8 = await ledger.reserve('pub-1', [`team:${team}`], 8, PERIOD);
    const later = new BudgetLedger({
      client: dynamo.doc,
      tableName: dynamo.tables.budgets,
      thresholds: { warn: 0.7, block: 1 },
      now: () => new Date('2026-03-15T12:05:00.000Z'),
    });
    const user10 = await later.reserve('pub-2', [`user:${team}/bo`], 10, PERIOD);
    expect(user10.crossings.map((c) => c.threshold)).toEqual(['warn', 'block']);

    expect((await ledger.unpublishedAlerts(team, PERIOD)).crossings).toEqual([
      { crossing: team8.crossings[0], at: '2026-03-15T12:00:00.000Z' },
      { crossing: user10.crossings[0], at: '2026-03-15T12:05:00.000Z' },
      { crossing: user10.crossings[1], at: '2026-03-15T12:05:00.000Z' },
    ]);
    await ledger.markPublished([...team8.crossings, ...(user10.crossings.slice(0, 1) as ThresholdCrossing[])]);
    await ledger.markPublished(team8.crossings);
    expect((await ledger.unpublishedAlerts(team, PERIOD)).crossings).toEqual([
      { crossing: user10.crossings[1], at: '2026-03-15T12:05:00.000Z' },
    ]);

    // A marker written before markers carried the flag: as published.
    await dynamo.doc.update({
      TableName: dynamo.tables.budgets,
      Key: budgetKeys.period(`user:${team}/bo`, PERIOD),
      UpdateExpression: 'REMOVE crossings.#block.published',
      ExpressionAttributeNames: { '#block': 'block' },
    });
    expect((await ledger.unpublishedAlerts(team, PERIOD)).crossings).toEqual([]);
    expect((await ledger.unpublishedAlerts(team, '2026-04')).crossings).toEqual([]);
  });

  it('the same thresholds are reported again in the next period', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, '2026-03', 10);
    await ledger.ensureBudget(scope, '2026-04', 10);

    const march = await ledger.reserve('p-1', [scope], 8, '2026-03');
    const marchAgain = await ledger.reserve('p-2', [scope], 1, '2026-03');
    const april = await ledger.reserve('p-3', [scope], 8, '2026-04');

    expect(march.crossings.map((c) => [c.threshold, c.period])).toEqual([['warn', '2026-03']]);
    expect(marchAgain.crossings).toEqual([]);
    expect(april.crossings.map((c) => [c.threshold, c.period])).toEqual([['warn', '2026-04']]);
  });

  it('changing a limit moves available by the change, keeping outstanding reservations', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 100);
    await ledger.reserve('lim-1', [scope], 60, PERIOD);

    const lowered = await ledger.setLimit(scope, PERIOD, 50);

    expect([lowered.usage.limitUsd, lowered.usage.availableUsd]).toEqual([50, -10]);
    // $60 of $50 committed: both 70 % and 100 % are reached by the change itself.
    expect(lowered.crossings.map((c) => c.threshold)).toEqual(['warn', 'block']);
    await expect(ledger.reserve('lim-2', [scope], 0.01, PERIOD)).rejects.toThrow(
      `${scope} would exceed its budget: limit $50.00, spent $0.00, reserved $60.00, requested $0.01, available -$10.00`,
    );
    const raised = await ledger.setLimit(scope, PERIOD, 75.5);
    expect(raised.usage.availableUsd).toBe(15.5);
  });

  it('a block threshold above 100 % lets commitments run past the limit up to that fraction', async () => {
    const scope = `team:${freshTeam()}`;
    const ledger = newLedger({ warn: 0.8, block: 1.1 });
    await ledger.ensureBudget(scope, PERIOD, 100);

    await ledger.reserve('bt-1', [scope], 105, PERIOD);

    await expect(ledger.reserve('bt-2', [scope], 5.01, PERIOD)).rejects.toThrow(
      `${scope} would exceed its budget: limit $100.00, spent $0.00, reserved $105.00, requested $5.01, available $5.00 (jobs are refused at 110% of the limit)`,
    );
    expect((await figures(ledger, scope)).availableUsd).toBe(5);
  });
});

describe('exhaustions', () => {
  /** A $10 team budget with two $2 reservations, j1 having spent `spentUsd` of its running cost. */
  async function budgetWithTwoJobs(spentUsd: number) {
    const team = freshTeam();
    const scope = `team:${team}`;
    const ledger = newLedger();
    await ledger.ensureBudget(scope, PERIOD, 10);
    await ledger.reserve(`${team}-j1`, [scope], 2, PERIOD);
    await ledger.reserve(`${team}-j2`, [scope], 2, PERIOD);
    await ledger.accrue(`${team}-j1`, spentUsd);
    return { team, scope, ledger, j1: `${team}-j1`, j2: `${team}-j2` };
  }

  it('records one exhaustion per limit while the scope is blocked, adding jobs until it is out', async () => {
    // Spent $4 and $2 reserved of $10: not blocked, so nothing is recorded.
    const { team, scope, ledger, j1, j2 } = await budgetWithTwoJobs(4);
    const unblocked = await snapshot();
    expect(await ledger.recordExhaustion(scope, PERIOD, [j1])).toBeUndefined();
    expect(await snapshot()).toEqual(unblocked);

    // Spent $9 and $2 reserved: available is -$1, blocked.
    await ledger.accrue(j1, 9);
    const first = {
      scope,
      team,
      period: PERIOD,
      limitUsd: 10,
      spentUsd: 9,
      reservedUsd: 2,
      pausedJobIds: [j1],
      at: '2026-03-15T12:00:00.000Z',
      published: false,
    };
    expect(await ledger.recordExhaustion(scope, PERIOD, [j1, j1])).toEqual(first);
    const recorded = await snapshot();
    expect(await ledger.recordExhaustion(scope, PERIOD, [j1])).toEqual(first);
    expect(await snapshot()).toEqual(recorded);

    const both = { ...first, pausedJobIds: [j1, j2] };
    expect(await ledger.recordExhaustion(scope, PERIOD, [j2, j1])).toEqual(both);
    expect((await ledger.unpublishedAlerts(team, PERIOD)).exhaustions).toEqual([both]);

    await ledger.markExhaustionPublished(both);
    await ledger.markExhaustionPublished(both);
    expect((await ledger.unpublishedAlerts(team, PERIOD)).exhaustions).toEqual([]);
    // Out already: a job stopped later is not added to it.
    expect(await ledger.recordExhaustion(scope, PERIOD, [`${team}-j3`])).toEqual({ ...both, published: true });

    // Raised to $20, nothing is exhausted; lowered to $10.50 ($11 committed), the budget is exhausted anew.
    await ledger.setLimit(scope, PERIOD, 20);
    expect(await ledger.recordExhaustion(scope, PERIOD, [j2])).toBeUndefined();
    await ledger.setLimit(scope, PERIOD, 10.5);
    const again = { ...first, limitUsd: 10.5, pausedJobIds: [j2] };
    expect(await ledger.recordExhaustion(scope, PERIOD, [j2])).toEqual(again);
    expect((await ledger.unpublishedAlerts(team, PERIOD)).exhaustions).toEqual([again]);
    expect((await ledger.unpublishedAlerts(team, '2026-04')).exhaustions).toEqual([]);
  });

  it('keeps every job of concurrent recordings exactly once', async () => {
    const { team, scope, ledger } = await budgetWithTwoJobs(12);
    const jobs = Array.from({ length: 8 }, (_, i) => `${team}-c${i}`);

    await Promise.all(jobs.map((job) => ledger.recordExhaustion(scope, PERIOD, [job])));

    const [exhaustion] = (await ledger.unpublishedAlerts(team, PERIOD)).exhaustions;
    expect([...(exhaustion?.pausedJobIds ?? [])].sort()).toEqual([...jobs].sort());
  });

  it('records into a scope item written before exhaustions were kept', async () => {
    const { team, scope, ledger, j1 } = await budgetWithTwoJobs(12);
    await dynamo.doc.update({
      TableName: dynamo.tables.budgets,
      Key: budgetKeys.period(scope, PERIOD),
      UpdateExpression: 'REMOVE exhaustions',
    });

    expect(await ledger.recordExhaustion(scope, PERIOD, [j1])).toMatchObject({ pausedJobIds: [j1], spentUsd: 12 });
    expect((await ledger.unpublishedAlerts(team, PERIOD)).exhaustions).toHaveLength(1);
  });

  it('refuses a malformed job id, recording nothing', async () => {
    const { scope, ledger } = await budgetWithTwoJobs(12);
    const before = await snapshot();

    await expect(ledger.recordExhaustion(scope, PERIOD, ['not a job id'])).rejects.toThrow(
      `job id must be 1-128 characters of A-Z, a-z, 0-9, '_', '.', ':' and '-', got "not a job id"`,
    );
    expect(await snapshot()).toEqual(before);
  });
});

describe('usage listing', () => {
  it("lists a team's budgeted scopes for one period only, without other teams' scopes", async () => {
    const team = freshTeam();
    const other = freshTeam();
    const ledger = newLedger();
    await ledger.ensureBudget(`team:${team}`, PERIOD, 100);
    await ledger.setLimit(`user:${team}/alice`, PERIOD, 30);
    await ledger.setLimit(`project:${team}/gpt`, PERIOD, 40);
    await ledger.ensureBudget(`team:${team}`, '2026-04', 100);
    await ledger.ensureBudget(`team:${other}`, PERIOD, 100);
    await ledger.reserve('list-1', [`team:${team}`, `user:${team}/alice`], 12, PERIOD);

    const listed = await ledger.listScopes(team, PERIOD);

    expect(listed.map((u) => u.scope)).toEqual([`project:${team}/gpt`, `team:${team}`, `user:${team}/alice`]);
    const alice = listed.find((u) => u.scope === `user:${team}/alice`);
    expect(alice).toMatchObject({ limitUsd: 30, reservedUsd: 12, availableUsd: 18, percentUsed: 40, team });
  });
});
