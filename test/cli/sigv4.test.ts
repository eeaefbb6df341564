// SigV4 for a deployed stack's HTTP API: the headers the CLI sends, checked against a signature worked out here from
// the algorithm's definition (canonical request → string to sign → HMAC chain), with static test credentials.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { regionFromApiUrl, signRequest } from '../../lib/cli/sigv4';

const credentials = async () => ({
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
});
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const hmac = (key: Buffer | string, text: string) => createHmac('sha256', key).update(text).digest();

describe('signRequest', () => {
  it('adds Authorization (AWS4-HMAC-SHA256), x-amz-date and x-amz-content-sha256 with the correct signature', async () => {
    const url = new URL('https://abc123.execute-api.eu-west-1.amazonaws.com/jobs?limit=5');
    const body = JSON.stringify({ command: ['python', 'train.py'] });
    const headers = await signRequest(
      { method: 'POST', url, headers: { accept: 'application/json', 'content-type': 'application/json' }, body },
      { region: 'eu-west-1', credentials, now: new Date('2026-03-15T12:00:00.000Z') },
    );

    const payloadHash = sha256(body);
    expect(headers['x-amz-date']).toBe('20260315T120000Z');
    expect(headers['x-amz-content-sha256']).toBe(payloadHash);

    // Worked out independently from the SigV4 specification.
    const signedHeaders = 'accept;content-type;host;x-amz-content-sha256;x-amz-date';
    const canonicalRequest = [
      'POST',
      '/jobs',
      'limit=5',
      'accept:application/json',
      'content-type:application/json',
      'host:abc123.execute-api.eu-west-1.amazonaws.com',
      `x-amz-content-sha256:${payloadHash}`,
      'x-amz-date:20260315T120000Z',
      '',
      signedHeaders,
      payloadHash,
    ].join('\n');
    const scope = '20260315/eu-west-1/execute-api/aws4_request';
    const stringToSign = ['AWS4-HMAC-SHA256', '20260315T120000Z', scope, sha256(canonicalRequest)].join('\n');
    const key = hmac(
      hmac(hmac(hmac('AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', '20260315'), 'eu-west-1'), 'execute-api'),
      'aws4_request',
    );
    const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
    expect(headers.authorization).toBe(
      `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
    );
  });

  it('hashes an empty body as the empty string and carries a session token', async () => {
    const headers = await signRequest(
      { method: 'GET', url: new URL('https://abc123.execute-api.us-east-1.amazonaws.com/budgets'), headers: {} },
      {
        region: 'us-east-1',
        credentials: async () => ({ accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'tok/en=' }),
        now: new Date('2026-01-02T03:04:05.000Z'),
      },
    );
    expect(headers['x-amz-content-sha256']).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(headers['x-amz-security-token']).toBe('tok/en=');
    expect(headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE\/20260102\/us-east-1\/execute-api\/aws4_request, SignedHeaders=[a-z0-9;-]*x-amz-security-token[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
    );
  });
});

describe('regionFromApiUrl', () => {
  it.each([
    ['https://abc123.execute-api.us-east-1.amazonaws.com', 'us-east-1'],
    ['https://abc123.execute-api.cn-north-1.amazonaws.com.cn/prod', 'cn-north-1'],
    ['https://api.example.com', undefined],
    ['http://127.0.0.1:3000', undefined],
  ])('%s → %s', (url, region) => {
    expect(regionFromApiUrl(new URL(url))).toBe(region);
  });
});
