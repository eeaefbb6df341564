/**
 * The jobs table adapter: jobs, attempts, decisions, idempotency claims, the tiers' spot records and the reports'
 * announcements (key design in table-design.ts).
 * Every write that can be repeated (Step Functions retries, EventBridge redelivery, a client retrying a POST) is a
 * single-item conditional write, so a replay changes nothing.
 */
import { compareCodeUnits } from '../domain/code-unit-order';
import {
  type AttemptRecord,
  assertTransition,
  type DecisionRecord,
  InvalidJobRecord,
  isTerminal,
  type JobRecord,
  type JobState,
  type OrphanRun,
  parseAttemptRecord,
  parseDecisionRecord,
  parseJobChange,
  parseJobRecord,
  parseOrphanRun,
  TERMINAL_STATES,
} from '../domain/job';
import { type LabelSelector, matchesLabels } from '../domain/labels';
import { type JobWithAttempts, mayHaveRunIn, type ReportPeriod } from '../domain/showback';
import { InvalidTierSpotRecord, parseTierSpotRecord, type TierSpotRecord } from '../domain/tier-spot';
import { mapConcurrently } from './concurrency';
import { type DocumentClient, isConditionalCheckFailure, type QueryInput } from './dynamo';
import { decodeOpaqueCursor, encodeOpaqueCursor } from './opaque-cursor';
import { JOBS_INDEXES, jobKeys, KEYS } from './table-design';

/** Raised when a job id is unknown (or belongs to nobody the caller can see). */
export class JobNotFound extends Error {
  override name = 'JobNotFound';
  constructor(readonly jobId: string) {
    super(`job ${jobId} does not exist`);
  }
}

/** Raised when a state change is refused because the job moved on (a concurrent cancel, a replay). */
export class JobStateConflict extends Error {
  override name = 'JobStateConflict';
}

const KEY_ATTRIBUTES = ['pk', 'sk', 'gsi1pk', 'gsi1sk', 'gsi2pk', 'gsi2sk', 'kind'] as const;

/**
 * Attributes earlier versions wrote that nothing reads any more, dropped on read so their items still parse:
 * `spotSeenSince` (a job's own run of spot sightings, replaced by the tier spot record).
 */
const RETIRED_ATTRIBUTES = ['spotSeenSince'] as const;

/** Most jobs one page of a filtered job list (by label or state) reads (1,000 jobs of ~2 KB: about 250 read units). */
export const MAX_JOBS_READ_PER_PAGE = 1000;
/** How long a store that found the byState index missing reads through byTeam before it asks for the index again. */
export const BY_STATE_RECHECK_MS = 5 * 60_000;
/** Jobs one Query of a filtered list reads at most. */
const FILTERED_READ = 200;

/** Which of a team's jobs a list keeps: those matching every label selector and, when states are given, in one of them. */
export interface JobListFilter {
  readonly labels?: readonly LabelSelector[];
  readonly states?: readonly JobState[];
}

/**
 * The DynamoDB FilterExpression of a {@link JobListFilter}, and of the team's byTeam partition when given (a read of
 * the byState index, which holds every team's jobs); undefined when it keeps every job.
 */
function jobListFilter({
  labels = [],
  states = [],
  team,
}: JobListFilter & { team?: string }):
  | { expression: string; names: Record<string, string>; values: Record<string, string> }
  | undefined {
  if (labels.length === 0 && states.length === 0 && team === undefined) return undefined;
  const names: Record<string, string> = {};
  const values: Record<string, string> = {};
  if (team !== undefined) {
    names['#team'] = JOBS_INDEXES.byTeam.partition;
    values[':team'] = team;
  }
  const conditions = labels.map((selector, i) => {
    names['#labels'] = 'labels';
    names[`#l${i}`] = selector.key;
    if (selector.value === undefined) return `attribute_exists(#labels.#l${i})`;
    values[`:l${i}`] = selector.value;
    return `#labels.#l${i} = :l${i}`;
  });
  if (states.length > 0) {
    names['#state'] = 'state';
    for (const [i, state] of states.entries()) values[`:s${i}`] = state;
    conditions.push(`#state IN (${states.map((_, i) => `:s${i}`).join(', ')})`);
  }
  if (team !== undefined) conditions.unshift('#team = :team');
  return { expression: conditions.join(' AND '), names, values };
}

/** A job record the store could not parse: its item's partition key (`JOB#<jobId>`) and why. */
export interface UnreadableJob {
  readonly key: string;
  readonly error: InvalidJobRecord;
}

/** How many jobs' attempts {@link JobStore.jobsThatMayHaveRunIn} reads at once. */
const ATTEMPT_READS_IN_FLIGHT = 8;

function stripKeys(item: Record<string, unknown>): Record<string, unknown> {
  const out = { ...item };
  for (const key of [...KEY_ATTRIBUTES, ...RETIRED_ATTRIBUTES]) delete out[key];
  return out;
}

/**
 * The jobs table item of a job record: its keys, its byTeam keys (which byState shares) and its kind, then the
 * record's own fields.
 */
export function jobItem<T extends Pick<JobRecord, 'jobId' | 'team' | 'createdAt'>>(record: T) {
  return {
    ...jobKeys.job(record.jobId),
    ...jobKeys.teamIndex(record.team, record.createdAt, record.jobId),
    kind: 'job',
    ...record,
  };
}

/** Where a listing of a team's jobs stands after `item`, one of its jobs: the job's table keys and byTeam keys. */
function teamPosition(team: string, item: Record<string, unknown>): Record<string, unknown> {
  return {
    pk: item.pk,
    sk: item.sk,
    [JOBS_INDEXES.byTeam.partition]: jobKeys.teamPartition(team),
    [JOBS_INDEXES.byTeam.sort]: item[JOBS_INDEXES.byTeam.sort],
  };
}

/** Whether a Query failed because the table lacks the index, or DynamoDB is still filling it. */
function isIndexUnavailable(error: unknown, indexName: string): boolean {
  // DynamoDB: "The table does not have the specified index: <name>" (dynalite says the same), or "Cannot read from
  // backfilling global secondary index: <name>" while an index added to a table is being filled.
  const e = error as Error;
  return e?.name === 'ValidationException' && typeof e.message === 'string' && e.message.includes(indexName);
}

/** Raised when a tier's spot record could not be updated because concurrent writers kept changing it. */
export class TierSpotConflict extends Error {
  override name = 'TierSpotConflict';
}

/** A page of jobs and the cursor for the next one. */
export interface JobPage {
  readonly jobs: JobRecord[];
  readonly nextCursor?: string;
}

/** Result of claiming an Idempotency-Key. */
export type IdempotencyClaim =
  | { readonly claimed: true }
  | { readonly claimed: false; readonly jobId: string; readonly sameRequest: boolean };

/** What a claim of an Idempotency-Key records. */
export interface IdempotencyRecord {
  /** The job the key stands for. */
  readonly jobId: string;
  /** Hash of the request as understood (the bundle by its content, however it travelled). */
  readonly requestHash: string;
  /** Hash of the request as sent (the bundle by its base64 text or upload id); absent on claims made before it was kept. */
  readonly bodyHash?: string;
  /** The first answer's body parts a replay repeats (JSON), when they were small enough to keep. */
  readonly answer?: string;
}

/** Fields of a job a lifecycle step may change without a state transition. */
export type JobPatch = Partial<
  Pick<
    JobRecord,
    | 'tier'
    | 'estimate'
    | 'counters'
    | 'costSoFarUsd'
    | 'progress'
    | 'reason'
    | 'cancelRequested'
    | 'pauseToken'
    | 'pauses'
    | 'resumedPauses'
    | 'requirements'
  >
>;

/** A condition's `IN` list of states, e.g. `(:t0, :t1)`, each state added to `values` under its attribute value name. */
function stateList(states: readonly JobState[], prefix: string, values: Record<string, unknown>): string {
  const valueNames = states.map((state, i) => {
    values[`${prefix}${i}`] = state;
    return `${prefix}${i}`;
  });
  return `(${valueNames.join(', ')})`;
}

/** Reads and writes jobs, attempts and decisions. */
export class JobStore {
  /** Until when the byState index is taken as missing (see whileByStateServes). */
  private byStateMissingUntilMs = 0;

  constructor(
    private readonly client: DocumentClient,
    private readonly tableName: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Creates a job; returns false (and writes nothing) if the id exists. */
  async createJob(job: JobRecord): Promise<boolean> {
    const record = parseJobRecord({ ...job, updatedAt: this.now().toISOString() });
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: jobItem(record),
        ConditionExpression: 'attribute_not_exists(pk)',
      });
      return true;
    } catch (error) {
      if (isConditionalCheckFailure(error)) return false;
      throw error;
    }
  }

  /**
   * A read through the byState index, or undefined when the table has no such index yet (a deployment whose index
   * DynamoDB is still filling, a local mode folder from before it): the caller then reads through byTeam. Once found
   * missing, the index is not asked for again for {@link BY_STATE_RECHECK_MS}, so each read costs one query, not two.
   */
  private async whileByStateServes<T>(read: () => Promise<T>): Promise<T | undefined> {
    if (this.now().getTime() < this.byStateMissingUntilMs) return undefined;
    try {
      return await read();
    } catch (error) {
      if (!isIndexUnavailable(error, JOBS_INDEXES.byState.name)) throw error;
      this.byStateMissingUntilMs = this.now().getTime() + BY_STATE_RECHECK_MS;
      return undefined;
    }
  }

  /** The job, or undefined. */
  async getJob(jobId: string): Promise<JobRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.job(jobId),
      ConsistentRead: true,
    });
    return Item ? parseJobRecord(stripKeys(Item)) : undefined;
  }

  /** The job, or JobNotFound. */
  async requireJob(jobId: string): Promise<JobRecord> {
    const job = await this.getJob(jobId);
    if (!job) throw new JobNotFound(jobId);
    return job;
  }

  /**
   * Moves a job to `to` if it is in one of `from` (validated against the allowed transitions), applying `patch`
   * in the same write. A replay that finds the job already in `to` returns it unchanged; any other state is a
   * JobStateConflict.
   */
  async transition(jobId: string, from: readonly JobState[], to: JobState, patch: JobPatch = {}): Promise<JobRecord> {
    for (const state of from) if (state !== to) assertTransition(state, to);
    const fields: Record<string, unknown> = { ...patch, state: to, updatedAt: this.now().toISOString() };
    parseJobChange(fields);
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const sets = Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v], i) => {
        names[`#f${i}`] = k;
        values[`:v${i}`] = v;
        return `#f${i} = :v${i}`;
      });
    names['#state'] = 'state';
    const written = await this.updateJobIf(jobId, {
      set: sets.join(', '),
      condition: `attribute_exists(pk) AND #state IN ${stateList(from, ':from', values)}`,
      names,
      values,
    });
    if (written) return written;
    const current = await this.requireJob(jobId);
    if (current.state === to) return current;
    throw new JobStateConflict(`job ${jobId} is ${current.state}; cannot move it from ${from.join('|')} to ${to}`);
  }

  /** Updates the job's item while `condition` holds: the job as written, or undefined when the condition failed. */
  private async updateJobIf(
    jobId: string,
    update: { set: string; condition: string; names: Record<string, string>; values: Record<string, unknown> },
  ): Promise<JobRecord | undefined> {
    try {
      const { Attributes } = await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.job(jobId),
        UpdateExpression: `SET ${update.set}`,
        ConditionExpression: update.condition,
        ExpressionAttributeNames: update.names,
        ExpressionAttributeValues: update.values,
        ReturnValues: 'ALL_NEW',
      });
      return parseJobRecord(stripKeys(Attributes ?? {}));
    } catch (error) {
      if (isConditionalCheckFailure(error)) return undefined;
      throw error;
    }
  }

  /** Sets fields of an existing job (no state change); `remove` drops optional fields. */
  async patchJob(jobId: string, patch: JobPatch, remove: ReadonlyArray<keyof JobPatch> = []): Promise<JobRecord> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const change: Record<string, unknown> = { ...patch, updatedAt: this.now().toISOString() };
    parseJobChange(change);
    const entries = Object.entries(change).filter(([, v]) => v !== undefined);
    const sets = entries.map(([k, v], i) => {
      names[`#s${i}`] = k;
      values[`:s${i}`] = v;
      return `#s${i} = :s${i}`;
    });
    const removes = remove.map((k, i) => {
      names[`#r${i}`] = k;
      return `#r${i}`;
    });
    try {
      const { Attributes } = await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.job(jobId),
        UpdateExpression: `SET ${sets.join(', ')}${removes.length ? ` REMOVE ${removes.join(', ')}` : ''}`,
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      });
      return parseJobRecord(stripKeys(Attributes ?? {}));
    } catch (error) {
      if (isConditionalCheckFailure(error)) throw new JobNotFound(jobId);
      throw error;
    }
  }

  /**
   * Sets the job's cancel flag while it is live, and returns the job as stored after. A job that has already ended is
   * returned as it is, unwritten: a cancel that comes after the end changes nothing, and a job the platform cancelled
   * keeps saying that no one asked for it.
   */
  async requestCancel(jobId: string): Promise<JobRecord> {
    const values: Record<string, unknown> = { ':cancel': true, ':updated': this.now().toISOString() };
    const written = await this.updateJobIf(jobId, {
      set: '#cancel = :cancel, #updated = :updated',
      condition: `attribute_exists(pk) AND NOT #state IN ${stateList(TERMINAL_STATES, ':t', values)}`,
      names: { '#cancel': 'cancelRequested', '#updated': 'updatedAt', '#state': 'state' },
      values,
    });
    return written ?? this.requireJob(jobId);
  }

  /**
   * Removes the job's pause task token if it is still `token`: a pause step that failed after storing one and was
   * retried stores another, which a resume sent with the first must not erase (the execution waits on the second).
   * Returns whether it was removed.
   */
  async removePauseToken(jobId: string, token: string): Promise<boolean> {
    try {
      await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.job(jobId),
        UpdateExpression: 'SET #updatedAt = :now REMOVE #token',
        ConditionExpression: '#token = :token',
        ExpressionAttributeNames: { '#updatedAt': 'updatedAt', '#token': 'pauseToken' },
        ExpressionAttributeValues: { ':now': this.now().toISOString(), ':token': token },
      });
      return true;
    } catch (error) {
      if (isConditionalCheckFailure(error)) return false;
      throw error;
    }
  }

  /** Records an attempt; a replay with the same number returns the stored one unchanged. */
  async putAttempt(attempt: AttemptRecord): Promise<AttemptRecord> {
    const record = parseAttemptRecord(attempt);
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: {
          ...jobKeys.attempt(record.jobId, record.attempt),
          ...(record.instanceId ? jobKeys.instanceIndex(record.instanceId, record.jobId, record.attempt) : {}),
          kind: 'attempt',
          ...record,
        },
        ConditionExpression: 'attribute_not_exists(pk)',
      });
      return record;
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
      const existing = await this.getAttempt(record.jobId, record.attempt);
      if (!existing) throw error;
      return existing;
    }
  }

  /** One attempt, or undefined. */
  async getAttempt(jobId: string, attempt: number): Promise<AttemptRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.attempt(jobId, attempt),
      ConsistentRead: true,
    });
    return Item ? parseAttemptRecord(stripKeys(Item)) : undefined;
  }

  /**
   * Records an attempt's stop once, with the fields `stopOf` computes from the attempt as stored. The write holds only
   * while the stop is unrecorded and, when the attempt had no price yet, while it still has none: a start that
   * batch-events records meanwhile, with the spot price the instance started at, is read again and priced from
   * instead of being overwritten with the configured price. `written` is the attempt as written; undefined when
   * another writer recorded the stop first (or `alsoUnset` refused it), and `stored` is then the attempt as stored.
   */
  async recordStop(
    attempt: AttemptRecord,
    stopOf: (current: AttemptRecord) => Partial<Omit<AttemptRecord, 'jobId' | 'attempt'>>,
    alsoUnset: readonly (keyof AttemptRecord)[] = [],
  ): Promise<{ written?: AttemptRecord; stored?: AttemptRecord }> {
    let current: AttemptRecord | undefined = attempt;
    for (let tries = 0; current && current.stoppedAt === undefined && tries < 3; tries++) {
      const unpriced = current.usdPerHour === undefined ? (['usdPerHour'] as const) : [];
      const written = await this.updateAttempt(current.jobId, current.attempt, stopOf(current), [
        'stoppedAt',
        ...unpriced,
        ...alsoUnset,
      ]);
      if (written) return { written, stored: written };
      current = await this.getAttempt(attempt.jobId, attempt.attempt);
      // Refused for a reason other than a price that arrived (the stop, or an `alsoUnset` field): that write stands.
      if (unpriced.length === 0 || current?.usdPerHour === undefined) break;
    }
    return { stored: current };
  }

  /**
   * Records again, from Batch's own record, the stop and cost of an attempt that was billed while its end was unseen
   * (`endUnseen`, to its last sign of running): what it was billed stays as `unseenCostUsd`, and `endUnseen` is
   * cleared. Once: the write holds only while the attempt is still as billed (unseen, at that stop and cost, with no
   * `unseenCostUsd`), so a redelivery or a second writer changes nothing. A start Batch's record puts earlier than
   * the one recorded (an attempt whose RUNNING was never seen is recorded as starting at its last sign of running) is
   * recorded too, so that reports place its hours where it ran. Returns the attempt as written, or undefined when it
   * was not as billed any more.
   */
  async recordSeenEnd(
    billed: AttemptRecord,
    seen: {
      status: AttemptRecord['status'];
      startedAt?: number;
      stoppedAt: number;
      costUsd: number;
      endedAfterJob?: boolean;
    },
  ): Promise<AttemptRecord | undefined> {
    if (!billed.endUnseen || billed.stoppedAt === undefined || billed.costUsd === undefined) return undefined;
    const earlierStart =
      seen.startedAt !== undefined && (billed.startedAt === undefined || seen.startedAt < billed.startedAt)
        ? seen.startedAt
        : undefined;
    try {
      const { Attributes } = await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.attempt(billed.jobId, billed.attempt),
        UpdateExpression: `SET #status = :status, #stoppedAt = :stoppedAt, #costUsd = :costUsd, #unseenCost = :billedCost${
          seen.endedAfterJob ? ', #endedAfterJob = :true' : ''
        }${earlierStart !== undefined ? ', #startedAt = :startedAt' : ''} REMOVE #endUnseen`,
        ConditionExpression:
          '#endUnseen = :true AND #stoppedAt = :billedStop AND #costUsd = :billedCost AND attribute_not_exists(#unseenCost)',
        ExpressionAttributeNames: {
          '#status': 'status',
          '#stoppedAt': 'stoppedAt',
          '#costUsd': 'costUsd',
          '#unseenCost': 'unseenCostUsd',
          '#endUnseen': 'endUnseen',
          ...(seen.endedAfterJob ? { '#endedAfterJob': 'endedAfterJob' } : {}),
          ...(earlierStart !== undefined ? { '#startedAt': 'startedAt' } : {}),
        },
        ExpressionAttributeValues: {
          ':status': seen.status,
          ':stoppedAt': seen.stoppedAt,
          ':costUsd': seen.costUsd,
          ':billedCost': billed.costUsd,
          ':billedStop': billed.stoppedAt,
          ':true': true,
          ...(earlierStart !== undefined ? { ':startedAt': earlierStart } : {}),
        },
        ReturnValues: 'ALL_NEW',
      });
      return parseAttemptRecord(stripKeys(Attributes ?? {}));
    } catch (error) {
      if (isConditionalCheckFailure(error)) return undefined;
      throw error;
    }
  }

  /**
   * Updates an attempt. `onlyIfUnset` names the fields that must not be set yet (e.g. stoppedAt), which makes
   * "record the end of this attempt" happen once however often it is replayed; returns undefined when skipped.
   * Several fields make two writers exclusive: "not run" is written only while no Batch job is recorded, and a Batch
   * job only while no end is, so one of the two always sees the other.
   */
  async updateAttempt(
    jobId: string,
    attempt: number,
    patch: Partial<Omit<AttemptRecord, 'jobId' | 'attempt'>>,
    onlyIfUnset?: keyof AttemptRecord | readonly (keyof AttemptRecord)[],
  ): Promise<AttemptRecord | undefined> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const entries = Object.entries(patch).filter(([, v]) => v !== undefined);
    if (patch.instanceId) {
      entries.push(...Object.entries(jobKeys.instanceIndex(patch.instanceId, jobId, attempt)));
    }
    const sets = entries.map(([k, v], i) => {
      names[`#s${i}`] = k;
      values[`:s${i}`] = v;
      return `#s${i} = :s${i}`;
    });
    let condition = 'attribute_exists(pk)';
    const unset = onlyIfUnset === undefined ? [] : typeof onlyIfUnset === 'string' ? [onlyIfUnset] : onlyIfUnset;
    unset.forEach((field, i) => {
      names[`#unset${i}`] = field;
      condition += ` AND attribute_not_exists(#unset${i})`;
    });
    try {
      const { Attributes } = await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.attempt(jobId, attempt),
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      });
      return parseAttemptRecord(stripKeys(Attributes ?? {}));
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
      if (unset.length > 0 && (await this.getAttempt(jobId, attempt))) return undefined;
      throw new JobNotFound(`${jobId} attempt ${attempt}`);
    }
  }

  /**
   * Records what an orphaned Batch job of this attempt cost (see {@link OrphanRun}), once per Batch job: a repeated
   * delivery changes nothing and returns false, as does a run already recorded with other figures. Two writes, each
   * safe to repeat: the attempt's `orphans` map is created if missing (a document path needs its map), then the
   * run is set where its Batch job id is not yet a key. Throws JobNotFound when the attempt does not exist.
   */
  async recordOrphanRun(jobId: string, attempt: number, batchJobId: string, run: OrphanRun): Promise<boolean> {
    const parsed = parseOrphanRun(run);
    const key = jobKeys.attempt(jobId, attempt);
    try {
      await this.client.update({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: 'SET #orphans = if_not_exists(#orphans, :none)',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#orphans': 'orphans' },
        ExpressionAttributeValues: { ':none': {} },
      });
    } catch (error) {
      if (isConditionalCheckFailure(error)) throw new JobNotFound(`${jobId} attempt ${attempt}`);
      throw error;
    }
    try {
      await this.client.update({
        TableName: this.tableName,
        Key: key,
        UpdateExpression: 'SET #orphans.#batchJob = :run',
        ConditionExpression: 'attribute_not_exists(#orphans.#batchJob)',
        ExpressionAttributeNames: { '#orphans': 'orphans', '#batchJob': batchJobId },
        ExpressionAttributeValues: { ':run': parsed },
      });
      return true;
    } catch (error) {
      if (isConditionalCheckFailure(error)) return false;
      throw error;
    }
  }

  /** Every attempt of a job, in order. */
  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return (await this.queryPrefix(jobId, 'ATTEMPT#')).map((item) => parseAttemptRecord(stripKeys(item)));
  }

  /** Records decision number `seq`; a replay of the same number changes nothing. */
  async putDecision(jobId: string, decision: DecisionRecord): Promise<void> {
    const record = parseDecisionRecord(decision);
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: { ...jobKeys.decision(jobId, record.seq), kind: 'decision', jobId, ...record },
        ConditionExpression: 'attribute_not_exists(pk)',
      });
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
    }
  }

  /** The budget watch's spot record of a tier (tier-spot.ts), or undefined when it has none. */
  async getTierSpot(tier: string): Promise<TierSpotRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.tierSpot(tier),
      ConsistentRead: true,
    });
    return Item ? parseTierSpotRecord(stripKeys(Item)) : undefined;
  }

  /**
   * Moves a tier's spot record forward: `next` gets the stored record and returns the one to store, or undefined when
   * there is nothing to write. The write is conditional on the record read being still the stored one; when another
   * writer got there first, `next` is asked again with theirs. Returns the record stored afterwards.
   */
  async updateTierSpot(
    tier: string,
    next: (stored: TierSpotRecord | undefined) => TierSpotRecord | undefined,
  ): Promise<TierSpotRecord | undefined> {
    for (let tries = 0; tries < 3; tries++) {
      const stored = await this.getTierSpot(tier);
      const wanted = next(stored);
      if (wanted === undefined) return stored;
      const record = parseTierSpotRecord(wanted);
      if (record.tier !== tier)
        throw new InvalidTierSpotRecord(`a record for tier ${record.tier} cannot be stored as tier ${tier}'s`);
      try {
        await this.client.put({
          TableName: this.tableName,
          Item: { ...jobKeys.tierSpot(tier), kind: 'tier-spot', ...record },
          ...(stored === undefined
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : {
                // Every fold moves at least one of these (tier-spot.ts), so an equal record is the one read.
                ConditionExpression:
                  'seenMs = :seen AND sinceMs = :since AND available = :available AND sinceChange = :change',
                ExpressionAttributeValues: {
                  ':seen': stored.seenMs,
                  ':since': stored.sinceMs,
                  ':available': stored.available,
                  ':change': stored.sinceChange,
                },
              }),
        });
        return record;
      } catch (error) {
        if (!isConditionalCheckFailure(error)) throw error;
      }
    }
    throw new TierSpotConflict(
      `tier ${tier}'s spot record kept changing under concurrent writers; it was not updated this time`,
    );
  }

  /** One decision of a job, by its sequence number, or undefined when none is recorded there. */
  async getDecision(jobId: string, seq: number): Promise<DecisionRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.decision(jobId, seq),
      ConsistentRead: true,
    });
    if (!Item) return undefined;
    const { jobId: _jobId, ...rest } = stripKeys(Item);
    return parseDecisionRecord(rest);
  }

  /** Every decision of a job, in order. */
  async listDecisions(jobId: string): Promise<DecisionRecord[]> {
    return (await this.queryPrefix(jobId, 'DECISION#')).map((item) => {
      const { jobId: _jobId, ...rest } = stripKeys(item);
      return parseDecisionRecord(rest);
    });
  }

  /** Claims an Idempotency-Key for a team: the first claim wins; later ones learn the job and whether it matches. */
  async claimIdempotencyKey(
    team: string,
    key: string,
    claim: Omit<IdempotencyRecord, 'answer'>,
  ): Promise<IdempotencyClaim> {
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: { ...jobKeys.idempotency(team, key), kind: 'idempotency', ...claim },
        ConditionExpression: 'attribute_not_exists(pk)',
      });
      return { claimed: true };
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
      const found = await this.findIdempotencyKey(team, key);
      return { claimed: false, jobId: String(found?.jobId), sameRequest: found?.requestHash === claim.requestHash };
    }
  }

  /**
   * Keeps on a key's claim an answer for replays to repeat, when it keeps none yet: the first kept stays. Only while
   * the claim names that job (it always does: a claim is never rewritten, so that part only guards against misuse).
   * Whether this answer was kept.
   */
  async keepIdempotencyAnswer(team: string, key: string, jobId: string, answer: string): Promise<boolean> {
    try {
      await this.client.update({
        TableName: this.tableName,
        Key: jobKeys.idempotency(team, key),
        UpdateExpression: 'SET answer = :answer',
        ConditionExpression: 'jobId = :jobId AND attribute_not_exists(answer)',
        ExpressionAttributeValues: { ':answer': answer, ':jobId': jobId },
      });
      return true;
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
      return false;
    }
  }

  /** A team's claim of an Idempotency-Key, if there is one (read consistently: a claim just made is seen). */
  async findIdempotencyKey(team: string, key: string): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.idempotency(team, key),
      ConsistentRead: true,
    });
    if (!Item) return undefined;
    return {
      jobId: String(Item.jobId),
      requestHash: String(Item.requestHash),
      ...(typeof Item.bodyHash === 'string' && { bodyHash: Item.bodyHash }),
      ...(typeof Item.answer === 'string' && { answer: Item.answer }),
    };
  }

  /**
   * A page of a team's jobs, newest first. With a filter (label selectors, states), only the jobs it keeps; such a
   * page reads at most `maxRead` jobs (default {@link MAX_JOBS_READ_PER_PAGE}), so it may hold fewer than `limit`
   * (even none) and still have a next one: the cursor then continues the search where the reading stopped. Live states
   * only (`RUNNING`, or `RUNNING,WAITING`: what a team most often asks for) are read through the byState index, so only
   * the jobs in them are read, not the team's finished history; anything else through byTeam. Cursors are the same
   * either way (a job's table keys and byTeam keys), so one continues wherever it came from.
   */
  async listJobsByTeam(
    team: string,
    options: JobListFilter & { limit?: number; cursor?: string; maxRead?: number } = {},
  ): Promise<JobPage> {
    const given = options.cursor ? decodeOpaqueCursor(options.cursor) : undefined;
    // The API checks a cursor before it lists; anything else passing one it did not get here is a bug.
    if (options.cursor && (typeof given !== 'object' || given === null)) {
      throw new Error(`listJobsByTeam: cursor "${options.cursor.slice(0, 40)}" is not one this store handed out`);
    }
    const position = given as Record<string, unknown> | undefined;
    const states = [...new Set(options.states ?? [])];
    const viaState =
      states.length > 0 && !states.some(isTerminal)
        ? await this.whileByStateServes(() => this.liveStatesPage(team, options, position, states))
        : undefined;
    return viaState ?? this.teamPage(team, options, position);
  }

  /** One page of {@link listJobsByTeam} through byTeam: the team's jobs, filtered by DynamoDB. */
  private async teamPage(
    team: string,
    options: JobListFilter & { limit?: number; maxRead?: number },
    position: Record<string, unknown> | undefined,
  ): Promise<JobPage> {
    const index = JOBS_INDEXES.byTeam;
    const limit = options.limit ?? 50;
    const maxRead = options.maxRead ?? MAX_JOBS_READ_PER_PAGE;
    const filter = jobListFilter(options);
    let start = position;
    const jobs: JobRecord[] = [];
    let lastKept: Record<string, unknown> | undefined;
    let overflow = false;
    let read = 0;
    do {
      const page = await this.client.query({
        TableName: this.tableName,
        IndexName: index.name,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': index.partition, ...filter?.names },
        ExpressionAttributeValues: { ':pk': jobKeys.teamPartition(team), ...filter?.values },
        ...(filter && { FilterExpression: filter.expression }),
        ScanIndexForward: false,
        // Unfiltered, every job read is kept; filtered, a larger read finds the matches in fewer round trips.
        Limit: filter ? Math.min(FILTERED_READ, maxRead - read) : limit - jobs.length,
        ExclusiveStartKey: start,
      });
      read += page.ScannedCount;
      start = page.LastEvaluatedKey;
      const items = page.Items;
      const kept = items.slice(0, limit - jobs.length);
      // More matches than the page holds: it ends at the last one kept, whose keys are where the next page starts.
      overflow = items.length > kept.length;
      for (const item of kept) jobs.push(parseJobRecord(stripKeys(item)));
      lastKept = kept.at(-1) ?? lastKept;
    } while (!overflow && start && jobs.length < limit && read < maxRead);
    const at = overflow ? teamPosition(team, lastKept ?? {}) : start;
    return { jobs, nextCursor: at ? encodeOpaqueCursor(at) : undefined };
  }

  /**
   * One page of {@link listJobsByTeam} for live states: each state's byState partition read newest first with the
   * team filtered, the partitions merged by gsi1sk (creation, then id: byTeam's order, so the page holds the jobs, in
   * the order, that byTeam would). A job is handed out only once every partition has been read past it, so none that
   * ranks before it can come later. A cursor in is read as "older than its job" in every partition (its job may be in
   * another state by now, or in none asked for), and a cursor out is always a job of the team's own, the last handed
   * out: byState holds every team's jobs, and where its reading stopped may be another team's, which a cursor must not
   * name. The partitions read at most half of `maxRead`; a page that has read that without filling up (states crowded
   * with other teams' jobs) reads on through byTeam from its last job with the rest, so the page reads at most
   * `maxRead` jobs in all. The partitions are read one after another, not at one moment: a job that moves
   * between two of the states while the page is read is handed out once (at its first place), and one that moves into
   * a partition already read past it is left out, as any listing read page by page can leave it.
   */
  private async liveStatesPage(
    team: string,
    options: JobListFilter & { limit?: number; maxRead?: number },
    position: Record<string, unknown> | undefined,
    states: readonly JobState[],
  ): Promise<JobPage> {
    const index = JOBS_INDEXES.byState;
    const limit = options.limit ?? 50;
    const maxRead = options.maxRead ?? MAX_JOBS_READ_PER_PAGE;
    const filter = jobListFilter({ labels: options.labels ?? [], team: jobKeys.teamPartition(team) });
    const after = position?.[index.sort];
    const sortOf = (item: Record<string, unknown>) => String(item[index.sort]);
    /** A state's partition: the matches read and not yet handed out, where its reading stopped, whether it is done. */
    const partitions = states.map((state) => ({
      state,
      matches: [] as Record<string, unknown>[],
      start: undefined as Record<string, unknown> | undefined,
      done: false,
    }));
    // The partitions may read half the page's budget: where they are crowded, byTeam reads on with the rest, so the
    // page as a whole reads at most `maxRead` jobs.
    const stateBudget = Math.floor(maxRead / 2);
    const jobs: JobRecord[] = [];
    const handedOut = new Set<string>();
    let last: Record<string, unknown> | undefined;
    let read = 0;
    while (jobs.length < limit && stateBudget > 0) {
      // The match that ranks first among those in hand.
      let next: { partition: (typeof partitions)[number]; item: Record<string, unknown> } | undefined;
      for (const partition of partitions) {
        const head = partition.matches[0];
        if (head !== undefined && (next === undefined || compareCodeUnits(sortOf(head), sortOf(next.item)) > 0))
          next = { partition, item: head };
      }
      // A partition with no match in hand may still hold one that ranks before it: read that partition first. Its
      // unread jobs all rank after where its reading stopped.
      const behind = partitions.find(
        (p) =>
          !p.done &&
          p.matches.length === 0 &&
          (next === undefined || p.start === undefined || compareCodeUnits(sortOf(p.start), sortOf(next.item)) > 0),
      );
      if (behind !== undefined) {
        if (read >= stateBudget) break;
        const page = await this.client.query({
          TableName: this.tableName,
          IndexName: index.name,
          KeyConditionExpression: after === undefined ? '#pk = :pk' : '#pk = :pk AND #sk < :after',
          ExpressionAttributeNames: {
            '#pk': index.partition,
            ...(after !== undefined && { '#sk': index.sort }),
            ...filter?.names,
          },
          ExpressionAttributeValues: {
            ':pk': behind.state,
            ...(after !== undefined && { ':after': after }),
            ...filter?.values,
          },
          FilterExpression: filter?.expression,
          ScanIndexForward: false,
          Limit: Math.min(FILTERED_READ, stateBudget - read),
          ExclusiveStartKey: behind.start,
        });
        read += page.ScannedCount;
        behind.matches.push(...page.Items);
        behind.start = page.LastEvaluatedKey;
        behind.done = behind.start === undefined;
        continue;
      }
      if (next === undefined) break;
      next.partition.matches.shift();
      const item = next.item;
      const job = parseJobRecord(stripKeys(item));
      if (handedOut.has(job.jobId)) continue;
      handedOut.add(job.jobId);
      jobs.push(job);
      last = item;
    }
    const more = partitions.some((p) => !p.done || p.matches.length > 0);
    if (!more || jobs.length === limit) {
      return { jobs, nextCursor: more && last ? encodeOpaqueCursor(teamPosition(team, last)) : undefined };
    }
    // Crowded: the partitions' budget is spent and the page is not full. byTeam goes on from the last job handed out.
    const rest = await this.teamPage(
      team,
      { ...options, states, limit: limit - jobs.length, maxRead: maxRead - read },
      last ? teamPosition(team, last) : position,
    );
    return { jobs: [...jobs, ...rest.jobs], ...(rest.nextCursor !== undefined && { nextCursor: rest.nextCursor }) };
  }

  /**
   * Every job of a team, oldest first, page by page through the byTeam index; with `createdBeforeMs`, only those
   * created before it; with `states`, only those in one of them. The showback reads a period's jobs this way without a
   * lower bound, so no long-running job is missed; budget-watch and local mode's restart read the jobs in some states.
   */
  async *teamJobs(
    team: string,
    options: {
      createdBeforeMs?: number;
      states?: readonly JobState[];
      /** Given: a record that does not parse is handed here and skipped; not given, it throws InvalidJobRecord. */
      onInvalid?: (invalid: UnreadableJob) => void;
    } = {},
  ): AsyncGenerator<JobRecord> {
    const index = JOBS_INDEXES.byTeam;
    const bounded = options.createdBeforeMs !== undefined;
    // States are filtered by DynamoDB: the others are read by the query but never sent or parsed.
    const states = Object.fromEntries((options.states ?? []).map((state, i) => [`:state${i}`, state]));
    const filtered = Object.keys(states).length > 0;
    const items = this.queryAll({
      IndexName: index.name,
      KeyConditionExpression: bounded ? '#pk = :pk AND #sk < :before' : '#pk = :pk',
      ...(filtered ? { FilterExpression: `#state IN (${Object.keys(states).join(', ')})` } : {}),
      ExpressionAttributeNames: {
        '#pk': index.partition,
        ...(bounded ? { '#sk': index.sort } : {}),
        ...(filtered ? { '#state': 'state' } : {}),
      },
      ExpressionAttributeValues: {
        ':pk': jobKeys.teamPartition(team),
        ...(bounded ? { ':before': new Date(options.createdBeforeMs as number).toISOString() } : {}),
        ...states,
      },
    });
    for await (const item of items) {
      const job = this.parseListed(item, options.onInvalid);
      if (job) yield job;
    }
  }

  /**
   * A team's jobs that may have run in a showback period (domain/showback.ts `mayHaveRunIn`: created before its end,
   * and not ended before it began), with `labels` only those matching them, each with its attempts, read a few jobs at
   * a time.
   */
  async jobsThatMayHaveRunIn(
    team: string,
    period: ReportPeriod,
    options: { labels?: readonly LabelSelector[] } = {},
  ): Promise<JobWithAttempts[]> {
    const jobs: JobRecord[] = [];
    for await (const job of this.teamJobs(team, { createdBeforeMs: period.toMs })) {
      if (mayHaveRunIn(job, period) && matchesLabels(job.labels, options.labels ?? [])) jobs.push(job);
    }
    return mapConcurrently(jobs, ATTEMPT_READS_IN_FLIGHT, async (job) => ({
      job,
      attempts: await this.listAttempts(job.jobId),
    }));
  }

  /**
   * Records that a scheduled report was announced (its `Cost Report Ready` event published). Written once: a record
   * already there is kept, so what the first announcement said stays on record.
   */
  async recordReportAnnounced(
    report: { kind: string; periodStart: string; team?: string },
    fields: { uri: string; totalUsd: number; jobs: number; eventId: string },
  ): Promise<void> {
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: {
          ...jobKeys.report(report.kind, report.periodStart, report.team),
          kind: 'report',
          report: report.kind,
          periodStart: report.periodStart,
          ...(report.team === undefined ? {} : { team: report.team }),
          ...fields,
          announcedAt: this.now().toISOString(),
        },
        ConditionExpression: 'attribute_not_exists(pk)',
      });
    } catch (error) {
      if (!isConditionalCheckFailure(error)) throw error;
    }
  }

  /** Whether a scheduled report's announcement is on record. */
  async reportAnnounced(report: { kind: string; periodStart: string; team?: string }): Promise<boolean> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: jobKeys.report(report.kind, report.periodStart, report.team),
      ConsistentRead: true,
    });
    return Item !== undefined;
  }

  /**
   * Every attempt that ran (or runs) on an EC2 instance, in index order. Batch reuses warm instances and packs
   * several jobs onto a large one, so an instance has held the attempts of many jobs, and the index's order (by job id,
   * then attempt number) says nothing about which of them runs there now.
   */
  async findAttemptsByInstance(instanceId: string): Promise<AttemptRecord[]> {
    const index = JOBS_INDEXES.byInstance;
    const attempts: AttemptRecord[] = [];
    const items = this.queryAll({
      IndexName: index.name,
      KeyConditionExpression: '#pk = :pk',
      ExpressionAttributeNames: { '#pk': index.partition },
      ExpressionAttributeValues: { ':pk': `INSTANCE#${instanceId}` },
    });
    for await (const item of items) attempts.push(parseAttemptRecord(stripKeys(item)));
    return attempts;
  }

  /**
   * Jobs in the given states across teams (budget-watch and local mode's restart), oldest first (by creation, then
   * id). Each state is one Query of the byState index, so only the jobs in it are read: a team's finished jobs, which
   * grow without end, are never read (budget-watch asks every 5 minutes). A jobs table without that index yet (a
   * deployment whose index is still being filled, a local mode folder from before it) is read the earlier way, each
   * team's jobs through byTeam with the states filtered by DynamoDB. With `onInvalid`, a record that does not parse is
   * handed to it and left out, so one bad record does not hide the others; without, it throws InvalidJobRecord.
   * `anyTeam` also takes, through the index, the jobs of teams not in `teams` (local mode restarted with a
   * configuration that no longer lists a team still has that team's jobs to end); without the index, only `teams`'.
   */
  async listJobsInStates(
    teams: readonly string[],
    states: readonly JobState[],
    onInvalid?: (invalid: UnreadableJob) => void,
    anyTeam = false,
  ): Promise<JobRecord[]> {
    if (states.length === 0 || (teams.length === 0 && !anyTeam)) return [];
    let unreadable: UnreadableJob[] = [];
    let jobs = await this.whileByStateServes(() =>
      this.jobsInStatesByIndex(anyTeam ? undefined : teams, states, onInvalid && ((i) => unreadable.push(i))),
    );
    if (jobs === undefined) {
      unreadable = [];
      jobs = [];
      for (const team of teams) {
        for await (const job of this.teamJobs(team, {
          states,
          ...(onInvalid && { onInvalid: (i) => unreadable.push(i) }),
        }))
          jobs.push(job);
      }
    }
    for (const invalid of unreadable) onInvalid?.(invalid);
    // Both indexes sort a team's jobs by gsi1sk (creation, then id): the same order across teams.
    const order = (job: JobRecord) => jobKeys.teamIndex(job.team, job.createdAt, job.jobId).gsi1sk;
    return jobs.sort((a, b) => compareCodeUnits(order(a), order(b)));
  }

  /**
   * {@link listJobsInStates} through the byState index. The index is read a state at a time, so a job that changes
   * state between two of the queries can be read twice (the later read is kept), or not at all, when it moves into a
   * state already read: budget-watch then handles it at its next tick, and its accrual, counted from the attempts'
   * times, loses nothing. Index reads are eventually consistent, as byTeam's always were.
   */
  private async jobsInStatesByIndex(
    teams: readonly string[] | undefined,
    states: readonly JobState[],
    onInvalid: ((invalid: UnreadableJob) => void) | undefined,
  ): Promise<JobRecord[]> {
    const index = JOBS_INDEXES.byState;
    const wanted = teams === undefined ? undefined : new Set(teams);
    const byId = new Map<string, JobRecord>();
    for (const state of new Set(states)) {
      const items = this.queryAll({
        IndexName: index.name,
        KeyConditionExpression: '#state = :state',
        ExpressionAttributeNames: { '#state': index.partition },
        ExpressionAttributeValues: { ':state': state },
      });
      for await (const item of items) {
        if (wanted !== undefined && !wanted.has(String(item.team))) continue;
        const job = this.parseListed(item, onInvalid);
        if (job) byId.set(job.jobId, job);
      }
    }
    return [...byId.values()];
  }

  /** A job record read by a list; one that does not parse goes to `onInvalid` when given, else throws. */
  private parseListed(
    item: Record<string, unknown>,
    onInvalid: ((invalid: UnreadableJob) => void) | undefined,
  ): JobRecord | undefined {
    try {
      return parseJobRecord(stripKeys(item));
    } catch (error) {
      if (!(onInvalid && error instanceof InvalidJobRecord)) throw error;
      onInvalid({ key: String(item[KEYS.partition]), error });
      return undefined;
    }
  }

  private async queryPrefix(jobId: string, prefix: string): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    const query = this.queryAll({
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': jobKeys.job(jobId).pk, ':prefix': prefix },
      ConsistentRead: true,
    });
    for await (const item of query) items.push(item);
    return items;
  }

  /** Every item a query of the jobs table returns, page after page. */
  private async *queryAll(
    input: Omit<QueryInput, 'TableName' | 'ExclusiveStartKey'>,
  ): AsyncGenerator<Record<string, unknown>> {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.client.query({ ...input, TableName: this.tableName, ExclusiveStartKey: start });
      yield* page.Items;
      start = page.LastEvaluatedKey;
    } while (start);
  }
}
