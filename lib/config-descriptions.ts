/**
 * What each key of `trainyard.config.json` means, by its dotted path in the configuration reference (`tiers[].vcpus`),
 * for README's table (lib/config-docs.ts). Kept out of the schema in lib/config.ts so the Lambdas, which parse the
 * configuration at start, do not carry the text in their bundles; test/infra/config-docs.test.ts checks that every
 * key has a description here and that nothing here names a key the schema lacks.
 */
import { CONFIG_ID_RULE } from './config';

export const CONFIG_DESCRIPTIONS: Readonly<Record<string, string>> = {
  tiers: 'Compute tiers jobs can run on. Default: the six seed tiers (cpu-small … gpu-multinode).',
  'tiers[].id': `tier id: ${CONFIG_ID_RULE}.`,
  'tiers[].kind': 'cpu tiers run on Fargate; gpu tiers on EC2 GPU instances.',
  'tiers[].instanceTypes':
    'EC2 instance types for gpu tiers; empty for cpu tiers. On-demand attempts run on the first (onDemandUsdPerHour is its price); spot attempts on any of them. List 3 or more interchangeable types so the spot placement-score probe can see spot capacity and a deadline job can return from on-demand to spot.',
  'tiers[].gpus': 'GPUs per node.',
  'tiers[].gpuMemoryGiB': 'Memory per GPU, GiB (used to decide whether a model fits).',
  'tiers[].vcpus': 'vCPUs per node given to the job.',
  'tiers[].memoryMiB':
    'Memory per node given to the job, MiB. For gpu tiers at most 95 % of each listed instance type’s memory (the kernel and the ECS agent keep the rest).',
  'tiers[].maxRuntime':
    'Longest a job may run on this tier (1s..14d), e.g. 30s, 10m, 2h or 1d. Batch stops an attempt no sooner than 60 s after it starts, so on a tier under 1m a job may run up to 60 s.',
  'tiers[].onDemandUsdPerHour':
    'On-demand price per node-hour of the first instance type (gpu) or the Fargate size (cpu), USD.',
  'tiers[].spotUsdPerHour': 'Spot price per node-hour used when EC2 spot price history is unavailable, USD.',
  'tiers[].spotAllowed': 'Whether jobs on this tier may run on spot capacity.',
  'tiers[].nodes': 'Nodes per job; more than 1 makes a multi-node tier.',
  'tiers[].maxInstances':
    "Bounds the tier's compute. A gpu tier's compute environments hold this many × `nodes` of its smallest instance type: one job each when a job takes all of an instance's GPUs, several on one instance when it asks for fewer, and fewer instances where Batch picks larger types. The cpu tiers share one Fargate pool, the sum over them of this × the Fargate size of their jobs, so while the others are idle a cpu tier can run more jobs than this.",
  'tiers[].peakTflops':
    'Peak dense 16-bit TFLOPS per node of the slowest listed instance type (CPU tiers: fp32), for runtime estimates.',
  'tiers[].shmSizeMiB': 'Shared memory (/dev/shm) for gpu tiers, MiB. Default: half of memoryMiB.',
  teams:
    'Teams: who they are (IAM principals), what they may spend and their fair share. Each adds its job role, its policy and a job definition per tier to the platform stack, which CloudFormation caps at 500 resources: about 37 teams with the default tiers (synth says how many fit).',
  'teams[].id': `team id: ${CONFIG_ID_RULE}. Its fair-share identifier in Batch drops the '-', so two ids that differ only in '-' are refused.`,
  'teams[].principals': 'IAM principal ARNs whose API calls act for this team.',
  'teams[].monthlyBudgetUsd': 'Team budget per calendar month (UTC), USD.',
  'teams[].fairShareWeight': 'Batch fair-share weight factor: lower gets more of the queue.',
  'teams[].tiers': 'Tier ids this team may use. Default: all tiers.',
  admins: 'IAM principal ARNs allowed to change budgets (PUT /budgets/{scope}).',
  sessionNamesPinned:
    'Whether the trust policy of every role whose sessions (arn:aws:sts::…:assumed-role/Role/session) are listed in teams[].principals or admins pins the session name (a condition on sts:RoleSessionName). Without it such entries are refused, but for IAM Identity Center roles (AWSReservedSSO_*), whose session names AWS sets: anyone who may assume the role could otherwise take the listed name.',
  budgets: 'Budget thresholds, as fractions of each scope’s monthly budget.',
  'budgets.warnThreshold': 'Fraction of a budget at which an alert is sent (once per period).',
  'budgets.blockThreshold': 'Fraction of a budget beyond which jobs are refused and running ones paused.',
  spotPolicy: 'When a job leaves spot for on-demand.',
  'spotPolicy.reclaimsBeforeOnDemand': 'Spot reclaims a job survives before it falls back to on-demand.',
  'spotPolicy.capacityWaitMinutes':
    'Minutes a job may wait for spot capacity before the queue cancels it and it moves on-demand.',
  network:
    'Network: { mode: "new", maxAzs or availabilityZones, natGateways } or { mode: "existing", vpcId, subnetIds }.',
  'network.mode': '"new": Trainyard creates a VPC; "existing": it uses a VPC and subnets you name.',
  'network.maxAzs':
    'Availability zones for the new VPC, the first of the deploy region’s: at most 2, all CDK gives a stack not bound to one region; name up to 3 with availabilityZones.',
  'network.availabilityZones':
    'Availability Zones for the new VPC by name, in place of maxAzs: 1–3 zones of the region you deploy to (e.g. ["us-east-1a", "us-east-1b", "us-east-1c"]); more zones give the GPU tiers more spot pools.',
  'network.natGateways': 'NAT gateways, at most one per zone (0 puts compute in public subnets with public IPs).',
  'network.vpcId': 'The VPC compute launches in, e.g. vpc-0123456789abcdef0.',
  'network.subnetIds':
    'Subnets of that VPC for compute; they need a route to ECR, S3 and CloudWatch (NAT or endpoints).',
  warmCapacity: 'Minimum vCPUs kept running per gpu tier id (on-demand environment). Default: none (min 0).',
  logRetentionDays:
    'Retention for job, function, state machine, API access and VPC flow logs, days; one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653.',
  alerts: 'Where budget and job alerts go.',
  'alerts.emails': 'Addresses subscribed to the alert topic.',
  'alerts.slackWebhookSecretName':
    'Secrets Manager secret holding a Slack webhook URL; alerts are posted there when set.',
  reports:
    'Scheduled showback reports (per team, user, project and tier, to reports/ in the workspace bucket, announced by Cost Report Ready).',
  'reports.daily': 'Write a showback report of the day before at 01:00 UTC and announce it (an alert a day per team).',
  'reports.weekly':
    'Write a showback report of the week before (Monday–Sunday) on Mondays at 01:30 UTC and announce it.',
  observability: 'The operations dashboard and the metrics it graphs (docs/operations.md, “Dashboard and metrics”).',
  'observability.dashboard':
    'A CloudWatch dashboard of jobs, spend, budgets, spot capacity and the control plane’s health (about $3 a month).',
  'observability.platformMetrics':
    'Publish Trainyard’s metrics (running jobs, spend rate, budget used, spot capacity, spot warnings and reclaims) as EMF from the Lambdas; each metric series costs about $0.30 a month.',
  limits: 'Limits on what a job submission may carry.',
  'limits.maxBundleMiB':
    'Largest code bundle (the compressed archive), MiB. At most 1024. The API and the lifecycle’s Analyze step each hold the archive and, at the peak, twice what it unpacks to (at most 1 GiB): their functions get 3072 MiB, or 3 × this + 512 MiB where that is more (3584 MiB at 1024).',
  'limits.maxInlineBundleKiB':
    'Largest bundle accepted inline in POST /jobs, KiB (larger ones use a presigned upload).',
  'limits.maxEnvVars': 'Most environment variables per job.',
};
