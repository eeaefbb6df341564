/**
 * Trainyard configuration: the zod schema for `trainyard.config.json`, its documented defaults, and the loader.
 *
 * Pure module (zod only; no CDK, no AWS SDK): the CDK app validates it at synth, and the Lambdas, local mode and
 * the CLI read the same resolved object, so a tier or a team means the same thing everywhere.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as z from 'zod/mini';
import '../lambdas/domain/zod-issues'; // zod's English issue messages
import { shareIdentifierOf } from '../lambdas/domain/batch-names';
import { ALL_TEAMS } from '../lambdas/domain/workspace-layout';
import {
  fargateSizeFor,
  GPU_INSTANCE_FAMILIES,
  GPU_INSTANCES,
  instanceFamily,
  jobMemoryLimitMiB,
} from './instance-catalog';

/** Raised when a configuration file is missing, unreadable or invalid; the message names key, value and rule. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

// What each key means is in lib/config-descriptions.ts (README's table), not here: the Lambdas parse the
// configuration with this schema, and the text would only weigh down their bundles.

/** A key with a default: `schema`, and `fallback` when the key is absent. */
function setting<T extends z.ZodMiniType>(schema: T, fallback: Exclude<z.output<T>, undefined>) {
  return z._default(schema, fallback);
}

/** A section of the file: an object whose keys all have defaults, so an absent section is `{}` with them filled in. */
function section<S extends z.core.$ZodLooseShape>(shape: S) {
  const schema = z.strictObject(shape);
  return z.prefault(schema, {} as z.input<typeof schema>);
}

/** A whole number from `min` to `max`. */
const intRange = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));

/** Team and tier ids. */
export const CONFIG_ID_PATTERN = /^[a-z][a-z0-9-]{0,30}[a-z0-9]$/;
/** CONFIG_ID_PATTERN in words, for messages. */
export const CONFIG_ID_RULE = "2-32 characters of a-z, 0-9 and '-', starting with a letter";
const idSchema = (what: string) => z.string().check(z.regex(CONFIG_ID_PATTERN, `${what} must be ${CONFIG_ID_RULE}`));

/**
 * IAM users and roles (an optional path, then the name: `role/Name`, `role/team/Name`), and STS assumed-role sessions,
 * in any partition. A name is required: `role/team/` names no principal (there are no wildcards), so no caller could
 * ever be a member.
 */
export const PRINCIPAL_ARN_PATTERN =
  /^arn:aws(?:-cn|-us-gov)?:(?:iam::\d{12}:(?:user|role)\/(?:[\w+=,.@-]+\/)*[\w+=,.@-]{1,64}|sts::\d{12}:assumed-role\/[\w+=,.@-]{1,64}\/[\w+=,.@-]{1,64})$/;
const principalSchema = z
  .string()
  .check(
    z.regex(
      PRINCIPAL_ARN_PATTERN,
      'must be an IAM user or role ARN ending in its name, with no wildcard (arn:aws:iam::123456789012:role/Name) or an assumed-role ARN (arn:aws:sts::123456789012:assumed-role/Role/session)',
    ),
  );

const DURATION_PATTERN = /^(\d+(?:\.\d+)?)(s|m|h|d)$/;
const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
/** The longest runtime any setting or requirement may name: 14 days. */
export const MAX_RUNTIME_SECONDS = 14 * 86400;

/** Parses `30s`, `10m`, `2h`, `1.5d` into seconds; undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION_PATTERN.exec(text.trim());
  if (!match?.[1] || !match[2]) return undefined;
  const unit = DURATION_UNITS[match[2]];
  // To the millisecond: 1.1h is 3960 s, not the 3960.0000000000005 the binary product gives.
  return unit === undefined ? undefined : Math.round(Number(match[1]) * unit * 1000) / 1000;
}

const durationSchema = z.string().check(
  z.refine((v) => parseDuration(v) !== undefined, 'must be a duration like 30s, 10m, 2h or 1d'),
  z.refine((v) => {
    const seconds = parseDuration(v) ?? 0;
    return seconds >= 1 && seconds <= MAX_RUNTIME_SECONDS;
  }, 'must be between 1s and 14d'),
  // Batch's timeouts and EventBridge's schedules take whole seconds: 1.001h (3603.6 s) would fail the synth.
  z.refine((v) => Number.isInteger(parseDuration(v) ?? 0), 'must be a whole number of seconds (1.5h, not 1.001h)'),
);

/** CloudWatch Logs accepts only these retention periods. */
export const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

const tierSchema = z.strictObject({
  id: idSchema('tier id'),
  kind: z.enum(['cpu', 'gpu']),
  instanceTypes: setting(
    z.array(z.string().check(z.regex(/^[a-z][a-z0-9-]*\.[a-z0-9]+$/, 'must look like g4dn.xlarge'))),
    [],
  ),
  gpus: setting(intRange(0, 8), 0),
  gpuMemoryGiB: setting(z.number().check(z.gte(0)), 0),
  vcpus: z.number().check(z.positive(), z.lte(192)),
  memoryMiB: z.int().check(z.gte(128)),
  maxRuntime: durationSchema,
  onDemandUsdPerHour: z.number().check(z.positive()),
  spotUsdPerHour: z.optional(z.number().check(z.positive())),
  spotAllowed: setting(z.boolean(), true),
  nodes: setting(intRange(1, 64), 1),
  maxInstances: setting(intRange(1, 1000), 8),
  peakTflops: z.number().check(z.positive()),
  shmSizeMiB: z.optional(z.int().check(z.gte(64))),
});

const teamSchema = z.strictObject({
  id: idSchema('team id').check(
    z.refine(
      (id) => id !== ALL_TEAMS,
      `team id "${ALL_TEAMS}" is reserved: it names the showback report of all teams together`,
    ),
  ),
  principals: setting(z.array(principalSchema), []),
  monthlyBudgetUsd: z.number().check(z.gte(0), z.lte(10_000_000)),
  fairShareWeight: setting(z.number().check(z.gte(0.0001), z.lte(999.9999)), 1),
  tiers: z.optional(z.array(z.string())),
});

/** An Availability Zone name: its region (`us-east-1`, `ap-southeast-2`, `us-gov-west-1`) and a letter. */
const AVAILABILITY_ZONE_PATTERN = /^[a-z]{2}(?:-[a-z]+)+-\d[a-z]$/;
/** Zones a new VPC may name: its /16 holds three /18 compute subnets beside the /20 public ones. */
const MAX_NAMED_AZS = 3;
/** The region of an Availability Zone name (`us-east-1a` → `us-east-1`). */
const regionOfZone = (zone: string): string => zone.slice(0, -1);

const networkSchema = z.prefault(
  z.discriminatedUnion('mode', [
    z.strictObject({
      mode: z.literal('new'),
      maxAzs: setting(intRange(1, 2), 2),
      availabilityZones: z.optional(
        z
          .array(
            z.string().check(z.regex(AVAILABILITY_ZONE_PATTERN, 'must be an Availability Zone name like us-east-1a')),
          )
          .check(
            z.minLength(1, 'must name at least one zone'),
            z.maxLength(
              MAX_NAMED_AZS,
              `names at most ${MAX_NAMED_AZS} zones (the VPC's /16 holds 3 compute subnets of /18)`,
            ),
            z.refine((zones) => new Set(zones).size === zones.length, 'names a zone twice'),
            z.refine(
              (zones) => new Set(zones.map(regionOfZone)).size === 1,
              'names zones of more than one region; a VPC lies in one',
            ),
          ),
      ),
      natGateways: setting(intRange(0, MAX_NAMED_AZS), 1),
    }),
    z.strictObject({
      mode: z.literal('existing'),
      vpcId: z.string().check(z.regex(/^vpc-[0-9a-f]{8,17}$/, 'must be a VPC id like vpc-0123456789abcdef0')),
      subnetIds: z
        .array(
          z.string().check(z.regex(/^subnet-[0-9a-f]{8,17}$/, 'must be a subnet id like subnet-0123456789abcdef0')),
        )
        .check(z.minLength(1, 'must list at least one subnet')),
    }),
  ]),
  { mode: 'new' },
);

/** Seed tiers: what `npx cdk synth` deploys when the config file does not list tiers. */
export const DEFAULT_TIERS = [
  {
    id: 'cpu-small',
    kind: 'cpu',
    vcpus: 0.5,
    memoryMiB: 512,
    maxRuntime: '30s',
    onDemandUsdPerHour: 0.025,
    spotUsdPerHour: 0.008,
    peakTflops: 0.05,
  },
  {
    id: 'cpu-large',
    kind: 'cpu',
    vcpus: 2,
    memoryMiB: 4096,
    maxRuntime: '10m',
    onDemandUsdPerHour: 0.099,
    spotUsdPerHour: 0.03,
    peakTflops: 0.2,
  },
  {
    id: 'gpu-small',
    kind: 'gpu',
    instanceTypes: ['g4dn.xlarge', 'g6.xlarge', 'g5.xlarge'],
    gpus: 1,
    gpuMemoryGiB: 16,
    vcpus: 4,
    memoryMiB: 15000,
    maxRuntime: '2h',
    onDemandUsdPerHour: 0.526,
    spotUsdPerHour: 0.19,
    peakTflops: 65,
  },
  {
    id: 'gpu-medium',
    kind: 'gpu',
    instanceTypes: ['g4dn.2xlarge', 'g6.2xlarge', 'g5.2xlarge'],
    gpus: 1,
    gpuMemoryGiB: 16,
    vcpus: 8,
    memoryMiB: 30000,
    maxRuntime: '8h',
    onDemandUsdPerHour: 0.752,
    spotUsdPerHour: 0.27,
    peakTflops: 65,
  },
  {
    id: 'gpu-large',
    kind: 'gpu',
    instanceTypes: ['g5.2xlarge', 'g6.2xlarge', 'g5.4xlarge'],
    gpus: 1,
    gpuMemoryGiB: 24,
    vcpus: 8,
    memoryMiB: 30000,
    maxRuntime: '24h',
    onDemandUsdPerHour: 1.212,
    spotUsdPerHour: 0.5,
    peakTflops: 121,
  },
  {
    id: 'gpu-multinode',
    kind: 'gpu',
    instanceTypes: ['g5.12xlarge'],
    gpus: 4,
    gpuMemoryGiB: 24,
    vcpus: 46,
    memoryMiB: 180000,
    maxRuntime: '24h',
    onDemandUsdPerHour: 5.672,
    spotAllowed: false,
    nodes: 2,
    peakTflops: 500,
  },
] as const;

/** The configuration schema; every key documents itself, and README's config table is generated from it. */
export const configSchema = z
  .strictObject({
    tiers: z.prefault(
      z.array(tierSchema).check(z.minLength(1, 'must define at least one tier')),
      DEFAULT_TIERS.map((t) => ({ ...t, instanceTypes: 'instanceTypes' in t ? [...t.instanceTypes] : [] })),
    ),
    teams: z.prefault(z.array(teamSchema).check(z.minLength(1, 'must define at least one team')), [
      { id: 'research', monthlyBudgetUsd: 500 },
    ]),
    admins: setting(z.array(principalSchema), []),
    sessionNamesPinned: setting(z.boolean(), false),
    budgets: section({
      warnThreshold: setting(z.number().check(z.gt(0), z.lt(1)), 0.7),
      blockThreshold: setting(z.number().check(z.gt(0), z.lte(2)), 1),
    }),
    spotPolicy: section({
      reclaimsBeforeOnDemand: setting(intRange(1, 20), 2),
      capacityWaitMinutes: setting(
        z
          .int()
          .check(
            z.gte(10, 'must be at least 10: Batch job-state time-limit actions start at 600 s'),
            z.lte(1440, 'must be at most 1440: Batch job-state time-limit actions end at 86400 s'),
          ),
        20,
      ),
    }),
    network: networkSchema,
    warmCapacity: setting(z.record(z.string(), intRange(0, 4096)), {}),
    logRetentionDays: setting(
      z.number().check(
        z.refine((d) => (LOG_RETENTION_DAYS as readonly number[]).includes(d), {
          message: `must be one of CloudWatch's retention periods: ${LOG_RETENTION_DAYS.join(', ')}`,
        }),
      ),
      30,
    ),
    alerts: section({
      emails: setting(z.array(z.email('must be an e-mail address')), []),
      slackWebhookSecretName: z.optional(
        z.string().check(z.regex(/^[\w/+=.@-]{1,512}$/, 'must be a Secrets Manager secret name')),
      ),
    }),
    reports: section({
      daily: setting(z.boolean(), false),
      weekly: setting(z.boolean(), true),
    }),
    observability: section({
      dashboard: setting(z.boolean(), true),
      platformMetrics: setting(z.boolean(), true),
    }),
    limits: section({
      maxBundleMiB: setting(intRange(1, 1024), 500),
      maxInlineBundleKiB: setting(intRange(1, 4096), 4096),
      maxEnvVars: setting(intRange(0, 200), 50),
    }),
  })
  .check(z.superRefine(checkCrossReferences));
/** The resolved configuration, defaults applied. */
export type TrainyardConfig = z.output<typeof configSchema>;
/** One resolved tier. */
export type TierConfig = TrainyardConfig['tiers'][number];
/** One resolved team. */
export type TeamConfig = TrainyardConfig['teams'][number];

function checkCrossReferences(config: z.output<z.ZodMiniObject>, ctx: z.core.$RefinementCtx): void {
  const cfg = config as unknown as TrainyardConfig;
  const tierIds = new Set<string>();
  cfg.tiers.forEach((tier, i) => {
    const at = (key: string) => ['tiers', i, key];
    if (tierIds.has(tier.id)) {
      ctx.addIssue({
        code: 'custom',
        path: at('id'),
        message: `duplicate tier id "${tier.id}": tier ids must be unique`,
      });
    }
    tierIds.add(tier.id);
    checkTier(tier, at, ctx);
  });

  const teamIds = new Set<string>();
  const claimed: Array<{ principal: string; team: string }> = [];
  // A session's name is chosen by whoever assumes the role, unless AWS sets it (IAM Identity Center) or the role's
  // trust policy pins it: a listed session would otherwise admit anyone who can assume the role and names it so.
  const sessionIssue = (principal: string, path: (string | number)[]) => {
    const role = /^arn:[^:]+:sts::\d{12}:assumed-role\/([^/]+)\//.exec(principal)?.[1];
    if (role === undefined || cfg.sessionNamesPinned || role.startsWith('AWSReservedSSO_')) return;
    ctx.addIssue({
      code: 'custom',
      path,
      message: `session ${principal} is named by whoever assumes role ${role}: anyone who may assume it could call itself so; list the role (all its sessions) or an IAM user, or, once the role's trust policy pins sts:RoleSessionName, set sessionNamesPinned: true`,
    });
  };
  const shares = new Map<string, string>();
  cfg.teams.forEach((team, i) => {
    if (teamIds.has(team.id)) {
      ctx.addIssue({ code: 'custom', path: ['teams', i, 'id'], message: `duplicate team id "${team.id}"` });
    }
    teamIds.add(team.id);
    const share = shareIdentifierOf(team.id);
    const sharing = shares.get(share);
    if (sharing !== undefined && sharing !== team.id) {
      ctx.addIssue({
        code: 'custom',
        path: ['teams', i, 'id'],
        message: `team ids "${sharing}" and "${team.id}" differ only in '-', which Batch's fair-share identifiers cannot hold (both would be "${share}"); rename one`,
      });
    }
    shares.set(share, team.id);
    if (team.tiers?.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['teams', i, 'tiers'],
        message: `team "${team.id}" may use no tier, so it could submit no job: list its tiers, or leave tiers out for all of them`,
      });
    }
    team.tiers?.forEach((tierId, j) => {
      if (team.tiers?.indexOf(tierId) !== j) {
        ctx.addIssue({ code: 'custom', path: ['teams', i, 'tiers', j], message: `tier "${tierId}" is listed twice` });
      }
      if (!tierIds.has(tierId)) {
        ctx.addIssue({
          code: 'custom',
          path: ['teams', i, 'tiers', j],
          message: `unknown tier "${tierId}"; defined tiers: ${[...tierIds].join(', ')}`,
        });
      }
    });
    team.principals.forEach((principal, j) => {
      // Some caller would match both (the same role under another path, or a session of the role): the first team
      // in the file would win, silently.
      const other = claimed.find((c) => c.team !== team.id && principalsOverlap(c.principal, principal));
      if (other !== undefined) {
        const same = other.principal === principal ? '' : ` (as ${other.principal}, which names the same callers)`;
        ctx.addIssue({
          code: 'custom',
          path: ['teams', i, 'principals', j],
          message: `principal ${principal} already belongs to team "${other.team}"${same}; a principal maps to one team`,
        });
      }
      claimed.push({ principal, team: team.id });
      sessionIssue(principal, ['teams', i, 'principals', j]);
    });
  });
  cfg.admins.forEach((principal, j) => {
    sessionIssue(principal, ['admins', j]);
  });

  // Each team has a Batch job definition per tier, named `<prefix>-<team>-<tier>`: team "nlp" with tier "cpu-small"
  // and team "nlp-cpu" with tier "small" would share one, and a job of one team run with the other's job role.
  const definitions = new Map<string, string>();
  cfg.teams.forEach((team, i) => {
    for (const tier of cfg.tiers) {
      const name = `${team.id}-${tier.id}`;
      const pair = `team "${team.id}" with tier "${tier.id}"`;
      const other = definitions.get(name);
      if (other === undefined) definitions.set(name, pair);
      else if (other !== pair) {
        ctx.addIssue({
          code: 'custom',
          path: ['teams', i, 'id'],
          message: `${pair} would name its Batch job definition <prefix>-${name}, as ${other} does; rename a team or a tier so that no two team-tier pairs join to one name`,
        });
      }
    }
  });

  const listedOnce = (values: readonly string[], path: (string | number)[], what: string) =>
    values.forEach((value, j) => {
      if (values.indexOf(value) !== j) {
        ctx.addIssue({
          code: 'custom',
          path: [...path, j],
          message: `${value} is listed twice in ${what}; list each once`,
        });
      }
    });
  listedOnce(cfg.alerts.emails, ['alerts', 'emails'], 'alerts.emails');
  if (cfg.network.mode === 'existing') listedOnce(cfg.network.subnetIds, ['network', 'subnetIds'], 'network.subnetIds');

  if (cfg.budgets.warnThreshold >= cfg.budgets.blockThreshold) {
    ctx.addIssue({
      code: 'custom',
      path: ['budgets', 'warnThreshold'],
      message: `warnThreshold (${cfg.budgets.warnThreshold}) must be below blockThreshold (${cfg.budgets.blockThreshold})`,
    });
  }

  if (cfg.network.mode === 'new') {
    const zones = cfg.network.availabilityZones?.length ?? cfg.network.maxAzs;
    if (cfg.network.natGateways > zones) {
      ctx.addIssue({
        code: 'custom',
        path: ['network', 'natGateways'],
        message: `natGateways (${cfg.network.natGateways}) must be at most the VPC's zones (${zones}): a NAT gateway serves its own zone`,
      });
    }
  }

  const multiNode = cfg.tiers.find((t) => t.nodes > 1);
  if (multiNode && cfg.network.mode === 'new' && cfg.network.natGateways === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['network', 'natGateways'],
      message: `tier "${multiNode.id}" runs multi-node jobs, whose containers Batch gives no public IP (awsvpc mode), so without a NAT gateway they cannot reach ECR, S3 or CloudWatch: set natGateways to 1 or more, or remove the tier`,
    });
  }

  for (const tierId of Object.keys(cfg.warmCapacity)) {
    const tier = cfg.tiers.find((t) => t.id === tierId);
    if (tier?.kind !== 'gpu') {
      ctx.addIssue({
        code: 'custom',
        path: ['warmCapacity', tierId],
        message: `warm capacity applies to gpu tiers only; "${tierId}" is ${tier ? 'a cpu tier' : 'not a defined tier'}`,
      });
    }
  }
}

function checkTier(tier: TierConfig, at: (key: string) => (string | number)[], ctx: z.core.$RefinementCtx): void {
  const issue = (key: string, message: string) => ctx.addIssue({ code: 'custom', path: at(key), message });
  if (tier.nodes > 1 && tier.spotAllowed) {
    issue(
      'spotAllowed',
      `tier "${tier.id}" has ${tier.nodes} nodes: Batch multi-node jobs cannot run on spot, set false`,
    );
  }
  if (tier.kind === 'cpu') {
    if (tier.instanceTypes.length > 0 || tier.gpus > 0) {
      issue('instanceTypes', `cpu tier "${tier.id}" runs on Fargate: instanceTypes must be empty and gpus 0`);
    }
    if (tier.gpuMemoryGiB > 0) issue('gpuMemoryGiB', `cpu tier "${tier.id}" has no GPU: leave gpuMemoryGiB out`);
    if (tier.shmSizeMiB !== undefined) {
      issue('shmSizeMiB', `cpu tier "${tier.id}" runs on Fargate, which sets no /dev/shm size: leave shmSizeMiB out`);
    }
    if (tier.nodes > 1) issue('nodes', `cpu tier "${tier.id}" runs on Fargate, which has no multi-node jobs: use 1`);
    if (!fargateSizeFor(tier.vcpus, tier.memoryMiB)) {
      issue(
        'memoryMiB',
        `no Fargate size offers ${tier.vcpus} vCPU with ${tier.memoryMiB} MiB (vCPU 0.25-16; memory up to 2 GiB per 0.25 vCPU … 120 GiB at 16 vCPU)`,
      );
    }
    return;
  }
  if (tier.instanceTypes.length === 0) {
    issue('instanceTypes', `gpu tier "${tier.id}" must list at least one instance type, e.g. ["g4dn.xlarge"]`);
  }
  if (tier.gpus < 1) issue('gpus', `gpu tier "${tier.id}" must have at least 1 GPU, got ${tier.gpus}`);
  if (!Number.isInteger(tier.vcpus)) {
    // Batch takes whole vCPUs on EC2 ("you must specify at least one vCPU"); fractions are Fargate sizes.
    issue('vcpus', `gpu tier "${tier.id}" runs on EC2, where Batch gives jobs whole vCPUs: use a whole number ≥ 1`);
  }
  if (tier.gpuMemoryGiB <= 0) issue('gpuMemoryGiB', `gpu tier "${tier.id}" must state its GPU memory, got 0`);
  tier.instanceTypes.forEach((type, j) => {
    if (tier.instanceTypes.indexOf(type) !== j) {
      ctx.addIssue({
        code: 'custom',
        path: [...at('instanceTypes'), j],
        message: `${type} is listed twice in tier "${tier.id}"; list each instance type once`,
      });
      return;
    }
    const family = instanceFamily(type);
    if (!(GPU_INSTANCE_FAMILIES as readonly string[]).includes(family)) {
      ctx.addIssue({
        code: 'custom',
        path: [...at('instanceTypes'), j],
        message: `unknown GPU instance family "${family}" (${type}); allowed: ${GPU_INSTANCE_FAMILIES.join(', ')}`,
      });
      return;
    }
    const facts = GPU_INSTANCES[type];
    const where = [...at('instanceTypes'), j];
    if (!facts) {
      // Unchecked, a size that does not exist fails the deploy, and one with fewer GPUs or less memory than the tier
      // states never places a job: each is known, or refused.
      const sizes = Object.keys(GPU_INSTANCES).filter((known) => instanceFamily(known) === family);
      ctx.addIssue({
        code: 'custom',
        path: where,
        message: `${type} is not an instance size Trainyard knows (lib/instance-catalog.ts), so the tier's GPUs, memory and vCPUs cannot be checked against it; known ${family} sizes: ${sizes.join(', ') || 'none'}`,
      });
      return;
    }
    if (tier.gpus > facts.gpus) {
      ctx.addIssue({
        code: 'custom',
        path: where,
        message: `${type} has ${facts.gpus} GPU(s); tier asks ${tier.gpus}`,
      });
    }
    if (tier.gpuMemoryGiB > facts.gpuMemoryGiB) {
      ctx.addIssue({
        code: 'custom',
        path: where,
        message: `${type} has ${facts.gpuMemoryGiB} GiB per GPU; tier states ${tier.gpuMemoryGiB}`,
      });
    }
    const memoryLimit = jobMemoryLimitMiB(facts.memoryGiB);
    if (tier.vcpus > facts.vcpus || tier.memoryMiB > memoryLimit) {
      ctx.addIssue({
        code: 'custom',
        path: where,
        message: `${type} has ${facts.vcpus} vCPU / ${facts.memoryGiB * 1024} MiB, of which a job may ask at most ${memoryLimit} MiB (the kernel and the ECS agent keep the rest, and a job asking more is never placed); tier asks ${tier.vcpus} vCPU / ${tier.memoryMiB} MiB`,
      });
    }
  });
}

/** Formats zod issues as `key: rule (got value)` lines. */
export function formatIssues(source: string, issues: readonly z.core.$ZodIssue[], input: unknown): string {
  const lines = issues.map((issue) => {
    const path = formatPath(issue.path);
    const got = valueAt(input, issue.path);
    const gotText = got === undefined ? '' : ` (got ${JSON.stringify(got)})`;
    return `  - ${path || '(root)'}: ${issue.message}${gotText}`;
  });
  return `Invalid Trainyard configuration in ${source}:\n${lines.join('\n')}`;
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, key) => {
    if (typeof key === 'number') return `${out}[${key}]`;
    return out ? `${out}.${String(key)}` : String(key);
  }, '');
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value: unknown = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return typeof value === 'object' && value !== null ? undefined : value;
}

/** Validates a parsed configuration object; throws ConfigError naming every offending key. */
export function parseConfig(input: unknown, source = 'configuration'): TrainyardConfig {
  const result = configSchema.safeParse(input ?? {});
  if (!result.success) throw new ConfigError(formatIssues(source, result.error.issues, input));
  return result.data;
}

/** Default config file name, looked up in the current directory. */
export const DEFAULT_CONFIG_PATH = 'trainyard.config.json';

/**
 * Loads the configuration file at `path`. A missing file at the default path means "all defaults";
 * a missing file at an explicitly given path is an error.
 */
export function loadConfig(path: string = DEFAULT_CONFIG_PATH, explicit = false): TrainyardConfig {
  if (!existsSync(path)) {
    if (explicit) throw new ConfigError(`Configuration file ${path} does not exist`);
    return parseConfig({}, 'defaults');
  }
  let input: unknown;
  try {
    input = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`Configuration file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  return parseConfig(input, path);
}

/** Seconds a tier's jobs may run. */
export function maxRuntimeSeconds(tier: TierConfig): number {
  const seconds = parseDuration(tier.maxRuntime);
  if (seconds === undefined) throw new ConfigError(`tier ${tier.id} has an invalid maxRuntime ${tier.maxRuntime}`);
  return seconds;
}

/** The tier with this id, or undefined. */
export function findTier(config: TrainyardConfig, tierId: string): TierConfig | undefined {
  return config.tiers.find((t) => t.id === tierId);
}

/**
 * Whether a configured principal names the caller: the same ARN, or the role of the caller's assumed-role session.
 * A session ARN names its role without the role's path (`assumed-role/Name/session`) while the role's ARN carries it
 * (`role/aws-reserved/sso.amazonaws.com/…/Name`, as for every IAM Identity Center role), so a role matches its sessions
 * by partition, account and name; role names are unique in an account whatever their path.
 */
export function principalMatches(configured: string, callerArn: string): boolean {
  if (configured === callerArn) return true;
  const session = roleOfAssumedRole(callerArn);
  return session !== undefined && roleOf(configured) === session;
}

/** Whether some caller matches both configured principals ({@link principalMatches}). */
function principalsOverlap(a: string, b: string): boolean {
  const role = roleOf(a);
  // A principal names itself, and a role its sessions; two ARNs of one role (paths apart) name the same sessions.
  return principalMatches(a, b) || principalMatches(b, a) || (role !== undefined && role === roleOf(b));
}

/** `arn:aws:iam::1:role/path/Role` → `aws:1:Role` (partition, account, role name, whatever the path). */
function roleOf(arn: string): string | undefined {
  const match = /^arn:(aws[a-z-]*):iam::(\d{12}):role\/(?:[^/]+\/)*([^/]+)$/.exec(arn);
  return match ? `${match[1]}:${match[2]}:${match[3]}` : undefined;
}

/** The team whose principal list names this caller ({@link principalMatches}). */
export function teamForPrincipal(config: TrainyardConfig, principalArn: string): TeamConfig | undefined {
  return config.teams.find((team) => team.principals.some((p) => principalMatches(p, principalArn)));
}

/** Whether this caller is a configured admin ({@link principalMatches}). */
export function isAdmin(config: TrainyardConfig, principalArn: string): boolean {
  return config.admins.some((a) => principalMatches(a, principalArn));
}

/** `arn:aws:sts::1:assumed-role/Role/session` → `aws:1:Role` (partition, account, role name); undefined otherwise. */
function roleOfAssumedRole(arn: string): string | undefined {
  const match = /^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/.exec(arn);
  return match ? `${match[1]}:${match[2]}:${match[3]}` : undefined;
}
