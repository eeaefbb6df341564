import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type App, Stack } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../lib/app';
import { CDK_FEATURE_FLAGS, CDK_FLAG_DEPARTURES } from '../../lib/feature-flags';
import { synthesize } from './synth';

const flags: Record<string, unknown> = CDK_FEATURE_FLAGS;
const VALIDATE = '@aws-cdk/core:validateAgainstDefaultRules';

interface ValidationReport {
  pluginReports: Array<{ summary: { pluginName: string }; violations: Array<{ ruleName: string }> }>;
}

describe('CDK feature flags', () => {
  it('decides every flag the installed aws-cdk-lib recommends', () => {
    const undecided = Object.keys(cxapi.CURRENTLY_RECOMMENDED_FLAGS).filter((flag) => !(flag in flags));
    expect(undecided).toEqual([]);
  });

  it("sets each to CDK's recommendation, but for the departures, each of which departs and says why", () => {
    const recommended: Record<string, unknown> = cxapi.CURRENTLY_RECOMMENDED_FLAGS;
    for (const [flag, value] of Object.entries(flags)) {
      if (flag in CDK_FLAG_DEPARTURES) {
        expect(value, flag).not.toEqual(recommended[flag]);
        expect(CDK_FLAG_DEPARTURES[flag]?.length, flag).toBeGreaterThan(40);
      } else {
        expect(value, flag).toEqual(recommended[flag]);
      }
    }
    expect(Object.keys(CDK_FLAG_DEPARTURES).filter((flag) => !(flag in flags))).toEqual([]);
  });

  it('names only flags aws-cdk-lib knows', () => {
    expect(Object.keys(flags).filter((flag) => !(flag in cxapi.FLAGS))).toEqual([]);
  });

  it("is what every Trainyard app reads, unless the app's own context says otherwise", () => {
    const app = createApp({ '@aws-cdk/core:enableAdditionalMetadataCollection': true });
    expect(app.node.tryGetContext('@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy')).toBe(true);
    expect(app.node.tryGetContext('@aws-cdk/core:defaultCrossStackReferences')).toBe('strong');
    expect(app.node.tryGetContext('@aws-cdk/core:enableAdditionalMetadataCollection')).toBe(true);
  });
});

describe("CDK's CloudFormation validation at synth", () => {
  it('finds nothing in either of our templates', () => {
    const { stateful } = synthesize();
    const assembly = (stateful.node.root as App).synth();
    const report = JSON.parse(readFileSync(join(assembly.directory, cxapi.VALIDATION_REPORT_FILE), 'utf8'));
    expect(assembly.stacks.map((stack) => stack.stackName).sort()).toEqual([
      'Trainyard-Platform',
      'Trainyard-Stateful',
    ]);
    expect((report as ValidationReport).pluginReports.flatMap((r) => r.violations)).toEqual([]);
  });

  it('fails the synth on a template CloudFormation would refuse, which without the flag is a warning', () => {
    const synthWith = (validate: boolean) => {
      const app = createApp({ [VALIDATE]: validate });
      const bucket = new s3.Bucket(new Stack(app, 'Broken'), 'Bucket');
      (bucket.node.defaultChild as s3.CfnBucket).addPropertyOverride('NotAProperty', 1);
      return () => app.synth();
    };
    expect(synthWith(true)).toThrow(/NotAProperty: Additional properties are not allowed/);
    expect(synthWith(false)).not.toThrow();
  });
});
