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

    expect(rows).toContain('| package | loaded with | load | at init | on first use |');
    expect(rows).toContain('| @aws-sdk/client-s3 | `import()` | 42 ms | 0/2 | 1/2 |');
    expect(rows).toContain('| @aws-sdk/lib-dynamodb | `require` | 30 ms | 1/2 | 0/2 |');
  });
});
