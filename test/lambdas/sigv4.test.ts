// The DynamoDB client's SigV4 signer (lambdas/shared/sigv4.ts) against the AWS SDK's own signer, @smithy/signature-v4:
// the same request, credentials and time must give the same Authorization header, byte for byte.

import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { type AwsCredentials, signRequest } from '../../lambdas/shared/sigv4';
import { NodeSha256 } from '../../lib/cli/sigv4';

/** The Authorization header the SDK's signer gives the request. */
async function sdkAuthorization(
  request: { host: string; headers: Record<string, string>; body: Buffer },
  scope: { region: string; service: string; credentials: AwsCredentials; date: Date },
): Promise<string> {
  const signer = new SignatureV4({
    credentials: scope.credentials,
    region: scope.region,
    service: scope.service,
    sha256: NodeSha256,
    // Sign exactly the headers ours signs: the comparison is of canonicalisation and signature. (The SDK's DynamoDB
    // client adds x-amz-content-sha256 and its own headers; DynamoDB requires none of them.)
    applyChecksum: false,
  });
  const signed = await signer.sign(
    {
      method: 'POST',
      protocol: 'https:',
      hostname: request.host.split(':')[0] as string,
      path: '/',
      query: {},
      headers: { ...request.headers, host: request.host },
      body: request.body,
    },
    { signingDate: scope.date },
  );
  return signed.headers.authorization as string;
}

const DATE = new Date('2026-11-29T12:34:56.789Z');
const KEYS: AwsCredentials = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
};
const TEMPORARY: AwsCredentials = {
  ...KEYS,
  accessKeyId: 'ASIAEXAMPLE',
  sessionToken: 'FwoGZXIvYXdzEJr//session+token=',
};

describe('signRequest', () => {
  it.each([
    {
      what: 'a GetItem with long-term keys',
      host: 'dynamodb.eu-west-1.amazonaws.com',
      region: 'eu-west-1',
      credentials: KEYS,
      target: 'DynamoDB_20120810.GetItem',
      body: '{"TableName":"trainyard-jobs","Key":{"pk":{"S":"JOB#j1"},"sk":{"S":"META"}}}',
    },
    {
      what: 'an UpdateItem with a Lambda role’s session token',
      host: 'dynamodb.us-east-1.amazonaws.com',
      region: 'us-east-1',
      credentials: TEMPORARY,
      target: 'DynamoDB_20120810.UpdateItem',
      body: '{"TableName":"t","UpdateExpression":"SET #s = :s","ExpressionAttributeValues":{":s":{"S":"RUNNING"}}}',
    },
    {
      what: 'a body with characters outside ASCII, to a local engine with a port',
      host: '127.0.0.1:4567',
      region: 'us-east-1',
      credentials: KEYS,
      target: 'DynamoDB_20120810.PutItem',
      body: '{"Item":{"label":{"S":"läuft – 実験"}}}',
    },
    {
      what: 'an empty body in a China region',
      host: 'dynamodb.cn-north-1.amazonaws.com.cn',
      region: 'cn-north-1',
      credentials: TEMPORARY,
      target: 'DynamoDB_20120810.ListTables',
      body: '',
    },
  ])('signs $what as the AWS SDK does', async ({ host, region, credentials, target, body }) => {
    const bytes = Buffer.from(body, 'utf8');
    const headers = {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': target,
      'content-length': String(bytes.length),
    };
    const scope = { region, service: 'dynamodb', credentials, date: DATE };

    const ours = signRequest({ method: 'POST', host, path: '/', headers, body: bytes }, scope);

    expect(ours.authorization).toBe(await sdkAuthorization({ host, headers, body: bytes }, scope));
    expect(ours['x-amz-date']).toBe('20261129T123456Z');
    expect(ours['x-amz-security-token']).toBe(credentials.sessionToken);
  });

  it('folds runs of spaces in a header value and ignores the case of header names, as the SDK does', async () => {
    const body = Buffer.from('{}');
    const headers = { 'Content-Type': 'application/x-amz-json-1.0', 'X-Amz-Target': '  DynamoDB_20120810.Query   ' };
    const scope = { region: 'us-west-2', service: 'dynamodb', credentials: KEYS, date: DATE };
    const host = 'dynamodb.us-west-2.amazonaws.com';

    const ours = signRequest({ method: 'POST', host, path: '/', headers, body }, scope);

    expect(ours.authorization).toBe(await sdkAuthorization({ host, headers, body }, scope));
    expect(Object.keys(ours).every((name) => name === name.toLowerCase())).toBe(true);
  });

  it('gives a different signature for another day, region, secret or body', () => {
    const base = { method: 'POST', host: 'h', path: '/', headers: { 'x-amz-target': 'T' }, body: Buffer.from('a') };
    const scope = { region: 'us-east-1', service: 'dynamodb', credentials: KEYS, date: DATE };
    const signature = (auth: string | undefined) => auth?.split('Signature=')[1];
    const reference = signature(signRequest(base, scope).authorization);

    const variants = [
      signRequest(base, { ...scope, date: new Date('2026-11-30T12:34:56Z') }),
      signRequest(base, { ...scope, region: 'us-east-2' }),
      signRequest(base, { ...scope, credentials: { ...KEYS, secretAccessKey: 'other' } }),
      signRequest({ ...base, body: Buffer.from('b') }, scope),
    ].map((headers) => signature(headers.authorization));

    expect(new Set([reference, ...variants]).size).toBe(5);
  });
});
