/**
 * Fits the fleet spot model from the spot traces (bench/spot/traces.ts: $TRAINYARD_SPOT_TRACES or ../shared/data)
 * and prints the source of lambdas/domain/spot-fleet-model.ts; `--write` rewrites (and formats) that file, `--check`
 * exits 1 when its hazards differ from a fresh fit.
 *
 *   npx tsx scripts/fit-spot-model.ts [--write | --check]
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { fitFleetModel, fleetModelSource } from '../bench/spot/spot-model';
import { loadTraces } from '../bench/spot/traces';
import { FLEET_SPOT_MODEL } from '../lambdas/domain/spot-fleet-model';
import { roundedSpotLengthModel } from '../lambdas/domain/spot-planner';

const TARGET = path.join(import.meta.dirname, '..', 'lambdas', 'domain', 'spot-fleet-model.ts');
const MODES = ['--write', '--check'] as const;

function main(args: readonly string[]): number {
  if (args.length > 1 || args.some((a) => !(MODES as readonly string[]).includes(a))) {
    process.stderr.write(`usage: npx tsx scripts/fit-spot-model.ts [--write | --check]; got ${args.join(' ')}\n`);
    return 2;
  }
  const traces = loadTraces();
  const model = fitFleetModel(traces);
  if (args[0] === '--check') {
    if (isDeepStrictEqual(roundedSpotLengthModel(model), FLEET_SPOT_MODEL)) return 0;
    process.stderr.write(`${TARGET} is stale: run npx tsx scripts/fit-spot-model.ts --write\n`);
    return 1;
  }
  const source = fleetModelSource(
    model,
    traces.map((t) => t.name),
  );
  if (args[0] === '--write') {
    writeFileSync(TARGET, source);
    execFileSync('npx', ['biome', 'format', '--write', TARGET], { stdio: 'ignore' });
    process.stdout.write(`wrote ${TARGET} from ${traces.length} traces\n`);
    return 0;
  }
  process.stdout.write(source);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
