// The control-plane bench's account of when each bundle loads its AWS SDK packages (issue 7): static imports at cold
// start, dynamic `import()` on first use — read from esbuild's metafile import kinds.
import { describe, expect, it } from 'vitest';
import {
  CONTROL_PLANE_GOALS,
  type ControlPlaneBenchResult,
  controlPlaneTables,
  lambdaEstimateMs,
  planningLambdas,
  planSolveCases,
  sdkImportsByKind,
} from '../../bench/control-plane';
import { controlPlaneGoals } from '../../bench/run';
import { MAX_PLAN_GRID_POINTS, planGridPoints } from '../../lambdas/domain/spot-planner';

type Kind = 'import-statement' | 'dynamic-import' | 'require-call';
const ext = (path: string, kind: Kind, external = true) => ({ path, kind, external });

describe('sdkImportsByKind', () => {
  it.each([
    { name: 'no imports', imports: [], atInit: [], onFirstUse: [], required: [] },
    {
      name: 'a static import loads at init, a dynamic one on first use',
      imports: [ext('@aws-sdk/client-dynamodb', 'import-statement'), ext('@aws-sdk/client-s3', 'dynamic-import')],
      atInit: ['@aws-sdk/client-dynamodb'],
      onFirstUse: ['@aws-sdk/client-s3'],
      required: [],
    },
    {
      name: 'a package imported both ways is loaded at init (the static import wins)',
      imports: [ext('@aws-sdk/client-s3', 'dynamic-import'), ext('@aws-sdk/client-s3', 'import-statement')],
      atInit: ['@aws-sdk/client-s3'],
      onFirstUse: [],
      required: [],
    },
    {
      name: 'a require() through the banner loads at init too, and is told apart from a static import',
      imports: [ext('@aws-sdk/lib-dynamodb', 'require-call'), ext('@aws-sdk/client-dynamodb', 'import-statement')],
      atInit: ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb'],
      onFirstUse: [],
      required: ['@aws-sdk/lib-dynamodb'],
    },
    {
      name: 'a package both required and imported statically is not counted as required only',
      imports: [ext('@aws-sdk/client-dynamodb', 'require-call'), ext('@aws-sdk/client-dynamodb', 'import-statement')],
      atInit: ['@aws-sdk/client-dynamodb'],
      onFirstUse: [],
      required: [],
    },
    {
      name: 'non-SDK and bundled (non-external) imports are ignored; duplicates collapse; lists are sorted',
      imports: [
        ext('node:crypto', 'import-statement'),
        ext('@aws-sdk/client-sfn', 'dynamic-import'),
        ext('@aws-sdk/client-batch', 'dynamic-import'),
        ext('@aws-sdk/client-batch', 'dynamic-import'),
        ext('@aws-sdk/util-dynamodb', 'import-statement', false),
      ],
      atInit: [],
      onFirstUse: ['@aws-sdk/client-batch', '@aws-sdk/client-sfn'],
      required: [],
    },
  ])('$name', ({ imports, atInit, onFirstUse, required }) => {
    expect(sdkImportsByKind(imports)).toEqual({ atInit, onFirstUse, required });
  });
});

describe('controlPlaneTables', () => {
  const result: ControlPlaneBenchResult = {
    name: 'control-plane',
    quick: true,
    goals: CONTROL_PLANE_GOALS,
    bundles: [
      {
        handler: 'pause',
        bytes: 102_400,
        kib: 100,
        top: [{ module: 'zod', bytes: 51_200 }],
        sdkAtInit: ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb'],
        sdkOnFirstUse: ['@aws-sdk/client-s3', '@aws-sdk/client-sfn'],
        sdkRequired: ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb'],
        configLiteralInBundle: true,
        withinGoal: true,
      },
      {
        handler: 'noop',
        bytes: 1024,
        kib: 1,
        top: [],
        sdkAtInit: [],
        sdkOnFirstUse: [],
        sdkRequired: [],
        configLiteralInBundle: true,
        withinGoal: true,
      },
    ],
    coldStarts: [
      {
        handler: 'pause',
        runs: 5,
        medianMs: 120,
        maxMs: 140,
        medianImportMs: 100,
        startsWithoutConfigVariable: true,
        withinGoal: true,
      },
    ],
    sdkImports: [
      { module: '@aws-sdk/client-s3', loadedWith: 'import', medianMs: 42, atInitIn: 0, onFirstUseIn: 1 },
      { module: '@aws-sdk/lib-dynamodb', loadedWith: 'require', medianMs: 30, atInitIn: 1, onFirstUseIn: 0 },
    ],
    latency: [],
    transitions: { stateEntered: 11, states: ['Analyze'], jobState: 'SUCCEEDED', withinGoal: true },
    planSolves: [
      {
        label: 'largest plan solved',
        timeLeftHours: 144,
        workLeftHours: 48,
        gridPoints: 999_990,
        runs: 3,
        medianMs: 3000,
        maxMs: 3200,
        rssMiB: 80,
        lambdas: [
          { handler: 'cost-gate', memoryMiB: 1024, timeoutSeconds: 30, estimatedMs: 5183, withinGoal: true },
          { handler: 'budget-watch', memoryMiB: 512, timeoutSeconds: 240, estimatedMs: 10_365, withinGoal: true },
        ],
      },
    ],
    liveJobsRead: {
      teams: 4,
      finishedJobs: 20_000,
      liveJobs: 20,
      teamLiveJobs: 5,
      itemBytes: 2_048,
      paths: [
        {
          path: 'byState',
          itemsRead: 20,
          readUnits: 5,
          runs: 9,
          medianMs: 3.04,
          teamListing: { itemsRead: 20, readUnits: 5, pages: 1, medianMs: 4.26 },
        },
        {
          path: 'byTeam',
          itemsRead: 20_020,
          readUnits: 5_005,
          runs: 9,
          medianMs: 812.5,
          teamListing: { itemsRead: 5_005, readUnits: 1_251.5, pages: 6, medianMs: 230 },
        },
      ],
    },
    bundleMemory: [
      {
        label: 'unpacks to the 1 GiB limit from next to nothing',
        archiveMiB: 1.02,
        unpackedMiB: 1023,
        peakMiB: 2140.4,
        functionMiB: 3072,
        withinGoal: true,
      },
      {
        label: 'does not compress: the 500 MiB limit on the archive',
        archiveMiB: 499.2,
        unpackedMiB: 499,
        peakMiB: 3100,
        functionMiB: 3072,
        withinGoal: false,
      },
    ],
    elapsedSeconds: 1,
  };

  it('tabulates Analyze’s peak memory per bundle, and its goal row takes the heaviest and fails if any is over', () => {
    const rows = controlPlaneTables(result).split('\n');
    expect(rows).toContain(
      '| unpacks to the 1 GiB limit from next to nothing | 1.0 MiB | 1023 MiB | 2140 MiB | 3072 MiB | yes |',
    );
    expect(rows).toContain(
      '| does not compress: the 500 MiB limit on the archive | 499.2 MiB | 499 MiB | 3100 MiB | 3072 MiB | no |',
    );
    expect(controlPlaneGoals(result).find((r) => r.metric.startsWith('peak memory'))).toEqual({
      part: 'control-plane',
      metric:
        'peak memory of Analyze on the largest bundles (one that does not compress: the 500 MiB limit on the archive)',
      value: '3100 MiB',
      goal: '≤ 3072 MiB (its memory)',
      met: false,
    });
    // A quick run measures none, and says nothing of it.
    const quick = { ...result, bundleMemory: [] };
    expect(controlPlaneTables(quick)).not.toContain('Analyze step');
    expect(controlPlaneGoals(quick).some((r) => r.metric.startsWith('peak memory'))).toBe(false);
  });

  it('prices each way of reading the live jobs for a month of ticks', () => {
    const rows = controlPlaneTables(result).split('\n');

    // 5 read units × 8,640 ticks × $0.125 per million = $0.0054; 5,005 units: $5.41.
    expect(rows).toContain('| byState, a Query per live state | 20 | 5 | $0.01 | 3.0 ms |');
    expect(rows).toContain('| byTeam, each team’s history (before) | 20,020 | 5,005 | $5.41 | 812.5 ms |');
  });

  it('shows a team’s listing of its live jobs with the pages each way takes', () => {
    const tables = controlPlaneTables(result);
    const rows = tables.split('\n');

    expect(tables).toContain('one team of the 4: 5 live jobs among its 5,005; a page reads at most 1,000 jobs');
    expect(rows).toContain('| byState, the states’ partitions merged | 20 | 5 | 1 | 4.3 ms |');
    expect(rows).toContain('| byTeam, the team’s history (before) | 5,005 | 1,251.5 | 6 | 230.0 ms |');
  });

  it('lists each bundle’s SDK packages loaded at init apart from those loaded on first use', () => {
    const rows = controlPlaneTables(result).split('\n');

    expect(rows).toContain(
      '| pause | 100.0 | yes | zod 50 | 120 ms | 100 ms | yes | client-dynamodb, lib-dynamodb | client-s3, client-sfn |',
    );
    expect(rows).toContain('| noop | 1.0 | yes |  | – | – | – | none | none |');
  });

  it('counts per SDK package the bundles that load it at init and on first use', () => {
    const rows = controlPlaneTables(result).split('\n');

    expect(rows).toContain('| package | loaded with | load | at init | on first use |');
    expect(rows).toContain('| @aws-sdk/client-s3 | `import()` | 42 ms | 0/2 | 1/2 |');
    expect(rows).toContain('| @aws-sdk/lib-dynamodb | `require` | 30 ms | 1/2 | 0/2 |');
  });

  it('tabulates each cold plan solve with its estimate in every Lambda that solves plans', () => {
    const rows = controlPlaneTables(result).split('\n');

    expect(rows).toContain(
      '| plan | to deadline / work | grid points | median | max | RSS | cost-gate (1024 MiB, 30 s) | budget-watch (512 MiB, 240 s) |',
    );
    expect(rows).toContain(
      '| largest plan solved | 144 h / 48 h | 999,990 | 3000 ms | 3200 ms | 80 MiB | 5.2 s (yes) | 10.4 s (yes) |',
    );
  });

  it('makes the goal row from the largest plan in the Lambda nearest its timeout', () => {
    const row = controlPlaneGoals(result).find((r) => r.metric.startsWith('cold plan solve'));

    // cost-gate: 5.2 s of 30 s (17 %); budget-watch: 10.4 s of 240 s (4 %).
    expect(row).toEqual({
      part: 'control-plane',
      metric: 'cold plan solve, largest plan solved, in cost-gate (1024 MiB; 3.0 s here)',
      value: '5.2 s',
      goal: '≤ 10.0 s',
      met: true,
    });
  });
});

describe('plan solve sizing', () => {
  it('solves the sweep’s largest job and the largest plan under MAX_PLAN_GRID_POINTS', () => {
    const [sweep, cap] = planSolveCases(300);

    expect(sweep).toMatchObject({ timeLeftSeconds: 92 * 3600, workLeftSeconds: 48 * 3600 });
    const capSeconds = cap?.timeLeftSeconds as number;
    expect(planGridPoints(capSeconds, 48 * 3600, 300)).toBeLessThanOrEqual(MAX_PLAN_GRID_POINTS);
    expect(planGridPoints(capSeconds + 300, 48 * 3600, 300)).toBeGreaterThan(MAX_PLAN_GRID_POINTS);
    // 578 work points (48 h of 300 s cells, plus 0 and the interpolation's top): floor(1e6 / 578) − 1 = 1729 steps.
    expect(capSeconds).toBe(1729 * 300);
  });

  it('scales a measured time by the Lambda’s share of a vCPU, never faster than one vCPU', () => {
    expect(lambdaEstimateMs(1000, 1769)).toBe(1000);
    expect(lambdaEstimateMs(1000, 512)).toBeCloseTo((1000 * 1769) / 512, 6);
    expect(lambdaEstimateMs(1000, 4096)).toBe(1000);
  });

  it('names the deployed planning Lambdas with their timeouts', () => {
    expect(planningLambdas().map((l) => [l.handler, l.timeoutSeconds])).toEqual([
      ['cost-gate', 30],
      ['attempt-outcome', 30],
      ['budget-watch', 240],
    ]);
  });
});
