// The control-plane bench's account of when each bundle loads its AWS SDK packages (issue 7): static imports at cold
// start, dynamic `import()` on first use — read from esbuild's metafile import kinds.
import { describe, expect, it } from 'vitest';
import {
  CONTROL_PLANE_GOALS,
  type ControlPlaneBenchResult,
  controlPlaneTables,
  sdkImportsByKind,
} from '../../bench/control-plane';

type Kind = 'import-statement' | 'dynamic-import' | 'require-call';
const ext = (path: string, kind: Kind, external = true) => ({ path, kind, external });

describe('sdkImportsByKind', () => {
  it.each([
    { name: 'no imports', imports: [], atInit: [], onFirstUse: [] },
    {
      name: 'a static import loads at init, a dynamic one on first use',
      imports: [ext('@aws-sdk/client-dynamodb', 'import-statement'), ext('@aws-sdk/client-s3', 'dynamic-import')],
      atInit: ['@aws-sdk/client-dynamodb'],
      onFirstUse: ['@aws-sdk/client-s3'],
    },
    {
      name: 'a package imported both ways is loaded at init (the static import wins)',
      imports: [ext('@aws-sdk/client-s3', 'dynamic-import'), ext('@aws-sdk/client-s3', 'import-statement')],
      atInit: ['@aws-sdk/client-s3'],
      onFirstUse: [],
    },
    {
      name: 'a require() through the banner loads at init too',
      imports: [ext('@aws-sdk/lib-dynamodb', 'require-call')],
      atInit: ['@aws-sdk/lib-dynamodb'],
      onFirstUse: [],
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
    },
  ])('$name', ({ imports, atInit, onFirstUse }) => {
    expect(sdkImportsByKind(imports)).toEqual({ atInit, onFirstUse });
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
    sdkImports: [{ module: '@aws-sdk/client-s3', medianMs: 42, atInitIn: 0, onFirstUseIn: 1 }],
    latency: [],
    transitions: { stateEntered: 11, states: ['Analyze'], jobState: 'SUCCEEDED', withinGoal: true },
    elapsedSeconds: 1,
  };

  it('lists each bundle’s SDK packages loaded at init apart from those loaded on first use', () => {
    const rows = controlPlaneTables(result).split('\n');

    expect(rows).toContain(
      '| pause | 100.0 | yes | zod 50 | 120 ms | 100 ms | yes | client-dynamodb, lib-dynamodb | client-s3, client-sfn |',
    );
    expect(rows).toContain('| noop | 1.0 | yes |  | – | – | – | none | none |');
  });

  it('counts per SDK package the bundles that load it at init and on first use', () => {
    const rows = controlPlaneTables(result).split('\n');

    expect(rows).toContain('| package | import | at init | on first use |');
    expect(rows).toContain('| @aws-sdk/client-s3 | 42 ms | 0/2 | 1/2 |');
  });
});
