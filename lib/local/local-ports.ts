/**
 * The control plane's ports in local mode (see lambdas/shared/ports.ts): events go to `.trainyard/events.jsonl`
 * (and optionally the console), container logs are read from `.trainyard/logs/<stream>.log` (written by the local
 * Batch runner), and fleet facts come from the runner's own instances. Same interfaces as the AWS adapters in
 * aws-ports.ts, so every handler runs unchanged.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { appendFile, open } from 'node:fs/promises';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import type { EventEntry } from '../../lambdas/domain/events';
import {
  type EventPublisher,
  type FleetFacts,
  type InstanceFacts,
  InvalidLogPosition,
  type LogPage,
  type LogReader,
} from '../../lambdas/shared/ports';
import { LOCAL_ACCOUNT, LOCAL_REGION } from './batch-runner';
import { awsTimestamp } from './fake-imds';

/** One line of `.trainyard/events.jsonl`: the event as an EventBridge rule target receives it. */
export interface LocalBusEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: string[];
  readonly detail: Record<string, unknown>;
}

/** Raised when an entry's Detail is not a JSON object (PutEvents rejects it as MalformedDetail). */
export class MalformedDetail extends Error {
  override name = 'MalformedDetail';
}

/** One readable console line for an event: `Job Started  job=j1 team=vision attempt=1 capacity=spot`. */
export function formatEventLine(event: Pick<LocalBusEvent, 'detail-type' | 'detail'>): string {
  const shown = [
    'jobId',
    'team',
    'attempt',
    'capacity',
    'cause',
    'outcome',
    'scope',
    'period',
    'thresholdPercent',
    'costUsd',
  ];
  const labels: Record<string, string> = { jobId: 'job' };
  const fields = shown
    .filter((key) => event.detail[key] !== undefined)
    .map((key) => `${labels[key] ?? key}=${String(event.detail[key])}`);
  const reason = typeof event.detail.reason === 'string' ? ` — ${event.detail.reason}` : '';
  return `${event['detail-type']}  ${fields.join(' ')}${reason}`;
}

/**
 * PutEvents locally: each entry becomes one JSON line in `eventsFile`, shaped as the bus delivers it, and is printed
 * through `print` when given. One publish call is one append, so a line is never interleaved with another's.
 */
export function localEventPublisher(options: {
  eventsFile: string;
  print?: (line: string) => void;
  now?: () => number;
}): EventPublisher {
  const now = options.now ?? Date.now;
  return {
    async publish(entries: readonly EventEntry[]) {
      if (entries.length === 0) return;
      const events = entries.map((entry, index): LocalBusEvent => {
        let detail: unknown;
        try {
          detail = JSON.parse(entry.Detail);
        } catch (error) {
          throw new MalformedDetail(
            `entry ${index} (${entry.DetailType}) Detail is not JSON: ${(error as Error).message}`,
          );
        }
        if (typeof detail !== 'object' || detail === null || Array.isArray(detail)) {
          throw new MalformedDetail(`entry ${index} (${entry.DetailType}) Detail must be a JSON object`);
        }
        return {
          version: '0',
          id: randomUUID(),
          'detail-type': entry.DetailType,
          source: entry.Source,
          account: LOCAL_ACCOUNT,
          time: awsTimestamp(now()),
          region: LOCAL_REGION,
          resources: [],
          detail: detail as Record<string, unknown>,
        };
      });
      mkdirSync(dirname(options.eventsFile), { recursive: true });
      await appendFile(options.eventsFile, events.map((e) => `${JSON.stringify(e)}\n`).join(''));
      if (options.print) for (const event of events) options.print(formatEventLine(event));
    },
  };
}

const TAIL_CHUNK_BYTES = 64 * 1024;

type LogHandle = Awaited<ReturnType<typeof open>>;

/**
 * GetLogEvents locally, from `<logsDir>/<logStreamName>.log`: the last `limit` complete lines, or a page of complete
 * lines read from a byte offset (a position is the offset as a decimal string); a line still being written is left
 * for the next read. A stream that does not exist, or a name that would leave `logsDir`, has no lines (CloudWatch
 * would answer ResourceNotFound).
 */
export function localLogReader(logsDir: string): LogReader {
  const openStream = async (logStreamName: string): Promise<LogHandle | undefined> => {
    const relative = normalize(`${logStreamName}.log`);
    if (isAbsolute(relative) || relative.split(sep).includes('..')) return undefined;
    try {
      return await open(join(logsDir, relative), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  };
  return {
    async readLines(logStreamName, start, limit): Promise<LogPage> {
      const after = typeof start === 'object' ? byteOffsetOf(start.after) : undefined;
      const handle = await openStream(logStreamName);
      if (!handle) return { lines: [], ...(after !== undefined && { next: String(after) }), atEnd: true };
      try {
        const { size } = await handle.stat();
        if (after !== undefined && after > size) {
          throw new InvalidLogPosition(`byte ${after} is past the end of the log, which holds ${size} bytes`);
        }
        return start === 'tail' ? await tailPage(handle, size, limit) : await pageFrom(handle, after ?? 0, size, limit);
      } finally {
        await handle.close();
      }
    },
  };
}

/** A local log position: a byte offset written as a decimal string. */
function byteOffsetOf(position: string): number {
  if (!/^\d{1,15}$/.test(position)) {
    throw new InvalidLogPosition(`"${position.slice(0, 40)}" is not a byte offset into a local log`);
  }
  return Number(position);
}

/** The end of a log, read backwards in chunks until more than `limit` newlines are in hand (or the file is read). */
async function readTail(handle: LogHandle, size: number, limit: number): Promise<{ bytes: Buffer; position: number }> {
  let position = size;
  let newlines = 0;
  const chunks: Buffer[] = [];
  while (position > 0 && newlines <= limit) {
    const length = Math.min(TAIL_CHUNK_BYTES, position);
    position -= length;
    const chunk = Buffer.alloc(length);
    await handle.read(chunk, 0, length, position);
    chunks.unshift(chunk);
    for (const byte of chunk) if (byte === 0x0a) newlines += 1;
  }
  // Decoded by the caller, whole: a chunk boundary may fall inside a multi-byte character.
  return { bytes: Buffer.concat(chunks), position };
}

/** The last `limit` complete lines and the offset after them (a line still being written is left for later). */
async function tailPage(handle: LogHandle, size: number, limit: number): Promise<LogPage> {
  const { bytes, position } = await readTail(handle, size, limit);
  const end = bytes.lastIndexOf(0x0a) + 1;
  const pieces = bytes.subarray(0, end).toString('utf8').split('\n');
  pieces.pop();
  // The first piece may be a partial line when the read stopped mid-file; it falls outside the last `limit`.
  return { lines: limit > 0 ? pieces.slice(-limit) : [], next: String(position + end), atEnd: true };
}

/** Up to `limit` complete lines from byte `from` and the offset after them. */
async function pageFrom(handle: LogHandle, from: number, size: number, limit: number): Promise<LogPage> {
  const chunks: Buffer[] = [];
  let position = from;
  let newlines = 0;
  while (position < size && newlines < limit) {
    const chunk = Buffer.alloc(Math.min(TAIL_CHUNK_BYTES, size - position));
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) break;
    const read = chunk.subarray(0, bytesRead);
    chunks.push(read);
    position += bytesRead;
    for (const byte of read) if (byte === 0x0a) newlines += 1;
  }
  const bytes = Buffer.concat(chunks);
  // End after the `limit`-th newline, or the last one: a line still being written is left for the next read.
  let end = 0;
  let count = 0;
  for (let i = 0; i < bytes.length && count < limit; i++) {
    if (bytes[i] === 0x0a) {
      count += 1;
      end = i + 1;
    }
  }
  const lines = bytes.subarray(0, end).toString('utf8').split('\n');
  lines.pop();
  const next = from + end;
  return { lines, next: String(next), atEnd: count < limit || next === size };
}

/**
 * FleetFacts locally: instance facts from the local Batch runner (instance type from the tier, AZ `local-1a`,
 * lifecycle from the queue's capacity); no spot price history, so callers fall back to the config's spot price.
 * Spot capacity is always available: the local runner starts every spot attempt at once (it has no capacity
 * outages; its only spot event is an interruption notice to a running attempt), so the probe answers true.
 */
export function localFleetFacts(lookup: (containerInstanceArn: string) => InstanceFacts | undefined): FleetFacts {
  return {
    async instanceFor(containerInstanceArn) {
      return lookup(containerInstanceArn);
    },
    async spotPriceAt() {
      return undefined;
    },
    async spotCapacityAvailable() {
      return true;
    },
  };
}
