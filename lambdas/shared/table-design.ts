/**
 * The DynamoDB key design, shared by the stateful stack (which creates the tables and indexes) and every
 * adapter that reads or writes them. Pure constants and key builders: no SDK imports.
 *
 * Jobs table (single-table design, one partition per job):
 *   pk = JOB#<jobId>   sk = META                 the job record (state, tier, team, progress, cost)
 *   pk = JOB#<jobId>   sk = ATTEMPT#<nnn>        one Batch attempt (queue, instance, price, start/stop, cost)
 *   pk = JOB#<jobId>   sk = DECISION#<nnn>       one lifecycle decision and its reason
 *   pk = IDEMPOTENCY#<team>#<key>  sk = META     an Idempotency-Key claim (request hashes → job id, first answer)
 *   pk = TIERSPOT#<tier>  sk = META              the budget watch's record of the tier's spot capacity (tier-spot.ts)
 *   pk = REPORT#<kind>#<first day>  sk = <team>|ALL-TEAMS   a scheduled showback report that was announced
 *   GSI byTeam:      gsi1pk = TEAM#<team>, gsi1sk = <createdAt ISO>#<jobId>   (job records only)
 *   GSI byInstance:  gsi2pk = INSTANCE#<i-…>, gsi2sk = JOB#<jobId>#ATTEMPT#<nnn> (attempts with a known instance)
 *   GSI byState:     state = <job state>, gsi1sk = <createdAt ISO>#<jobId>              (job records only)
 *     Keyed on attributes every job record has always carried, so DynamoDB fills it from the records already there
 *     when an existing table gains it: the jobs in a live state are one Query each, not a read of every team's history.
 *
 * Budgets table (one partition per scope, one item per period):
 *   pk = SCOPE#<kind>:<id>   sk = PERIOD#<YYYY-MM>   limit, spent, reserved, available, per-job reservations
 */

/** Partition and sort key attribute names used by both tables. */
export const KEYS = { partition: 'pk', sort: 'sk' } as const;

/** Global secondary indexes on the jobs table. */
export const JOBS_INDEXES = {
  byTeam: { name: 'byTeam', partition: 'gsi1pk', sort: 'gsi1sk' },
  byInstance: { name: 'byInstance', partition: 'gsi2pk', sort: 'gsi2sk' },
  byState: { name: 'byState', partition: 'state', sort: 'gsi1sk' },
} as const;

/** Zero-padded attempt and decision numbers sort correctly as strings. */
export function pad(n: number): string {
  return String(n).padStart(3, '0');
}

/** Key builders for the jobs table. */
export const jobKeys = {
  job: (jobId: string) => ({ pk: `JOB#${jobId}`, sk: 'META' }),
  attempt: (jobId: string, attempt: number) => ({ pk: `JOB#${jobId}`, sk: `ATTEMPT#${pad(attempt)}` }),
  decision: (jobId: string, seq: number) => ({ pk: `JOB#${jobId}`, sk: `DECISION#${pad(seq)}` }),
  idempotency: (team: string, key: string) => ({ pk: `IDEMPOTENCY#${team}#${key}`, sk: 'META' }),
  tierSpot: (tier: string) => ({ pk: `TIERSPOT#${tier}`, sk: 'META' }),
  /** A scheduled report's announcement record: one per report kind, period and team (or all teams). */
  report: (kind: string, periodStart: string, team?: string) => ({
    pk: `REPORT#${kind}#${periodStart}`,
    sk: team === undefined ? 'ALL-TEAMS' : `TEAM#${team}`,
  }),
  /** The byTeam partition of a team's job records. */
  teamPartition: (team: string) => `TEAM#${team}`,
  teamIndex: (team: string, createdAt: string, jobId: string) => ({
    gsi1pk: jobKeys.teamPartition(team),
    gsi1sk: `${createdAt}#${jobId}`,
  }),
  instanceIndex: (instanceId: string, jobId: string, attempt: number) => ({
    gsi2pk: `INSTANCE#${instanceId}`,
    gsi2sk: `JOB#${jobId}#ATTEMPT#${pad(attempt)}`,
  }),
} as const;

/** Key builders for the budgets table. */
export const budgetKeys = {
  period: (scope: string, period: string) => ({ pk: `SCOPE#${scope}`, sk: `PERIOD#${period}` }),
  /** The ledger's record of one job: its scopes, period, amount and the results of its operations. */
  job: (jobId: string) => ({ pk: `LEDGERJOB#${jobId}`, sk: 'META' }),
  /** byTeam index attributes of a scope's period item, so a team's scopes for a period are one Query. */
  teamIndex: (team: string, period: string, scope: string) => ({
    gsi1pk: budgetKeys.teamPartition(team),
    gsi1sk: `PERIOD#${period}#${scope}`,
  }),
  /** The byTeam partition of a team's scope items. */
  teamPartition: (team: string) => `TEAM#${team}`,
  /** The byTeam sort-key prefix selecting one period. */
  teamPeriodPrefix: (period: string) => `PERIOD#${period}#`,
} as const;

/** Engine-neutral description of a table: what the stack provisions and what local mode creates. */
export interface TableDefinition {
  readonly partitionKey: string;
  readonly sortKey: string;
  readonly indexes: ReadonlyArray<{ readonly name: string; readonly partition: string; readonly sort: string }>;
}

/** The jobs table: jobs, attempts, decisions, idempotency claims and the tiers' spot records. */
export const JOBS_TABLE: TableDefinition = {
  partitionKey: KEYS.partition,
  sortKey: KEYS.sort,
  indexes: [JOBS_INDEXES.byTeam, JOBS_INDEXES.byInstance, JOBS_INDEXES.byState],
};

/** Global secondary indexes on the budgets table. */
export const BUDGETS_INDEXES = {
  byTeam: { name: 'byTeam', partition: 'gsi1pk', sort: 'gsi1sk' },
} as const;

/**
 * The budgets table: one item per scope and period (pk = SCOPE#<scope>, sk = PERIOD#<YYYY-MM>, indexed byTeam with
 * gsi1pk = TEAM#<team>, gsi1sk = PERIOD#<YYYY-MM>#<scope>) and one ledger record per job
 * (pk = LEDGERJOB#<jobId>, sk = META; not indexed).
 */
export const BUDGETS_TABLE: TableDefinition = {
  partitionKey: KEYS.partition,
  sortKey: KEYS.sort,
  indexes: [BUDGETS_INDEXES.byTeam],
};

/** A DynamoDB CreateTable request body for a definition (on-demand billing, all attributes projected). */
export function createTableRequest(tableName: string, table: TableDefinition) {
  const attributes = new Set([
    table.partitionKey,
    table.sortKey,
    ...table.indexes.flatMap((i) => [i.partition, i.sort]),
  ]);
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST' as const,
    AttributeDefinitions: [...attributes].map((name) => ({ AttributeName: name, AttributeType: 'S' as const })),
    KeySchema: [
      { AttributeName: table.partitionKey, KeyType: 'HASH' as const },
      { AttributeName: table.sortKey, KeyType: 'RANGE' as const },
    ],
    GlobalSecondaryIndexes:
      table.indexes.length === 0
        ? undefined
        : table.indexes.map((index) => ({
            IndexName: index.name,
            KeySchema: [
              { AttributeName: index.partition, KeyType: 'HASH' as const },
              { AttributeName: index.sort, KeyType: 'RANGE' as const },
            ],
            Projection: { ProjectionType: 'ALL' as const },
          })),
  };
}
