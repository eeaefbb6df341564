/**
 * CloudFormation takes at most 500 resources in a stack, and every team adds resources to the platform stack: synth
 * refuses the team that would pass the limit, naming how many teams the configuration fits. The figures are measured
 * here from synthesized templates, independently of how the check counts.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config';
import { CONFIG_DESCRIPTIONS } from '../../lib/config-descriptions';
import { arn, synthesize } from './synth';

const teams = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: `team-${i}`, principals: [arn(`team-${i}`)], monthlyBudgetUsd: 100 }));
const platformResources = (n: number) =>
  Object.keys(synthesize({ teams: teams(n) }).platformTemplate.toJSON().Resources).length;

describe('the CloudFormation resource limit', () => {
  it('synthesizes as many teams as the platform stack holds, and refuses one more saying how many fit', () => {
    const one = platformResources(1);
    const each = platformResources(2) - one;
    // A job role, its policy and a job definition for each of the default tiers.
    expect(each).toBe(2 + parseConfig({}, 'defaults').tiers.length);
    const fit = Math.floor((500 - (one - each)) / each);
    expect(fit).toBeGreaterThan(2);
    // The config reference (README) gives the figure.
    expect(CONFIG_DESCRIPTIONS.teams).toContain(`about ${fit} teams with the default tiers`);

    expect(platformResources(fit)).toBeLessThanOrEqual(500);
    expect(() => synthesize({ teams: teams(fit + 1) })).toThrow(
      new RegExp(
        `stack Trainyard-Platform would hold ${one + fit * each} CloudFormation resources.*the ${fit + 1} teams add ${(fit + 1) * each} \\(${each} each.*fits at most ${fit} teams`,
      ),
    );
  });
});
