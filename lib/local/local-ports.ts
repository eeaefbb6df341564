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
import type { EventPublisher, FleetFacts, InstanceFacts, LogReader } from '../../lambdas/shared/ports';
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

/**
 * GetLogEvents locally: the last `limit` lines of `<logsDir>/<logStreamName>.log`, oldest first; [] for a stream that
 * does not exist or a name that would leave `logsDir` (CloudWatch would answer ResourceNotFound).
 */
export function localLogReader(logsDir: string): LogReader {
  return {
    async recentLines(logStreamName, limit) {
      if (limit <= 0) return [];
      const relative = normalize(`${logStreamName}.log`);
      if (isAbsolute(relative) || relative.split(sep).includes('..')) return [];
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(join(logsDir, relative), 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
      try {
        // Read backwards in chunks until `limit` complete lines are in hand, so a long log is not read whole.
        const { size } = await handle.stat();
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
        // Decoded once, whole: a chunk boundary may fall inside a multi-byte character.
        const text = Buffer.concat(chunks).toString('utf8');
        const lines = text.split('\n');
        if (lines.at(-1) === '') lines.pop();
        // The first piece may be a partial line when the read stopped mid-file; it falls outside the last `limit`.
        return lines.slice(-limit);
      } finally {
        await handle.close();
      }
    },
  };
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
