import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEFAULT_TIERS,
  isAdmin,
  loadConfig,
  parseConfig,
  parseDuration,
  teamForPrincipal,
} from '../../lib/config';
import { gpuTier as gpu } from './synth';

const team = (overrides: Record<string, unknown> = {}) => ({ id: 'nlp', monthlyBudgetUsd: 100, ...overrides });

function messageFor(input: unknown): string {
  try {
    parseConfig(input, 'trainyard.config.json');
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('config was accepted');
}

describe('configuration defaults', () => {
  it('synthesizes with no file at all: the six seed tiers and one team', () => {
    const config = loadConfig(join(mkdtempSync(join(tmpdir(), 'cfg-')), 'absent.json'));
    expect(config.tiers.map((t) => t.id)).toEqual(DEFAULT_TIERS.map((t) => t.id));
    expect(config.teams.map((t) => t.id)).toEqual(['research']);
    expect(config.budgets).toEqual({ warnThreshold: 0.7, blockThreshold: 1 });
    expect(config.spotPolicy).toEqual({ reclaimsBeforeOnDemand: 2, capacityWaitMinutes: 20 });
  });

  it('seeds gpu-small as 16 GB g4dn.xlarge on-demand, with two more 1-GPU types for spot, and 2 hours of runtime', () => {
    const small = parseConfig({}).tiers.find((t) => t.id === 'gpu-small');
    expect(small).toMatchObject({
      instanceTypes: ['g4dn.xlarge', 'g6.xlarge', 'g5.xlarge'],
      gpuMemoryGiB: 16,
      maxRuntime: '2h',
    });
  });

  it('accepts a gpu tier asking exactly the memory a job may have on its instance (95 % of installed)', () => {
    // g5.xlarge: 16 × 1024 × 0.95 = 15,564.8 MiB.
    expect(parseConfig({ tiers: [gpu({ memoryMiB: 15564 })] }).tiers[0]?.memoryMiB).toBe(15564);
    expect(() => parseConfig({ tiers: [gpu({ memoryMiB: 15565 })] })).toThrow(/at most 15564 MiB/);
  });

  it('parses durations into seconds', () => {
    expect([parseDuration('30s'), parseDuration('10m'), parseDuration('2h'), parseDuration('1.5d')]).toEqual([
      30, 600, 7200, 129600,
    ]);
    expect(parseDuration('2 hours')).toBeUndefined();
  });

  it('maps an assumed-role session to the team that lists its role', () => {
    const config = parseConfig({ teams: [team({ principals: ['arn:aws:iam::123456789012:role/nlp'] })] });
    expect(teamForPrincipal(config, 'arn:aws:sts::123456789012:assumed-role/nlp/alice')?.id).toBe('nlp');
    expect(teamForPrincipal(config, 'arn:aws:sts::123456789012:assumed-role/other/alice')).toBeUndefined();
  });

  it('accepts two sessions of one role in two teams once the role pins session names: no caller is both', () => {
    const config = parseConfig({
      sessionNamesPinned: true,
      teams: [
        team({ principals: ['arn:aws:sts::123456789012:assumed-role/shared/alice'] }),
        team({ id: 'vision', principals: ['arn:aws:sts::123456789012:assumed-role/shared/bob'] }),
      ],
    });
    expect(teamForPrincipal(config, 'arn:aws:sts::123456789012:assumed-role/shared/bob')?.id).toBe('vision');
  });

  it('refuses a listed session of a role whose session names the caller chooses, unless pinned or IAM Identity Center', () => {
    const shared = 'arn:aws:sts::123456789012:assumed-role/ml-shared/bob';
    const why = (principal: string) =>
      `session ${principal} is named by whoever assumes role ml-shared: anyone who may assume it could call itself so; list the role (all its sessions) or an IAM user, or, once the role's trust policy pins sts:RoleSessionName, set sessionNamesPinned: true`;
    expect(messageFor({ teams: [team({ principals: [shared] })] })).toBe(
      `Invalid Trainyard configuration in trainyard.config.json:\n  - teams[0].principals[0]: ${why(shared)} (got "${shared}")`,
    );
    const lead = 'arn:aws:sts::123456789012:assumed-role/ml-shared/platform-lead';
    expect(messageFor({ admins: [lead] })).toBe(
      `Invalid Trainyard configuration in trainyard.config.json:\n  - admins[0]: ${why(lead)} (got "${lead}")`,
    );
    // AWS names an IAM Identity Center session after the user's sign-in; a pinned trust policy does the same.
    const sso = 'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Researchers_0123abcd/alice@example.com';
    expect(teamForPrincipal(parseConfig({ teams: [team({ principals: [sso] })], admins: [sso] }), sso)?.id).toBe('nlp');
    const pinned = parseConfig({ sessionNamesPinned: true, teams: [team({ principals: [shared] })] });
    expect(teamForPrincipal(pinned, shared)?.id).toBe('nlp');
    expect(teamForPrincipal(pinned, 'arn:aws:sts::123456789012:assumed-role/ml-shared/mallory')).toBeUndefined();
  });

  it('maps the sessions of a role with a path (every IAM Identity Center role) to its team, by account and name', () => {
    const sso =
      'arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_Researchers_0123abcd';
    const config = parseConfig({ teams: [team({ principals: [sso] })], admins: [sso] });
    // STS names the session's role without its path.
    const session = 'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Researchers_0123abcd/alice@example.com';
    expect(teamForPrincipal(config, session)?.id).toBe('nlp');
    expect(isAdmin(config, session)).toBe(true);
    // Another account, another partition, another role, or a name that only ends the same: not the role.
    for (const other of [
      'arn:aws:sts::210987654321:assumed-role/AWSReservedSSO_Researchers_0123abcd/alice@example.com',
      'arn:aws-cn:sts::123456789012:assumed-role/AWSReservedSSO_Researchers_0123abcd/alice@example.com',
      'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admins_0123abcd/alice@example.com',
      'arn:aws:sts::123456789012:assumed-role/Researchers_0123abcd/alice@example.com',
      'arn:aws:iam::123456789012:user/AWSReservedSSO_Researchers_0123abcd',
    ]) {
      expect(teamForPrincipal(config, other), other).toBeUndefined();
      expect(isAdmin(config, other), other).toBe(false);
    }
  });

  it('matches an IAM user by its whole ARN, path included, and an assumed-role session listed as such exactly', () => {
    const config = parseConfig({
      sessionNamesPinned: true,
      teams: [
        team({
          principals: [
            'arn:aws:iam::123456789012:user/division/bob',
            'arn:aws:sts::123456789012:assumed-role/shared/carol',
          ],
        }),
      ],
    });
    expect(teamForPrincipal(config, 'arn:aws:iam::123456789012:user/division/bob')?.id).toBe('nlp');
    expect(teamForPrincipal(config, 'arn:aws:iam::123456789012:user/bob')).toBeUndefined();
    expect(teamForPrincipal(config, 'arn:aws:sts::123456789012:assumed-role/shared/carol')?.id).toBe('nlp');
    expect(teamForPrincipal(config, 'arn:aws:sts::123456789012:assumed-role/shared/dave')).toBeUndefined();
  });
});

describe('bad configuration is refused with the key, the value and what is allowed', () => {
  const cases: Array<[string, unknown, string]> = [
    [
      'duplicate tier ids',
      { tiers: [gpu(), gpu()] },
      'tiers[1].id: duplicate tier id "gpu-x": tier ids must be unique (got "gpu-x")',
    ],
    [
      'a team that names an unknown tier',
      { tiers: [gpu()], teams: [team({ tiers: ['gpu-huge'] })] },
      'teams[0].tiers[0]: unknown tier "gpu-huge"; defined tiers: gpu-x (got "gpu-huge")',
    ],
    [
      'a team that may use no tier',
      { tiers: [gpu()], teams: [team({ tiers: [] })] },
      'teams[0].tiers: team "nlp" may use no tier, so it could submit no job: list its tiers, or leave tiers out for all of them',
    ],
    [
      'two team ids that differ only in their dashes (Batch share identifiers are alphanumeric)',
      { tiers: [gpu()], teams: [team({ id: 'ml-research' }), team({ id: 'mlresearch' })] },
      'teams[1].id: team ids "ml-research" and "mlresearch" differ only in \'-\', which Batch\'s fair-share identifiers cannot hold (both would be "mlresearch"); rename one (got "mlresearch")',
    ],
    [
      'a team that lists a tier twice',
      { tiers: [gpu()], teams: [team({ tiers: ['gpu-x', 'gpu-x'] })] },
      'teams[0].tiers[1]: tier "gpu-x" is listed twice (got "gpu-x")',
    ],
    [
      'GPU memory on a cpu tier',
      { tiers: [{ ...gpu({ kind: 'cpu', instanceTypes: [], gpus: 0, gpuMemoryGiB: 16 }), vcpus: 2, memoryMiB: 4096 }] },
      'tiers[0].gpuMemoryGiB: cpu tier "gpu-x" has no GPU: leave gpuMemoryGiB out (got 16)',
    ],
    [
      'a /dev/shm size on a cpu tier',
      {
        tiers: [
          {
            ...gpu({ kind: 'cpu', instanceTypes: [], gpus: 0, gpuMemoryGiB: 0 }),
            vcpus: 2,
            memoryMiB: 4096,
            shmSizeMiB: 512,
          },
        ],
      },
      'tiers[0].shmSizeMiB: cpu tier "gpu-x" runs on Fargate, which sets no /dev/shm size: leave shmSizeMiB out (got 512)',
    ],
    [
      'a negative budget',
      { teams: [team({ monthlyBudgetUsd: -5 })] },
      'teams[0].monthlyBudgetUsd: Too small: expected number to be >=0 (got -5)',
    ],
    [
      'warn at or above block',
      { budgets: { warnThreshold: 0.9, blockThreshold: 0.8 } },
      'budgets.warnThreshold: warnThreshold (0.9) must be below blockThreshold (0.8) (got 0.9)',
    ],
    [
      'a multi-node tier marked spot',
      { tiers: [gpu({ nodes: 2, spotAllowed: true })] },
      'tiers[0].spotAllowed: tier "gpu-x" has 2 nodes: Batch multi-node jobs cannot run on spot, set false (got true)',
    ],
    [
      'a multi-node tier without a NAT gateway (its containers get no public IP)',
      { tiers: [gpu({ nodes: 2, spotAllowed: false })], network: { mode: 'new', natGateways: 0 } },
      'network.natGateways: tier "gpu-x" runs multi-node jobs, whose containers Batch gives no public IP (awsvpc mode), so without a NAT gateway they cannot reach ECR, S3 or CloudWatch: set natGateways to 1 or more, or remove the tier (got 0)',
    ],
    [
      'a gpu tier with a fraction of a vCPU (Batch on EC2 takes whole vCPUs)',
      { tiers: [gpu({ vcpus: 2.5 })] },
      'tiers[0].vcpus: gpu tier "gpu-x" runs on EC2, where Batch gives jobs whole vCPUs: use a whole number ≥ 1 (got 2.5)',
    ],
    [
      'more zones by count than a stack not bound to a region gets',
      { network: { mode: 'new', maxAzs: 3 } },
      'network.maxAzs: Too big: expected number to be <=2 (got 3)',
    ],
    [
      'more NAT gateways than zones',
      { network: { mode: 'new', maxAzs: 1, natGateways: 2 } },
      "network.natGateways: natGateways (2) must be at most the VPC's zones (1): a NAT gateway serves its own zone (got 2)",
    ],
    [
      'a zone named twice',
      { network: { mode: 'new', availabilityZones: ['us-east-1a', 'us-east-1a'] } },
      'network.availabilityZones: names a zone twice',
    ],
    [
      'zones of two regions',
      { network: { mode: 'new', availabilityZones: ['us-east-1a', 'us-west-2a'] } },
      'network.availabilityZones: names zones of more than one region; a VPC lies in one',
    ],
    [
      'four named zones',
      { network: { mode: 'new', availabilityZones: ['us-east-1a', 'us-east-1b', 'us-east-1c', 'us-east-1d'] } },
      "network.availabilityZones: names at most 3 zones (the VPC's /16 holds 3 compute subnets of /18)",
    ],
    [
      'a zone id in place of a zone name',
      { network: { mode: 'new', availabilityZones: ['use1-az1'] } },
      'network.availabilityZones[0]: must be an Availability Zone name like us-east-1a (got "use1-az1")',
    ],
    [
      'a malformed principal ARN',
      { teams: [team({ principals: ['arn:aws:iam::12345:role/x'] })] },
      'teams[0].principals[0]: must be an IAM user or role ARN ending in its name, with no wildcard (arn:aws:iam::123456789012:role/Name) or an assumed-role ARN (arn:aws:sts::123456789012:assumed-role/Role/session) (got "arn:aws:iam::12345:role/x")',
    ],
    [
      'an unknown instance family for a GPU tier',
      { tiers: [gpu({ instanceTypes: ['x2.large'] })] },
      'tiers[0].instanceTypes[0]: unknown GPU instance family "x2" (x2.large); allowed: g4dn, g5, g6, g6e, gr6, p4d, p4de, p5, p5e (got "x2.large")',
    ],
    [
      'p3, which the AL2023 NVIDIA AMI does not support',
      { tiers: [gpu({ instanceTypes: ['p3.2xlarge'], gpuMemoryGiB: 16 })] },
      'tiers[0].instanceTypes[0]: unknown GPU instance family "p3" (p3.2xlarge); allowed: g4dn, g5, g6, g6e, gr6, p4d, p4de, p5, p5e (got "p3.2xlarge")',
    ],
    [
      'an instance type listed twice',
      { tiers: [gpu({ instanceTypes: ['g5.xlarge', 'g6.xlarge', 'g5.xlarge'] })] },
      'tiers[0].instanceTypes[2]: g5.xlarge is listed twice in tier "gpu-x"; list each instance type once (got "g5.xlarge")',
    ],
    [
      'zero max runtime',
      { tiers: [gpu({ maxRuntime: '0s' })] },
      'tiers[0].maxRuntime: must be between 1s and 14d (got "0s")',
    ],
    [
      'a max runtime that is not a duration',
      { tiers: [gpu({ maxRuntime: '2 hours' })] },
      'tiers[0].maxRuntime: must be a duration like 30s, 10m, 2h or 1d (got "2 hours")',
    ],
    [
      'more GPU memory than the instance has',
      { tiers: [gpu({ instanceTypes: ['g4dn.xlarge'], gpuMemoryGiB: 24 })] },
      'tiers[0].instanceTypes[0]: g4dn.xlarge has 16 GiB per GPU; tier states 24 (got "g4dn.xlarge")',
    ],
    [
      // g5.xlarge: 16 GiB = 16,384 MiB installed; a job may ask 95 % of it, 15,564.8 → 15,564 MiB.
      'a job memory equal to the instance memory, which ECS never registers in full',
      { tiers: [gpu({ memoryMiB: 16384 })] },
      'tiers[0].instanceTypes[0]: g5.xlarge has 4 vCPU / 16384 MiB, of which a job may ask at most 15564 MiB (the kernel and the ECS agent keep the rest, and a job asking more is never placed); tier asks 4 vCPU / 16384 MiB (got "g5.xlarge")',
    ],
    [
      'a CPU tier no Fargate size can hold',
      {
        tiers: [{ ...gpu({ kind: 'cpu', instanceTypes: [], gpus: 0, gpuMemoryGiB: 0 }), vcpus: 16, memoryMiB: 130000 }],
      },
      'tiers[0].memoryMiB: no Fargate size offers 16 vCPU with 130000 MiB',
    ],
    [
      'a capacity wait Batch cannot express',
      { spotPolicy: { capacityWaitMinutes: 5 } },
      'spotPolicy.capacityWaitMinutes: must be at least 10: Batch job-state time-limit actions start at 600 s (got 5)',
    ],
    [
      'a log retention CloudWatch does not offer',
      { logRetentionDays: 10 },
      "logRetentionDays: must be one of CloudWatch's retention periods: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653 (got 10)",
    ],
    [
      'warm capacity on a CPU tier',
      { warmCapacity: { 'cpu-small': 2 } },
      'warmCapacity.cpu-small: warm capacity applies to gpu tiers only; "cpu-small" is a cpu tier (got 2)',
    ],
    ['an unknown key', { tierz: [] }, '(root): Unrecognized key: "tierz"'],
    [
      // Its reports' event ids and the all-teams rollup's would be one and the same.
      'a team named like the all-teams report',
      { teams: [team({ id: 'all-teams' })] },
      'teams[0].id: team id "all-teams" is reserved: it names the showback report of all teams together (got "all-teams")',
    ],
    [
      'one principal in two teams',
      {
        teams: [
          team({ principals: ['arn:aws:iam::123456789012:role/shared'] }),
          team({ id: 'vision', principals: ['arn:aws:iam::123456789012:role/shared'] }),
        ],
      },
      'teams[1].principals[0]: principal arn:aws:iam::123456789012:role/shared already belongs to team "nlp"; a principal maps to one team (got "arn:aws:iam::123456789012:role/shared")',
    ],
    [
      'one role in two teams under two paths',
      {
        teams: [
          team({ principals: ['arn:aws:iam::123456789012:role/shared'] }),
          team({ id: 'vision', principals: ['arn:aws:iam::123456789012:role/research/shared'] }),
        ],
      },
      'teams[1].principals[0]: principal arn:aws:iam::123456789012:role/research/shared already belongs to team "nlp" (as arn:aws:iam::123456789012:role/shared, which names the same callers); a principal maps to one team',
    ],
    [
      "a role's session in another team than the role",
      {
        teams: [
          team({ principals: ['arn:aws:sts::123456789012:assumed-role/shared/alice'] }),
          team({ id: 'vision', principals: ['arn:aws:iam::123456789012:role/shared'] }),
        ],
      },
      'teams[1].principals[0]: principal arn:aws:iam::123456789012:role/shared already belongs to team "nlp" (as arn:aws:sts::123456789012:assumed-role/shared/alice, which names the same callers)',
    ],
    [
      'a role ARN with a path and no name, which no caller can match',
      { teams: [team({ principals: ['arn:aws:iam::123456789012:role/nlp/'] })] },
      'teams[0].principals[0]: must be an IAM user or role ARN ending in its name, with no wildcard',
    ],
    [
      'an instance size of a known family that the catalog does not know (it may not exist, or hold fewer GPUs)',
      { tiers: [gpu({ instanceTypes: ['g5.3xlarge'] })] },
      "tiers[0].instanceTypes[0]: g5.3xlarge is not an instance size Trainyard knows (lib/instance-catalog.ts), so the tier's GPUs, memory and vCPUs cannot be checked against it; known g5 sizes: g5.xlarge, g5.2xlarge, g5.4xlarge, g5.8xlarge, g5.12xlarge, g5.16xlarge, g5.24xlarge, g5.48xlarge",
    ],
    [
      'a known size with fewer GPUs than the tier asks',
      { tiers: [gpu({ instanceTypes: ['g6.4xlarge'], gpus: 4 })] },
      'tiers[0].instanceTypes[0]: g6.4xlarge has 1 GPU(s); tier asks 4',
    ],
    [
      'a maximum runtime that is not a whole number of seconds (Batch timeouts are whole seconds)',
      { tiers: [gpu({ maxRuntime: '1.001h' })] },
      'tiers[0].maxRuntime: must be a whole number of seconds (1.5h, not 1.001h) (got "1.001h")',
    ],
    [
      'two team-tier pairs that join to one Batch job definition name',
      {
        teams: [team(), team({ id: 'nlp-cpu' })],
        tiers: [gpu({ id: 'cpu-small' }), gpu({ id: 'small' })],
      },
      'teams[1].id: team "nlp-cpu" with tier "small" would name its Batch job definition <prefix>-nlp-cpu-small, as team "nlp" with tier "cpu-small" does; rename a team or a tier so that no two team-tier pairs join to one name',
    ],
    [
      'an alert address listed twice',
      { alerts: { emails: ['leads@example.com', 'leads@example.com'] } },
      'alerts.emails[1]: leads@example.com is listed twice in alerts.emails; list each once',
    ],
    [
      'a subnet listed twice',
      {
        network: { mode: 'existing', vpcId: 'vpc-01234567', subnetIds: ['subnet-01234567', 'subnet-01234567'] },
      },
      'network.subnetIds[1]: subnet-01234567 is listed twice in network.subnetIds; list each once',
    ],
  ];

  it('takes a fractional duration to the second, not to the binary product (1.1h is 3960 s)', () => {
    expect(parseConfig({ tiers: [gpu({ maxRuntime: '1.1h' })] }).tiers[0]?.maxRuntime).toBe('1.1h');
    expect(parseDuration('1.1h')).toBe(3960);
  });

  it.each(cases)('refuses %s', (_name, input, expected) => {
    expect(messageFor(input)).toContain(expected);
  });

  it('names the file in the message', () => {
    expect(messageFor({ logRetentionDays: 10 })).toMatch(
      /^Invalid Trainyard configuration in trainyard\.config\.json:/,
    );
  });

  it('refuses a file that is not JSON', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cfg-')), 'trainyard.config.json');
    writeFileSync(path, '{ tiers: ');
    expect(() => loadConfig(path)).toThrow(`Configuration file ${path} is not valid JSON`);
  });

  it('refuses an explicitly named file that does not exist', () => {
    expect(() => loadConfig('/nonexistent/trainyard.config.json', true)).toThrow(
      'Configuration file /nonexistent/trainyard.config.json does not exist',
    );
  });

  it('fails `cdk synth` (bin/app.ts) with the message and a non-zero exit', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cfg-')), 'bad.json');
    writeFileSync(path, JSON.stringify({ budgets: { warnThreshold: 0.9, blockThreshold: 0.8 } }));
    let stderr = '';
    let status: number | null = 0;
    try {
      execFileSync(process.execPath, ['--import', 'tsx', 'bin/app.ts'], {
        env: {
          ...process.env,
          CDK_CONTEXT_JSON: JSON.stringify({ config: path }),
          CDK_OUTDIR: mkdtempSync(join(tmpdir(), 'out-')),
        },
        stdio: 'pipe',
      });
    } catch (error) {
      status = (error as { status: number }).status;
      stderr = String((error as { stderr: Buffer }).stderr);
    }
    expect(status).toBe(1);
    expect(stderr).toContain('budgets.warnThreshold: warnThreshold (0.9) must be below blockThreshold (0.8) (got 0.9)');
  });
});
