// POST /jobs and POST /uploads against real engines (dynalite, s3rver): validation with exact messages, "nothing
// written on a refused request", the write order, idempotency and crash recovery with the same Idempotency-Key.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { userNameOf } from '../../../lambdas/api/caller';
import { INTERNAL_MESSAGE, toErrorResponse } from '../../../lambdas/api/errors';
import { keptAnswer } from '../../../lambdas/api/routes/jobs';
import { analyzeWorkload } from '../../../lambdas/domain/analysis';
import { CHECKPOINT_DONE_FILE_RULE } from '../../../lambdas/domain/job';
import { uploadKey } from '../../../lambdas/domain/workspace-layout';
import { BundleTooLarge, packTarGz, unpackTarGz } from '../../../lambdas/shared/tarball';
import { parseConfig } from '../../../lib/config';
import {
  type ApiBench,
  errorOf,
  PRINCIPALS,
  projectBundle,
  projectFiles,
  startApiBench,
  TEST_CONFIG_INPUT,
} from './support';

let bench: ApiBench;
beforeAll(async () => {
  bench = await startApiBench();
});
afterAll(async () => {
  await bench?.stop();
});
beforeEach(() => {
  bench.recorded.failNextStart = false;
});

const bundle = projectBundle('cpu-tiny');
const bundleB64 = bundle.toString('base64');
const command = ['python', 'train.py'];
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
/** POST /jobs with an Idempotency-Key, the way a client sends it again to have it replayed. */
const keyedSubmit = (key: string, body: Record<string, unknown>) =>
  ({ method: 'POST', path: '/jobs', headers: { 'Idempotency-Key': key }, body }) as const;
/** The next workspace write (the job's bundle, step 2 of a submission) fails as a connection reset would. */
const failNextBundleWrite = () =>
  vi.spyOn(bench.workspace, 'put').mockRejectedValueOnce(Object.assign(new Error('reset'), { name: 'TimeoutError' }));
let keySeq = 0;
const freshKey = () => `key-${++keySeq}-${Date.now()}`;

interface JobBody {
  jobId: string;
  team: string;
  user: string;
  tier: string;
  state: string;
  command: string[];
  resumeArgs: string[];
  retries: { maxAppRetries: number; backoffSeconds: number };
  env: Record<string, string>;
  estimate: { costUsd: number; runtimeSeconds: number };
  bundle: { key: string; bytes: number; sha256: string };
  pauseToken?: string;
}

describe('userNameOf: the user a caller’s jobs are booked to', () => {
  it('is a budget scope id: lower case, other characters as -, never two dots together', () => {
    const session = (name: string) => userNameOf(`arn:aws:sts::123456789012:assumed-role/nlp-researchers/${name}`);
    expect(session('Alice.Smith@example.com')).toBe('alice.smith-example.com');
    expect(session('J..Doe')).toBe('j.doe');
    expect(session('a...b')).toBe('a.b');
    expect(userNameOf('arn:aws:iam::123456789012:user/division/Bob')).toBe('bob');
  });
});

describe('POST /jobs accepts a valid submission', () => {
  it('stores the bundle, creates the SUBMITTED job on the recommended tier, announces it and starts its execution', async () => {
    const before = bench.recorded.published.length;
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      as: PRINCIPALS.nlpSession,
      body: { bundle: bundleB64, command, env: { SEED: '1' } },
    });
    expect(status).toBe(202);
    const job = body.job as JobBody;
    // The analysis module decides the tier; the API must run it on the bundle's files and use its answer.
    const expectedTier = analyzeWorkload(
      { files: projectFiles('cpu-tiny'), command },
      bench.config.tiers,
    ).recommendedTier;
    expect(job).toMatchObject({
      team: 'nlp',
      // Session "Alice.Smith@example.com" lower-cased, '@' replaced: a valid budget scope id.
      user: 'alice.smith-example.com',
      tier: expectedTier,
      state: 'SUBMITTED',
      command,
      resumeArgs: ['--init_from=resume'],
      retries: { maxAppRetries: 0, backoffSeconds: 60 },
      env: { SEED: '1' },
      bundle: { key: `teams/nlp/jobs/${job.jobId}/code.tar.gz`, bytes: bundle.length, sha256: sha256(bundle) },
    });
    expect(job).not.toHaveProperty('checkpointDoneFile');
    const stored = await bench.workspace.get(job.bundle.key);
    expect(stored?.equals(bundle)).toBe(true);
    expect(bench.recorded.executions.get(job.jobId)).toEqual({ jobId: job.jobId });
    // `Job Submitted` is the cost gate's, once the job has passed analysis and the budget (docs/events.md).
    expect(bench.recorded.published.slice(before)).toEqual([]);
    expect(body.replayed).toBe(false);
    expect(body.analysis).toMatchObject({ recommendedTier: expectedTier });
  });

  it('accepts the caller’s own name as user', async () => {
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      body: { bundle: bundleB64, command, user: 'nlp-researchers' },
    });
    expect(status).toBe(202);
    expect((body.job as JobBody).user).toBe('nlp-researchers');
  });

  it('records the reservation of an overridden tier as the estimate (2 nodes × $5.672/h × 1 h = $11.344 → $11.35)', async () => {
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      body: { bundle: bundleB64, command, requirements: { tier: 'gpu-multinode', runtimeSeconds: 3600 } },
    });
    expect(status).toBe(202);
    const job = body.job as JobBody;
    expect(job.tier).toBe('gpu-multinode');
    expect(job.estimate).toMatchObject({ costUsd: 11.35, runtimeSeconds: 3600 });
  });

  it("keeps the job's labels on its record; a submission without any has none", async () => {
    const labels = { sweep: 'cli-42', lr: '3e-4' };
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      body: { bundle: bundleB64, command, labels },
    });
    expect(status).toBe(202);
    const job = body.job as JobBody & { labels?: Record<string, string> };
    expect(job.labels).toEqual(labels);
    expect((await bench.jobs.getJob(job.jobId))?.labels).toEqual(labels);
    const shown = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });
    expect((shown.body.job as { labels?: unknown }).labels).toEqual(labels);
    const plain = await bench.call({ method: 'POST', path: '/jobs', body: { bundle: bundleB64, command, labels: {} } });
    expect(plain.status).toBe(202);
    expect('labels' in (plain.body.job as object)).toBe(false);
    expect((await bench.jobs.getJob((plain.body.job as JobBody).jobId))?.labels).toBeUndefined();
  });

  it('accepts a body API Gateway delivered base64-encoded', async () => {
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      body: { bundle: bundleB64, command },
      base64: true,
    });
    expect(status).toBe(202);
    expect((body.job as JobBody).state).toBe('SUBMITTED');
  });

  it('takes a bundle uploaded to the presigned URL from POST /uploads', async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    expect(upload.status).toBe(201);
    const { uploadId, url, expiresAt, maxBytes } = upload.body as {
      uploadId: string;
      url: string;
      expiresAt: string;
      maxBytes: number;
    };
    expect(expiresAt).toBe('2026-03-15T12:15:00.000Z');
    expect(maxBytes).toBe(1024 * 1024);
    const put = await fetch(url, { method: 'PUT', body: bundle, headers: { 'Content-Type': 'application/gzip' } });
    expect(put.status).toBe(200);
    expect((await bench.workspace.get(uploadKey('nlp', uploadId)))?.equals(bundle)).toBe(true);

    const { status, body } = await bench.call({ method: 'POST', path: '/jobs', body: { uploadId, command } });
    expect(status).toBe(202);
    const job = body.job as JobBody;
    expect((await bench.workspace.get(job.bundle.key))?.equals(bundle)).toBe(true);
    expect(job.bundle.sha256).toBe(sha256(bundle));
  });
});

describe('POST /jobs refuses bad input with an exact status and message and writes nothing', () => {
  const notTarGz = Buffer.from('hello world!').toString('base64');
  const parseError = (() => {
    try {
      JSON.parse('{"command": [');
      return '';
    } catch (error) {
      return (error as Error).message;
    }
  })();
  const cases: Array<{
    name: string;
    as?: string;
    body?: unknown;
    headers?: Record<string, string>;
    query?: Record<string, string>;
    status: number;
    code: string;
    message: string | RegExp;
  }> = [
    {
      name: 'malformed JSON',
      body: '{"command": [',
      status: 400,
      code: 'invalid_json',
      message: `request body is not valid JSON: ${parseError}`,
    },
    { name: 'no body', status: 400, code: 'invalid_request', message: 'request body is required: a JSON object' },
    {
      name: 'a command that is a string',
      body: { bundle: bundleB64, command: 'python train.py' },
      status: 400,
      code: 'invalid_request',
      message: 'body.command: Invalid input: expected array, received string',
    },
    {
      name: 'an empty command',
      body: { bundle: bundleB64, command: [] },
      status: 400,
      code: 'invalid_request',
      message: 'body.command: must hold the program and its arguments, e.g. ["python", "train.py"]',
    },
    {
      // {"command":["python","train.py",7 × "x…" of 4000],"env":{},"resumeArgs":""}: 12 + 8 + 11 + 7 × 4003 + 2 + 8 + 1
      // + 15 + 1 = 28079 bytes; AWS Batch takes 30 KiB per SubmitJob, and the platform's own settings need 6 of them.
      name: 'a command too large for a Batch submission though each argument is within the limit',
      body: { bundle: bundleB64, command: ['python', 'train.py', ...Array(7).fill('x'.repeat(4000))] },
      status: 400,
      code: 'invalid_request',
      message:
        "body: command, env and resumeArgs take 28079 bytes together (as JSON), more than the 24576 allowed: AWS Batch takes at most 30 KiB per job submission and the platform's own settings need the rest; put large values in a file in the bundle instead",
    },
    {
      // Bytes, not characters: 3 × 4000 + 300 "é" (each value within 4096 characters) are 24,600 bytes; with the
      // names, the command and the other resume argument (sent as "--init_from=resume 'é…'"), 24,699.
      name: 'an environment and resume arguments too many bytes together',
      body: {
        bundle: bundleB64,
        command,
        env: { A: 'é'.repeat(4000), B: 'é'.repeat(4000), C: 'é'.repeat(4000) },
        resumeArgs: ['--init_from=resume', 'é'.repeat(300)],
      },
      status: 400,
      code: 'invalid_request',
      message: /^body: command, env and resumeArgs take 24699 bytes together \(as JSON\), more than the 24576 allowed/,
    },
    {
      // Resume arguments are sent as one shell-quoted string, each ' written '\'' (and the \ escaped in JSON: 5 bytes).
      // {"command":["python","train.py"],"env":{"A":"x…"},"resumeArgs":"'…' '…'"}: 11 + 21 + 7 + (6 + 4000 + 2) + 14
      // + (2 + (2 + 4000 × 5) + 1 + (2 + 200 × 5)) + 1 = 25,069 bytes, though as a JSON array they take 4,208.
      name: 'resume arguments whose shell quoting would not fit a Batch submission',
      body: {
        bundle: bundleB64,
        command,
        env: { A: 'x'.repeat(4000) },
        resumeArgs: ["'".repeat(4000), "'".repeat(200)],
      },
      status: 400,
      code: 'invalid_request',
      message: /^body: command, env and resumeArgs take 25069 bytes together \(as JSON\), more than the 24576 allowed/,
    },
    {
      // A budget scope never holds '..', so the job would be booked to no project budget.
      name: "a project with '..'",
      body: { bundle: bundleB64, command, project: 'gpt..small' },
      status: 400,
      code: 'invalid_request',
      message: "body.project: must not contain '..' (a budget scope never may)",
    },
    {
      name: 'a command whose program is blank',
      body: { bundle: bundleB64, command: ['  ', 'train.py'] },
      status: 400,
      code: 'invalid_request',
      message: 'body.command: must start with a non-empty program name',
    },
    {
      name: 'neither bundle nor uploadId',
      body: { command },
      status: 400,
      code: 'invalid_request',
      message: 'body: one of bundle, uploadId is required',
    },
    {
      name: 'both bundle and uploadId',
      body: { bundle: bundleB64, uploadId: 'j000001', command },
      status: 400,
      code: 'invalid_request',
      message: 'body: give exactly one of bundle, uploadId; got bundle and uploadId',
    },
    {
      name: 'an unknown field',
      body: { bundle: bundleB64, command, priority: 'high' },
      status: 400,
      code: 'invalid_request',
      message: 'body: unknown field(s) "priority"',
    },
    {
      name: 'an unknown tier',
      body: { bundle: bundleB64, command, requirements: { tier: 'gpu-huge' } },
      status: 400,
      code: 'unknown_tier',
      message:
        'unknown tier "gpu-huge"; defined tiers: cpu-small, cpu-large, gpu-small, gpu-medium, gpu-large, gpu-multinode',
    },
    {
      name: "a tier outside the team's tiers",
      as: PRINCIPALS.vision,
      body: { bundle: bundleB64, command, requirements: { tier: 'gpu-large' } },
      status: 403,
      code: 'forbidden',
      message: 'team vision may not use tier gpu-large; its tiers: cpu-small, gpu-small',
    },
    {
      name: 'a negative runtime',
      body: { bundle: bundleB64, command, requirements: { runtimeSeconds: -5 } },
      status: 400,
      code: 'invalid_request',
      message: 'body.requirements.runtimeSeconds: Too small: expected number to be >0',
    },
    ...[0, 2.5, 1_000_000_001].map((totalSteps) => ({
      name: `${totalSteps} total steps`,
      body: { bundle: bundleB64, command, requirements: { totalSteps } },
      status: 400,
      code: 'invalid_request',
      message:
        totalSteps === 0
          ? 'body.requirements.totalSteps: Too small: expected number to be >0'
          : totalSteps === 2.5
            ? 'body.requirements.totalSteps: Invalid input: expected int, received number'
            : 'body.requirements.totalSteps: Too big: expected number to be <=1000000000',
    })),
    {
      name: 'a non-numeric GPU memory',
      body: { bundle: bundleB64, command, requirements: { gpuMemoryGiB: 'NaN' } },
      status: 400,
      code: 'invalid_request',
      message: 'body.requirements.gpuMemoryGiB: Invalid input: expected number, received string',
    },
    ...[1e-200, 0.001, 2049].map((gpuMemoryGiB) => ({
      // 1e-200 is a number DynamoDB cannot store: refused here, not by the write after the key is claimed.
      name: `a GPU memory of ${gpuMemoryGiB} GiB`,
      body: { bundle: bundleB64, command, requirements: { gpuMemoryGiB } },
      status: 400,
      code: 'invalid_request',
      message: 'body.requirements.gpuMemoryGiB: must be from 0.01 to 2048 GiB',
    })),
    {
      name: 'an unknown query parameter',
      query: { dryRun: 'true' },
      body: { bundle: bundleB64, command },
      status: 400,
      code: 'invalid_request',
      message: 'query: unknown field(s) "dryRun"',
    },
    {
      name: 'more environment variables than the limit (3)',
      body: { bundle: bundleB64, command, env: { A: '1', B: '2', C: '3', D: '4' } },
      status: 400,
      code: 'invalid_request',
      message: 'body.env: at most 3 environment variables are allowed',
    },
    {
      name: 'a reserved environment variable',
      body: { bundle: bundleB64, command, env: { AWS_REGION: 'eu-west-1' } },
      status: 400,
      code: 'invalid_request',
      message: 'body.env.AWS_REGION: environment variable names may not start with TRAINYARD_ or AWS_ (reserved)',
    },
    {
      name: 'a lower-case environment variable name',
      body: { bundle: bundleB64, command, env: { seed: '1' } },
      status: 400,
      code: 'invalid_request',
      message: 'body.env.seed: environment variable names must match ^[A-Z_][A-Z0-9_]*$',
    },
    ...[
      ['a command argument', { command: ['python', 'train.py', 'a\u0000b'] }, 'body.command[2]'],
      ['an environment value', { command, env: { SEED: '1\u00002' } }, 'body.env.SEED'],
      ['a resume argument', { command, resumeArgs: ['--init_from=\u0000'] }, 'body.resumeArgs[0]'],
    ].map(([what, fields, key]) => ({
      name: `a NUL character in ${what}`,
      body: { bundle: bundleB64, ...(fields as object) },
      status: 400,
      code: 'invalid_request',
      message: `${key}: must not contain a NUL character: no process argument or variable can`,
    })),
    {
      name: 'a project id that is not a scope id',
      body: { bundle: bundleB64, command, project: 'My Project' },
      status: 400,
      code: 'invalid_request',
      message: "body.project: must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit",
    },
    {
      name: 'a label key with an upper-case letter',
      body: { bundle: bundleB64, command, labels: { Sweep: 'a' } },
      status: 400,
      code: 'invalid_request',
      message:
        "body.labels.Sweep: label keys must be 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
    },
    {
      name: 'a label value with a comma',
      body: { bundle: bundleB64, command, labels: { lr: '1,2' } },
      status: 400,
      code: 'invalid_request',
      message: "body.labels.lr: label values must be 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-'",
    },
    {
      name: 'seventeen labels',
      body: {
        bundle: bundleB64,
        command,
        labels: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])),
      },
      status: 400,
      code: 'invalid_request',
      message: 'body.labels: a job may carry at most 16 labels',
    },
    ...['../SAVED', '/abs/SAVED', '.done', 'dir/', 'SAVED.tmp', 'MANIFEST.json', 'x'.repeat(256)].map(
      (checkpointDoneFile) => ({
        name: `checkpointDoneFile ${JSON.stringify(checkpointDoneFile.slice(0, 20))}`,
        body: { bundle: bundleB64, command, checkpointDoneFile },
        status: 400,
        code: 'invalid_request',
        message: `body.checkpointDoneFile: ${CHECKPOINT_DONE_FILE_RULE}`,
      }),
    ),
    {
      name: 'a bundle that is not base64',
      body: { bundle: 'not base64!', command },
      status: 400,
      code: 'invalid_request',
      message:
        'body.bundle: must be standard padded base64 (A-Z, a-z, 0-9, +, /, with = padding to a multiple of 4 characters)',
    },
    {
      name: 'a bundle that is not a tar.gz',
      body: { bundle: notTarGz, command },
      status: 400,
      code: 'invalid_bundle',
      message: /^bundle is not a gzip-compressed tar: /,
    },
    {
      name: 'an inline bundle one KiB over the 8 KiB limit',
      body: { bundle: Buffer.alloc(9 * 1024, 7).toString('base64'), command },
      status: 413,
      code: 'payload_too_large',
      message:
        'bundle is 9216 bytes after base64 decoding; inline bundles may be at most 8 KiB (8192 bytes): upload larger ones with POST /uploads (up to 1 MiB)',
    },
    {
      name: 'an inline bundle one byte over the limit',
      body: { bundle: Buffer.alloc(8193, 7).toString('base64'), command },
      status: 413,
      code: 'payload_too_large',
      message: /^bundle is 8193 bytes after base64 decoding/,
    },
    {
      name: 'an upload that was never made',
      body: { uploadId: 'j999999', command },
      status: 400,
      code: 'invalid_request',
      message:
        'upload j999999 has no bundle: PUT the tar.gz to the URL POST /uploads returned (before it expires), then submit',
    },
    {
      name: 'a workload no tier can run',
      body: { bundle: bundleB64, command, requirements: { runtimeSeconds: 864000 } },
      status: 422,
      code: 'workload_refused',
      message:
        /^no tier fits this workload: code runs on the CPU .*cpu-small: estimated runtime 10 d exceeds cpu-small's maximum 30 s/,
    },
    {
      name: 'a malformed Idempotency-Key',
      body: { bundle: bundleB64, command },
      headers: { 'Idempotency-Key': 'has a space' },
      status: 400,
      code: 'invalid_request',
      message: `Idempotency-Key must be 1-128 characters of A-Z, a-z, 0-9, '_' and '-', got "has a space"`,
    },
    {
      name: 'an Idempotency-Key of 129 characters',
      body: { bundle: bundleB64, command },
      headers: { 'Idempotency-Key': 'k'.repeat(129) },
      status: 400,
      code: 'invalid_request',
      message: /^Idempotency-Key must be 1-128 characters/,
    },
    {
      // Bob has a budget of his own; the role's session would be charged to it without spending its own.
      name: 'a user other than the caller, from a caller who is not an admin',
      body: { bundle: bundleB64, command, user: 'bob' },
      status: 403,
      code: 'forbidden',
      message:
        'body.user: "bob" is not the caller (nlp-researchers); only an admin may submit a job for another user, since it is charged to that user\'s budget',
    },
    {
      name: 'a principal in no team',
      as: PRINCIPALS.stranger,
      body: { bundle: bundleB64, command },
      status: 403,
      code: 'forbidden',
      message: `principal ${PRINCIPALS.stranger} is not a member of any Trainyard team; ask an admin to add it to the config`,
    },
    {
      name: 'an admin without a team',
      as: PRINCIPALS.admin,
      body: { bundle: bundleB64, command },
      status: 403,
      code: 'forbidden',
      message: `principal ${PRINCIPALS.admin} is not a member of any Trainyard team`,
    },
  ];

  it.each(cases)('$name → $status', async (c) => {
    const before = await bench.snapshot();
    const published = bench.recorded.published.length;
    const starts = bench.recorded.startCalls.length;
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      ...(c.as !== undefined && { as: c.as }),
      ...(c.body !== undefined && { body: c.body }),
      ...(c.query !== undefined && { query: c.query }),
      headers: { 'Idempotency-Key': freshKey(), ...c.headers },
    });
    expect(status).toBe(c.status);
    const error = errorOf(body);
    expect(error.code).toBe(c.code);
    if (typeof c.message === 'string') expect(error.message).toBe(c.message);
    else expect(error.message).toMatch(c.message);
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published.length).toBe(published);
    expect(bench.recorded.startCalls.length).toBe(starts);
  });

  it('accepts an inline bundle of exactly the limit (8192 bytes) as to size, then checks it unpacks', async () => {
    const { status, body } = await bench.call({
      method: 'POST',
      path: '/jobs',
      body: { bundle: Buffer.alloc(8192, 7).toString('base64'), command },
    });
    expect(status).toBe(400);
    expect(errorOf(body).code).toBe('invalid_bundle');
  });

  it('refuses an upload over maxBundleMiB (1 MiB) with 413, naming both sizes', async () => {
    await bench.workspace.put(uploadKey('nlp', 'big1'), Buffer.alloc(1024 * 1024 + 1, 1));
    const before = await bench.snapshot();
    const { status, body } = await bench.call({ method: 'POST', path: '/jobs', body: { uploadId: 'big1', command } });
    expect(status).toBe(413);
    expect(errorOf(body).message).toBe(
      'uploaded bundle big1 is 1048577 bytes; bundles may be at most 1 MiB (1048576 bytes)',
    );
    expect(await bench.snapshot()).toEqual(before);
  });

  it("does not read another team's upload: the key is under the caller's team", async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads', as: PRINCIPALS.vision });
    const { uploadId } = upload.body as { uploadId: string };
    await bench.workspace.put(uploadKey('vision', uploadId), bundle);
    const { status, body } = await bench.call({ method: 'POST', path: '/jobs', body: { uploadId, command } });
    expect(status).toBe(400);
    expect(errorOf(body).message).toMatch(new RegExp(`^upload ${uploadId} has no bundle`));
  });
});

describe('Idempotency-Key', () => {
  it('returns the same job for the same key and body, with one execution started', async () => {
    const key = freshKey();
    const request = { method: 'POST', path: '/jobs', headers: { 'Idempotency-Key': key } } as const;
    const first = await bench.call({ ...request, body: { bundle: bundleB64, command, env: { A: '1' } } });
    // Same content with keys in another order: the same request.
    const second = await bench.call({ ...request, body: { env: { A: '1' }, command, bundle: bundleB64 } });
    expect(first.status).toBe(202);
    expect(second.status).toBe(200);
    const jobId = (first.body.job as JobBody).jobId;
    expect((second.body.job as JobBody).jobId).toBe(jobId);
    expect(second.body.replayed).toBe(true);
    expect(bench.recorded.executions.has(jobId)).toBe(true);
    const jobItems = (await bench.dynamo.scanAll(bench.dynamo.tables.jobs)).filter(
      (i) => i.kind === 'job' && i.jobId === jobId,
    );
    expect(jobItems).toHaveLength(1);
    expect([...bench.recorded.executions.keys()].filter((name) => name === jobId)).toHaveLength(1);
  });

  it('refuses the same key with a different body with 409 and writes nothing', async () => {
    const key = freshKey();
    const first = await bench.call(keyedSubmit(key, { bundle: bundleB64, command }));
    const jobId = (first.body.job as JobBody).jobId;
    const before = await bench.snapshot();
    const { status, body } = await bench.call(
      keyedSubmit(key, { bundle: bundleB64, command: ['python', 'train.py', '--max_iters=5'] }),
    );
    expect(status).toBe(409);
    expect(errorOf(body)).toEqual({
      code: 'idempotency_key_reused',
      message: `Idempotency-Key "${key}" was already used for a different request (job ${jobId}); send the same body to get that job, or use a new key for a new job`,
      details: { jobId },
    });
    expect(await bench.snapshot()).toEqual(before);
  });

  it('keeps keys per team: the same key from another team is a new job', async () => {
    const key = freshKey();
    const a = await bench.call(keyedSubmit(key, { bundle: bundleB64, command }));
    const b = await bench.call({
      method: 'POST',
      path: '/jobs',
      as: PRINCIPALS.vision,
      headers: { 'Idempotency-Key': key },
      body: { bundle: bundleB64, command },
    });
    expect([a.status, b.status]).toEqual([202, 202]);
    expect((a.body.job as JobBody).jobId).not.toBe((b.body.job as JobBody).jobId);
  });

  it("keeps keys per user: a key two users of one team share never answers one with the other's job", async () => {
    const key = freshKey();
    const alice = await bench.call({ ...keyedSubmit(key, { bundle: bundleB64, command }), as: PRINCIPALS.nlpSession });
    const before = await bench.snapshot();
    const role = await bench.call(keyedSubmit(key, { bundle: bundleB64, command }));
    expect(alice.status).toBe(202);
    expect((alice.body.job as JobBody & { user: string }).user).toBe('alice.smith-example.com');
    expect(role.status).toBe(409);
    expect(errorOf(role.body).code).toBe('idempotency_key_reused');
    expect(await bench.snapshot()).toEqual(before);
  });

  it('answers concurrent tries with one key as one job: the one that created it 202, the others replays', async () => {
    const key = freshKey();
    const answers = await Promise.all(
      [1, 2, 3].map(() => bench.call(keyedSubmit(key, { bundle: bundleB64, command }))),
    );
    const jobIds = new Set(answers.map((a) => (a.body.job as JobBody).jobId));
    expect(jobIds.size).toBe(1);
    expect(answers.map((a) => [a.status, a.body.replayed]).sort()).toEqual([
      [200, true],
      [200, true],
      [202, false],
    ]);
  });

  it('recovers a submission cut after the job record: the retry starts the execution once', async () => {
    const key = freshKey();
    const request = keyedSubmit(key, { bundle: bundleB64, command });
    bench.recorded.failNextStart = true;
    const crashed = await bench.call(request);
    expect(crashed.status).toBe(500);
    expect(crashed.body).toEqual({ error: { code: 'internal', message: INTERNAL_MESSAGE } });
    const orphan = (await bench.dynamo.scanAll(bench.dynamo.tables.jobs)).find(
      (i) => i.kind === 'idempotency' && String(i.pk).endsWith(`#${key}`),
    );
    const jobId = String(orphan?.jobId);
    expect((await bench.jobs.getJob(jobId))?.state).toBe('SUBMITTED');
    expect(bench.recorded.executions.has(jobId)).toBe(false);

    const retried = await bench.call(request);
    expect(retried.status).toBe(200);
    expect((retried.body.job as JobBody).jobId).toBe(jobId);
    expect(bench.recorded.executions.get(jobId)).toEqual({ jobId });
  });

  it('recovers a submission cut after the claim, before the bundle: the retry creates the job under the claimed id', async () => {
    const key = freshKey();
    const request = keyedSubmit(key, { bundle: bundleB64, command });
    const put = failNextBundleWrite();
    const crashed = await bench.call(request);
    put.mockRestore();
    expect(crashed.status).toBe(500);
    const claim = (await bench.dynamo.scanAll(bench.dynamo.tables.jobs)).find(
      (i) => i.kind === 'idempotency' && String(i.pk).endsWith(`#${key}`),
    );
    const claimedId = String(claim?.jobId);
    expect(await bench.jobs.getJob(claimedId)).toBeUndefined();

    const retried = await bench.call(request);
    expect(retried.status).toBe(202);
    expect((retried.body.job as JobBody).jobId).toBe(claimedId);
    expect((await bench.workspace.get(`teams/nlp/jobs/${claimedId}/code.tar.gz`))?.equals(bundle)).toBe(true);
    expect(bench.recorded.executions.get(claimedId)).toEqual({ jobId: claimedId });
  });
});

describe('Idempotency-Key replays answered from the claim', () => {
  const claimOf = async (key: string) =>
    (await bench.dynamo.scanAll(bench.dynamo.tables.jobs)).find(
      (i) => i.kind === 'idempotency' && String(i.pk).endsWith(`#${key}`),
    );

  it('answers a replay whose upload has expired with the job and the first answer, writing nothing', async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    const { uploadId } = upload.body as { uploadId: string };
    await bench.workspace.put(uploadKey('nlp', uploadId), bundle);
    const request = {
      method: 'POST',
      path: '/jobs',
      headers: { 'Idempotency-Key': freshKey() },
      body: { uploadId, command },
    } as const;
    const first = await bench.call(request);
    expect(first.status).toBe(202);
    // The scratch prefix expires after 30 days; the job keeps its own copy of the bundle.
    await bench.workspace.delete(uploadKey('nlp', uploadId));
    const before = await bench.snapshot();

    const replay = await bench.call(request);
    expect(replay.status, JSON.stringify(replay.body)).toBe(200);
    expect(replay.body).toEqual({ ...first.body, replayed: true });
    expect(await bench.snapshot()).toEqual(before);
  });

  it('compares the content of an upload that is still there: replaced since, it is a different request (409)', async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    const { uploadId } = upload.body as { uploadId: string };
    await bench.workspace.put(uploadKey('nlp', uploadId), bundle);
    const key = freshKey();
    const request = keyedSubmit(key, { uploadId, command });
    const first = await bench.call(request);
    expect(first.status).toBe(202);
    // The upload URL stays valid for a while: the same id can hold another bundle.
    const files = Object.entries(projectFiles('cpu-tiny')).map(([path, text]) => ({
      path,
      content: Buffer.from(text),
    }));
    const changed = packTarGz([...files, { path: 'NOTES.md', content: Buffer.from('another bundle') }]);
    await bench.workspace.put(uploadKey('nlp', uploadId), changed);
    const replay = await bench.call(request);
    expect(replay.status).toBe(409);
    expect(errorOf(replay.body).code).toBe('idempotency_key_reused');
  });

  it('keeps the answer of the try that created the job, not of one that claimed the key and stopped', async () => {
    const key = freshKey();
    const request = keyedSubmit(key, { bundle: bundleB64, command });
    const put = failNextBundleWrite();
    expect((await bench.call(request)).status).toBe(500);
    put.mockRestore();
    expect((await claimOf(key))?.answer).toBeUndefined();

    const created = await bench.call(request);
    expect(created.status).toBe(202);
    const { job: _job, replayed: _replayed, ...answer } = created.body;
    expect(JSON.parse(String((await claimOf(key))?.answer))).toEqual(answer);
  });

  it('keeps a retry’s answer when the try that created the job stopped before keeping one, for replays after the upload', async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    const { uploadId } = upload.body as { uploadId: string };
    await bench.workspace.put(uploadKey('nlp', uploadId), bundle);
    const key = freshKey();
    const request = keyedSubmit(key, { uploadId, command });
    // The first try creates the job and stops before its answer is kept.
    const keep = vi.spyOn(bench.jobs, 'keepIdempotencyAnswer').mockRejectedValueOnce(new Error('Lambda timed out'));
    expect((await bench.call(request)).status).toBe(500);
    keep.mockRestore();
    expect((await claimOf(key))?.answer).toBeUndefined();

    // The client retries while the upload is there: a replay through the full path, whose answer is now kept.
    const retried = await bench.call(request);
    expect(retried.status).toBe(200);
    const { job: _job, replayed: _replayed, ...answer } = retried.body;
    expect(JSON.parse(String((await claimOf(key))?.answer))).toEqual(answer);

    // Once the upload is gone, a replay is answered from the claim, not refused for the missing upload.
    await bench.workspace.delete(uploadKey('nlp', uploadId));
    const later = await bench.call(request);
    expect(later.status, JSON.stringify(later.body)).toBe(200);
    expect(later.body).toEqual({ ...retried.body, replayed: true });
    // A kept answer is never replaced.
    expect(await bench.jobs.keepIdempotencyAnswer('nlp', key, String((later.body.job as JobBody).jobId), '{}')).toBe(
      false,
    );
  });

  it('answers a replay of a claim made before answers were kept through the full path, as before', async () => {
    const key = freshKey();
    const request = keyedSubmit(key, { bundle: bundleB64, command });
    const first = await bench.call(request);
    const { bodyHash: _hash, answer: _answer, ...older } = (await claimOf(key)) as Record<string, unknown>;
    await bench.dynamo.doc.put({ TableName: bench.dynamo.tables.jobs, Item: older });
    const findClaim = vi.spyOn(bench.jobs, 'findIdempotencyKey');
    const replay = await bench.call(request);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual({ ...first.body, replayed: true });
    // Looked up once for the short answer (nothing to answer from), then again by the claim that found it taken.
    expect(findClaim).toHaveBeenCalledTimes(2);
    findClaim.mockRestore();
  });

  it('sends the same bundle another way through the full path: the same request, the same job', async () => {
    const key = freshKey();
    const first = await bench.call(keyedSubmit(key, { bundle: bundleB64, command }));
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    const { uploadId } = upload.body as { uploadId: string };
    await bench.workspace.put(uploadKey('nlp', uploadId), bundle);
    const replay = await bench.call(keyedSubmit(key, { uploadId, command }));
    expect(replay.status).toBe(200);
    expect((replay.body.job as JobBody).jobId).toBe((first.body.job as JobBody).jobId);
  });

  it('keeps the first answer up to MAX_KEPT_ANSWER_BYTES (64 KiB) of JSON, and no larger one', () => {
    const frame = '{"analysis":"","estimate":{}}'.length;
    const fits = { analysis: 'a'.repeat(64 * 1024 - frame), estimate: {} };
    expect(JSON.stringify(fits).length).toBe(64 * 1024);
    expect(keptAnswer(fits)).toBe(JSON.stringify(fits));
    expect(keptAnswer({ ...fits, analysis: `${fits.analysis}a` })).toBeUndefined();
    // Bytes, not characters: each é is two.
    expect(keptAnswer({ analysis: 'é'.repeat(32 * 1024), estimate: {} })).toBeUndefined();
  });
});

describe('limits come from the configuration', () => {
  it('the test config really sets the limits the cases above rely on', () => {
    expect(parseConfig(TEST_CONFIG_INPUT).limits).toEqual({ maxInlineBundleKiB: 8, maxBundleMiB: 1, maxEnvVars: 3 });
  });
});

describe('a bundle that unpacks to more than the limit', () => {
  it('is refused as too large (413, payload_too_large), not as a bundle that cannot be read', () => {
    // 64 KiB of zeros compress to well under 1 KiB; a 16 KiB limit is crossed while unpacking.
    const archive = packTarGz([{ path: 'zeros.bin', content: Buffer.alloc(64 * 1024) }]);
    const limit = 16 * 1024;

    let thrown: unknown;
    try {
      unpackTarGz(archive, limit);
    } catch (error) {
      thrown = error;
    }

    expect(thrown).toBeInstanceOf(BundleTooLarge);
    expect(toErrorResponse(thrown)).toEqual({
      status: 413,
      body: {
        error: {
          code: 'payload_too_large',
          message:
            'bundle unpacks to more than 16384 bytes, the most a bundle may hold: leave data, checkpoints and outputs out of it (.gitignore or .trainyardignore) and have the job download what it needs',
          details: { maxUnpackedBytes: 16384 },
        },
      },
    });
    expect(unpackTarGz(archive, 128 * 1024).map((f) => f.content.length)).toEqual([64 * 1024]);
  });
});

describe('an upload replaced after its size was checked', () => {
  it('is refused as too large (413) and nothing is stored: the read is bounded too, not only the listing', async () => {
    const upload = await bench.call({ method: 'POST', path: '/uploads' });
    const { uploadId, url, maxBytes } = upload.body as { uploadId: string; url: string; maxBytes: number };
    const train = { path: 'train.py', content: Buffer.from('print("hi")\n') };
    const small = packTarGz([train]);
    // Incompressible, so the archive itself is 3 MiB: three times the configured 1 MiB.
    const big = packTarGz([train, { path: 'data.bin', content: randomBytes(3 * 1024 * 1024) }]);
    const put = (body: Buffer) =>
      fetch(url, { method: 'PUT', body, headers: { 'Content-Type': 'application/gzip' } }).then((r) => r.status);
    expect(await put(small)).toBe(200);
    // The upload URL PUTs again (it may until it expires) right after the API listed the small object.
    const key = uploadKey('nlp', uploadId);
    const list = bench.workspace.list.bind(bench.workspace);
    const spy = vi.spyOn(bench.workspace, 'list').mockImplementation(async (prefix: string) => {
      const listed = await list(prefix);
      if (prefix === key) expect(await put(big)).toBe(200);
      return listed;
    });
    const before = await bench.snapshot();
    try {
      const { status, body } = await bench.call({
        method: 'POST',
        path: '/jobs',
        body: { uploadId, command: ['python', 'train.py'] },
      });
      expect(status).toBe(413);
      expect(errorOf(body).message).toBe(
        `uploaded bundle ${uploadId} is ${big.length} bytes; bundles may be at most 1 MiB (${maxBytes} bytes)`,
      );
    } finally {
      spy.mockRestore();
    }
    expect(await bench.snapshot()).toEqual(before);
  });
});
