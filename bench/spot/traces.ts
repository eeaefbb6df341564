/**
 * Loads the public spot availability traces of "Can't Be Late" (NSDI '24): `{ metadata: { gap_seconds }, data: [...] }`
 * where a tick value >= 1 means spot capacity was available during that tick and 0 means it was not.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** One availability trace, reduced to what the simulator needs. */
export interface SpotTrace {
  /** Path relative to the traces root, e.g. `availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json`. */
  name: string;
  /** Length of one tick in seconds. */
  gapSeconds: number;
  /** 1 where spot was available during the tick, 0 where it was not. */
  available: Uint8Array;
}

/** Thrown when a trace file does not have the documented shape. */
export class InvalidTraceFile extends Error {
  override name = 'InvalidTraceFile';
}

/**
 * Where the traces are: $TRAINYARD_SPOT_TRACES, else the team's shared data beside the repository
 * (`<repo>/../shared/data/spot-traces`, as on developers' machines and in CI).
 */
export const DEFAULT_TRACES_ROOT =
  process.env.TRAINYARD_SPOT_TRACES ?? join(import.meta.dirname, '..', '..', '..', 'shared', 'data', 'spot-traces');

/** Parses a trace file's JSON text; `name` is used in error messages and the result. */
export function parseTrace(name: string, text: string): SpotTrace {
  const raw: unknown = JSON.parse(text);
  if (typeof raw !== 'object' || raw === null) throw new InvalidTraceFile(`${name}: expected a JSON object`);
  const { metadata, data } = raw as { metadata?: { gap_seconds?: unknown }; data?: unknown };
  const gap = metadata?.gap_seconds;
  if (typeof gap !== 'number' || !Number.isInteger(gap) || gap <= 0)
    throw new InvalidTraceFile(`${name}: metadata.gap_seconds must be a positive integer, got ${String(gap)}`);
  if (!Array.isArray(data) || data.length === 0)
    throw new InvalidTraceFile(`${name}: data must be a non-empty array of instance counts`);
  const available = new Uint8Array(data.length);
  data.forEach((value: unknown, index) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
      throw new InvalidTraceFile(`${name}: data[${index}] must be a count >= 0, got ${String(value)}`);
    // A count of 1 or more instances means spot was available; 0 means it was not (the classic bug reads 0 as "up").
    available[index] = value >= 1 ? 1 : 0;
  });
  return { name, gapSeconds: gap, available };
}

function listJsonFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((entry) => {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) return listJsonFiles(path);
      return entry.endsWith('.json') ? [path] : [];
    });
}

/** Loads every `*.json` trace under `root`, sorted by path. */
export function loadTraces(root: string = DEFAULT_TRACES_ROOT): SpotTrace[] {
  return listJsonFiles(root).map((path) => parseTrace(relative(root, path), readFileSync(path, 'utf8')));
}
