import { Duration } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { MAX_UNPACKED_BYTES } from '../lambdas/shared/tarball';
import type { TrainyardConfig } from './config';
import { acknowledgeFinding } from './nag';

/** How every Trainyard Lambda is bundled (esbuild): shared by the house construct and the bundle benchmark. */
export const LAMBDA_BUNDLING = {
  format: 'esm',
  target: 'node22',
  minify: true,
  // The Lambda runtime ships AWS SDK v3; bundling it would triple every bundle.
  external: ['@aws-sdk/*'],
  // ESM bundles still meet CommonJS dependencies that call require().
  banner: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
} as const;

/** Default timeout of a Trainyard Lambda, in seconds. */
export const DEFAULT_TIMEOUT_SECONDS = 30;

/** Lambda allots CPU in proportion to memory: this many MiB buy one full vCPU (AWS Lambda developer guide). */
export const LAMBDA_MIB_PER_VCPU = 1769;

/**
 * The Lambdas that decide placement and so may solve a spot plan (lambdas/domain/spot-planner.ts): cost-gate at
 * submission, attempt-outcome after each attempt, budget-watch at the periodic check.
 */
export const PLANNING_HANDLERS = ['cost-gate', 'attempt-outcome', 'budget-watch'] as const;

/**
 * Memory of the PLANNING_HANDLERS. A cold plan solve is the one CPU-bound piece of the control plane; this share of a
 * vCPU keeps a solve at MAX_PLAN_GRID_POINTS under a third of their timeout, as `npm run bench -- --only
 * control-plane` measures and scales it.
 */
export const PLANNING_MEMORY_MIB = 1024;

/** Memory of every other Trainyard Lambda (I/O-bound handlers), MiB. */
export const DEFAULT_MEMORY_MIB = 512;

/**
 * The Lambdas that read a code bundle whole and unpack it: the API (submit, estimate) and the lifecycle's Analyze
 * step, which reads the bundle again from the workspace.
 */
export const BUNDLE_HANDLERS = ['api', 'analyze'] as const;

/**
 * Memory of the BUNDLE_HANDLERS for bundles of up to `maxBundleMiB` (limits.maxBundleMiB), MiB. Unpacking holds the
 * archive and twice the tar at its peak (gunzip gathers its output, then joins it): measured by `npm run bench --
 * --only control-plane` at about archive + 2 × unpacked + 90 MiB of runtime. The worst bundle is either one that
 * unpacks to MAX_UNPACKED_BYTES from next to nothing, or one that does not compress at all (tar as large as the
 * archive); 512 MiB on top is headroom. Never less than the 3072 MiB the API has always had.
 */
export function bundleMemoryMiB(maxBundleMiB: number): number {
  const unpackedMiB = MAX_UNPACKED_BYTES / (1024 * 1024);
  return Math.max(3072, Math.ceil(Math.max(2 * unpackedMiB, 3 * Math.min(maxBundleMiB, unpackedMiB)) + 512));
}

/** The handler folder of a Lambda entry (`…/lambdas/<handler>/handler.ts` → `<handler>`). */
export function handlerOfEntry(entry: string): string {
  return entry.split(/[\\/]/).at(-2) ?? entry;
}

/**
 * Memory the house gives a function by its entry: PLANNING_MEMORY_MIB for the PLANNING_HANDLERS, bundleMemoryMiB for
 * the BUNDLE_HANDLERS (for the configuration's largest bundle), else the default.
 */
export function memoryForEntry(entry: string, maxBundleMiB: number): number {
  const handler = handlerOfEntry(entry);
  if ((PLANNING_HANDLERS as readonly string[]).includes(handler)) return PLANNING_MEMORY_MIB;
  if ((BUNDLE_HANDLERS as readonly string[]).includes(handler)) return bundleMemoryMiB(maxBundleMiB);
  return DEFAULT_MEMORY_MIB;
}

/**
 * The esbuild `define` that bakes the resolved config into a bundle: it replaces the literal expression
 * `process.env.TRAINYARD_CONFIG` (read that way in lambdas/shared/runtime-config.ts).
 */
export function configDefine(config: TrainyardConfig): Record<string, string> {
  return { 'process.env.TRAINYARD_CONFIG': JSON.stringify(JSON.stringify(config)) };
}

/** Props for a Trainyard Lambda function: its entry and environment; runtime defaults are the house's. */
export interface TrainyardFunctionProps {
  /** Path of the handler module, relative to the repository root (e.g. `lambdas/api/handler.ts`). */
  readonly entry: string;
  /** Environment variables naming the resources it uses. */
  readonly environment?: Record<string, string>;
  /** Log retention. */
  readonly logRetention: logs.RetentionDays;
  /** @default - DEFAULT_TIMEOUT_SECONDS */
  readonly timeout?: Duration;
  /** @default - memoryForEntry(entry, limits.maxBundleMiB): by what the handler does (see memoryForEntry) */
  readonly memorySize?: number;
  /** One sentence saying what the function does (shown in the console). */
  readonly description: string;
  /**
   * Resolved configuration, baked into the bundle as process.env.TRAINYARD_CONFIG. Every function gets it: a handler
   * that reads it without it fails only when that path runs (the interruption handler once did, after its work).
   */
  readonly config: TrainyardConfig;
  /**
   * Where Lambda puts an asynchronous invocation (an EventBridge target's) that still failed after its retries: the
   * event itself is the message body. @default - none (Lambda drops it)
   */
  readonly deadLetterQueue?: sqs.IQueue;
}

/**
 * The house Lambda function: Node.js 24 on ARM64, bundled and minified locally by esbuild (no Docker), ESM with
 * source maps, X-Ray tracing, its own log group with retention and JSON logs, and Powertools defaults.
 * A function declares only its entry, description and environment.
 */
export class TrainyardFunction extends NodejsFunction {
  /** The handler folder it runs (`api`, `budget-watch`, …): how dashboards and docs name it. */
  public readonly handlerName: string;

  constructor(scope: Construct, id: string, props: TrainyardFunctionProps) {
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, { retention: props.logRetention });
    super(scope, id, {
      entry: props.entry,
      handler: 'handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? memoryForEntry(props.entry, props.config.limits.maxBundleMiB),
      timeout: props.timeout ?? Duration.seconds(DEFAULT_TIMEOUT_SECONDS),
      ...(props.deadLetterQueue ? { deadLetterQueue: props.deadLetterQueue } : {}),
      tracing: lambda.Tracing.ACTIVE,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_SERVICE_NAME: 'trainyard',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        POWERTOOLS_LOGGER_LOG_EVENT: 'false',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: LAMBDA_BUNDLING.target,
        minify: LAMBDA_BUNDLING.minify,
        sourceMap: true,
        sourcesContent: false,
        externalModules: [...LAMBDA_BUNDLING.external],
        banner: LAMBDA_BUNDLING.banner,
        // The config is part of the code, not an env var: no 4 KB limit, and a config change redeploys the code.
        define: configDefine(props.config),
      },
    });
    this.handlerName = handlerOfEntry(props.entry);
    acknowledgeFinding(
      this,
      'IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      'Grants only CreateLogGroup/CreateLogStream/PutLogEvents, which every function needs; AWS maintains it.',
    );
    acknowledgeFinding(
      this,
      'IAM5[Resource::*]',
      'Active tracing: xray:PutTraceSegments and PutTelemetryRecords have no resource-level permissions.',
    );
  }
}
