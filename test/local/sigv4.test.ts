// checkS3Signature on AWS's own worked examples (Amazon S3 API Reference, "Signature Calculations for the Authorization
// Header" and "Query String Authentication": GET /test.txt from examplebucket on 24 May 2013), then on what must fail;
// and checkDynamoDbSignature on what the stores' client signs, then on what DynamoDB refuses.

import { describe, expect, it } from 'vitest';
import { signRequest } from '../../lambdas/shared/sigv4';
import { checkDynamoDbSignature, checkS3Signature, MAX_CLOCK_SKEW_SECONDS } from '../../lib/local/sigv4';

const CREDENTIALS = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
};
const SIGNED_AT = Date.UTC(2013, 4, 24);
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** AWS's header example: its signature is the one the documentation gives. */
function headerExample(overrides: { url?: string; method?: string; headers?: Record<string, string> } = {}) {
  return {
    method: overrides.method ?? 'GET',
    url: overrides.url ?? '/test.txt',
    headers: {
      host: 'examplebucket.s3.amazonaws.com',
      range: 'bytes=0-9',
      'x-amz-content-sha256': EMPTY_SHA256,
      'x-amz-date': '20130524T000000Z',
      authorization:
        'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
      ...overrides.headers,
    },
  };
}

/** AWS's presigned example (valid 86,400 s): its signature is the one the documentation gives. */
const PRESIGNED_QUERY =
  'X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';
function presignedExample(url = `/test.txt?${PRESIGNED_QUERY}`, method = 'GET') {
  return { method, url, headers: { host: 'examplebucket.s3.amazonaws.com' } };
}

describe('checkS3Signature on AWS’s examples', () => {
  it('accepts the Authorization header example', () => {
    expect(checkS3Signature(headerExample(), CREDENTIALS, SIGNED_AT)).toBeUndefined();
  });

  it('accepts the presigned example within its 86,400 s, and in any order of its query', () => {
    expect(checkS3Signature(presignedExample(), CREDENTIALS, SIGNED_AT + 86_400_000)).toBeUndefined();
    const reordered = PRESIGNED_QUERY.split('&').reverse().join('&');
    expect(checkS3Signature(presignedExample(`/test.txt?${reordered}`), CREDENTIALS, SIGNED_AT)).toBeUndefined();
  });
});

describe('checkS3Signature refuses', () => {
  const mismatch = { code: 'SignatureDoesNotMatch' };

  it.each([
    { what: 'another object', request: headerExample({ url: '/other.txt' }) },
    { what: 'another method', request: headerExample({ method: 'DELETE' }) },
    { what: 'another range', request: headerExample({ headers: { range: 'bytes=0-99' } }) },
    { what: 'another payload', request: headerExample({ headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }) },
    { what: 'a query added', request: headerExample({ url: '/test.txt?acl' }) },
  ])('the header example changed to $what', ({ request }) => {
    expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toMatchObject(mismatch);
  });

  it.each([
    { what: 'another object', request: presignedExample(`/other.txt?${PRESIGNED_QUERY}`) },
    { what: 'a PUT', request: presignedExample(undefined, 'PUT') },
    {
      what: 'a longer life',
      request: presignedExample(`/test.txt?${PRESIGNED_QUERY.replace('X-Amz-Expires=86400', 'X-Amz-Expires=604800')}`),
    },
  ])('the presigned example changed to $what', ({ request }) => {
    expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toMatchObject(mismatch);
  });

  it('the presigned example after it expires', () => {
    expect(checkS3Signature(presignedExample(), CREDENTIALS, SIGNED_AT + 86_401_000)).toEqual({
      code: 'AccessDenied',
      message: 'Request has expired',
    });
  });

  it('a presigned URL dated more than 15 minutes ahead of the clock', () => {
    const early = SIGNED_AT - (MAX_CLOCK_SKEW_SECONDS + 1) * 1000;
    expect(checkS3Signature(presignedExample(), CREDENTIALS, early)).toMatchObject({ code: 'AccessDenied' });
    expect(checkS3Signature(presignedExample(), CREDENTIALS, early + 2000)).toBeUndefined();
  });

  it('a header signature from further than 15 minutes away', () => {
    const late = SIGNED_AT + (MAX_CLOCK_SKEW_SECONDS + 1) * 1000;
    expect(checkS3Signature(headerExample(), CREDENTIALS, late)).toMatchObject({ code: 'AccessDenied' });
    expect(checkS3Signature(headerExample(), CREDENTIALS, late - 2000)).toBeUndefined();
  });

  it('the right key with another secret', () => {
    const other = { ...CREDENTIALS, secretAccessKey: 'another secret' };
    expect(checkS3Signature(headerExample(), other, SIGNED_AT)).toMatchObject(mismatch);
    expect(checkS3Signature(presignedExample(), other, SIGNED_AT)).toMatchObject(mismatch);
  });

  it('another key, naming it as unknown', () => {
    const other = { ...CREDENTIALS, accessKeyId: 'AKIDOTHER0000EXAMPLE' };
    expect(checkS3Signature(headerExample(), other, SIGNED_AT)).toMatchObject({ code: 'InvalidAccessKeyId' });
  });

  it.each([
    { what: 'no signature', request: { method: 'GET', url: '/test.txt', headers: {} }, code: 'AccessDenied' },
    {
      what: 'a SigV2 header',
      request: { method: 'GET', url: '/test.txt', headers: { authorization: 'AWS AKIAIOSFODNN7EXAMPLE:c2ln' } },
      code: 'AccessDenied',
    },
    {
      what: 'a header signature without x-amz-content-sha256',
      request: headerExample({ headers: { 'x-amz-content-sha256': undefined as unknown as string } }),
      code: 'AccessDenied',
    },
    {
      what: 'a credential without its scope',
      request: presignedExample(
        `/test.txt?${PRESIGNED_QUERY.replace(/X-Amz-Credential=[^&]+/, 'X-Amz-Credential=AKIAIOSFODNN7EXAMPLE')}`,
      ),
      code: 'AuthorizationQueryParametersError',
    },
    {
      what: 'a raw + in the query (s3rver would read a space the signature does not cover)',
      request: presignedExample(`/test.txt?${PRESIGNED_QUERY}&response-content-type=a+b`),
      code: 'AuthorizationQueryParametersError',
    },
    {
      what: 'a credential scoped to another service',
      request: presignedExample(`/test.txt?${PRESIGNED_QUERY.replace('%2Fs3%2F', '%2Fdynamodb%2F')}`),
      code: 'AuthorizationQueryParametersError',
    },
    {
      what: 'a date outside the credential’s day',
      request: presignedExample(
        `/test.txt?${PRESIGNED_QUERY.replace('X-Amz-Date=20130524T000000Z', 'X-Amz-Date=20130525T000000Z')}`,
      ),
      code: 'AccessDenied',
    },
  ])('$what', ({ request, code }) => {
    expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toMatchObject({ code });
  });
});

describe('checkS3Signature refuses what S3 refuses beyond the signature', () => {
  it('an x-amz-* header the signature does not cover (a presigned upload sent with x-amz-copy-source)', () => {
    const request = {
      ...presignedExample(),
      headers: { host: 'examplebucket.s3.amazonaws.com', 'x-amz-copy-source': '/examplebucket/another-teams.tar' },
    };

    expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toEqual({
      code: 'AccessDenied',
      message: 'There were headers present in the request which were not signed: x-amz-copy-source',
    });
  });

  it('a signature that does not cover the host', () => {
    const request = presignedExample(
      `/test.txt?${PRESIGNED_QUERY.replace('X-Amz-SignedHeaders=host', 'X-Amz-SignedHeaders=range')}`,
    );

    expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toMatchObject({ code: 'AccessDenied' });
  });

  it.each(['constructor', '__proto__', 'hasOwnProperty'])(
    'a signed header named %s, without throwing (the headers object’s own properties only)',
    (name) => {
      const request = presignedExample(
        `/test.txt?${PRESIGNED_QUERY.replace('X-Amz-SignedHeaders=host', `X-Amz-SignedHeaders=host%3B${name}`)}`,
      );

      expect(checkS3Signature(request, CREDENTIALS, SIGNED_AT)).toMatchObject({ code: 'SignatureDoesNotMatch' });
    },
  );
});

describe('checkDynamoDbSignature', () => {
  const body = Buffer.from('{"TableName":"jobs"}');
  const at = new Date('2026-11-29T12:00:00Z');
  /** A ListTables request as the stores' client signs it, with `change` applied to its headers after signing. */
  function signed(change: (headers: Record<string, string>) => void = () => {}) {
    const headers = signRequest(
      {
        method: 'POST',
        host: '127.0.0.1:4567',
        path: '/',
        headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.ListTables' },
        body,
      },
      { region: 'us-east-1', service: 'dynamodb', credentials: CREDENTIALS, date: at },
    );
    change(headers);
    return { method: 'POST', url: '/', headers };
  }

  it('accepts what the client signs', () => {
    expect(checkDynamoDbSignature(signed(), body, CREDENTIALS, at.getTime())).toBeUndefined();
  });

  it.each([
    {
      what: 'no Authorization header',
      request: signed((h) => delete h.authorization),
      type: 'MissingAuthenticationTokenException',
    },
    {
      what: 'a malformed credential',
      request: signed((h) => {
        h.authorization = String(h.authorization).replace(
          /Credential=[^,]+/,
          'Credential=AKIAIOSFODNN7EXAMPLE/20261129',
        );
      }),
      type: 'IncompleteSignatureException',
    },
    {
      what: 'a scope of another service',
      request: signed((h) => {
        h.authorization = String(h.authorization).replace('/dynamodb/', '/s3/');
      }),
      type: 'InvalidSignatureException',
    },
    {
      what: 'a signed header changed on the way',
      request: signed((h) => {
        h['x-amz-target'] = 'DynamoDB_20120810.DeleteTable';
      }),
      type: 'InvalidSignatureException',
    },
    {
      what: 'a signature that does not cover the host',
      request: signed((h) => {
        h.authorization = String(h.authorization).replace('host;', '');
      }),
      type: 'InvalidSignatureException',
    },
  ])('refuses $what', ({ request, type }) => {
    expect(checkDynamoDbSignature(request, body, CREDENTIALS, at.getTime())?.type).toBe(type);
  });

  it('refuses a signature from further than 15 minutes away, and not one within', () => {
    const skew = MAX_CLOCK_SKEW_SECONDS * 1000;

    expect(checkDynamoDbSignature(signed(), body, CREDENTIALS, at.getTime() + skew)).toBeUndefined();
    expect(checkDynamoDbSignature(signed(), body, CREDENTIALS, at.getTime() + skew + 1000)?.message).toBe(
      "Signature expired: 20261129T120000Z is more than 15 minutes from the server's time",
    );
  });
});
