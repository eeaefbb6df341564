/**
 * SigV4 signing of API requests for a deployed stack (HTTP API with IAM authorization, service `execute-api`):
 * @smithy/signature-v4 with a node:crypto SHA-256, and credentials from the default AWS provider chain.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, Checksum, SourceData } from '@smithy/types';

/** SHA-256 (or HMAC-SHA256 when given a secret) in the shape the signer expects. */
export class NodeSha256 implements Checksum {
  private hash: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(this.secret));
  }
  /** Adds data to the digest. */
  update(data: Uint8Array | string): void {
    this.hash.update(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
  }
  /** The digest of everything added so far. */
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  /** Starts over (same secret). */
  reset(): void {
    this.hash = this.fresh();
  }
}

function toBuffer(data: SourceData): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

/** Supplies AWS credentials (static in tests, the default provider chain otherwise). */
export type CredentialProvider = () => Promise<AwsCredentialIdentity>;

/** A request to sign: absolute URL, method, headers (lower-case names) and body. */
export interface UnsignedRequest {
  readonly method: string;
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body?: string | Buffer;
}

/** The region of an execute-api host (`abc123.execute-api.eu-west-1.amazonaws.com`), if the host says it. */
export function regionFromApiUrl(url: URL): string | undefined {
  return /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$/.exec(url.hostname)?.[1];
}

/**
 * Signs a request for API Gateway (service `execute-api`): returns the headers to send, with `authorization`
 * (AWS4-HMAC-SHA256), `x-amz-date`, `x-amz-content-sha256` and, for temporary credentials, `x-amz-security-token`.
 */
export async function signRequest(
  request: UnsignedRequest,
  options: { region: string; credentials: CredentialProvider; now?: Date },
): Promise<Record<string, string>> {
  const body = request.body ?? '';
  const query: Record<string, string | string[]> = {};
  for (const [key, value] of request.url.searchParams) {
    const existing = query[key];
    query[key] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  const signer = new SignatureV4({
    service: 'execute-api',
    region: options.region,
    credentials: options.credentials,
    sha256: NodeSha256,
  });
  const signed = await signer.sign(
    {
      method: request.method,
      protocol: request.url.protocol,
      hostname: request.url.hostname,
      port: request.url.port === '' ? undefined : Number(request.url.port),
      path: request.url.pathname,
      query,
      headers: {
        ...request.headers,
        host: request.url.host,
        'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'),
      },
      body,
    },
    options.now ? { signingDate: options.now } : {},
  );
  return Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
}

/** The default AWS credential provider chain (env, SSO, shared config, process, IMDS/ECS), loaded on first use. */
export function defaultCredentials(): CredentialProvider {
  let provider: CredentialProvider | undefined;
  return async () => {
    if (!provider) {
      const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
      provider = defaultProvider();
    }
    return provider();
  };
}
