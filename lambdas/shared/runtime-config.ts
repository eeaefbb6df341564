/**
 * The resolved Trainyard configuration at run time. The CDK app bakes the config it deployed into each function's
 * bundle (esbuild `define` of process.env.TRAINYARD_CONFIG), so there is no size limit and no extra call at cold
 * start; local mode and tests set the same variable. Parsed with the same schema as at synth.
 */
import { parseConfig, type TrainyardConfig } from '../../lib/config';
import { MissingEnvironment } from './env';

/** Name of the variable carrying the resolved configuration as JSON. */
export const CONFIG_VARIABLE = 'TRAINYARD_CONFIG';

/** Parses the configuration baked into the bundle (or set in the environment). */
export function configFromEnv(): TrainyardConfig {
  // Written out literally: esbuild's define replaces exactly this expression, never process.env[name].
  const json = process.env.TRAINYARD_CONFIG;
  if (json === undefined || json === '') {
    throw new MissingEnvironment(
      `${CONFIG_VARIABLE} is not set: the function's bundle must be built by TrainyardFunction with its config`,
    );
  }
  return parseConfig(JSON.parse(json), CONFIG_VARIABLE);
}
