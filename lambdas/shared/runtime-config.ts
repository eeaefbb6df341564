/**
 * The resolved Trainyard configuration at run time. The CDK app bakes the config it deployed into each function's
 * bundle (esbuild `define` of process.env.TRAINYARD_CONFIG), so there is no size limit and no extra call at cold
 * start; local mode and tests set the same variable. Parsed with the same schema as at synth.
 */
import { parseConfig, type TrainyardConfig } from '../../lib/config';
import { requireEnv } from './env';

/** Name of the variable carrying the resolved configuration as JSON. */
export const CONFIG_VARIABLE = 'TRAINYARD_CONFIG';

/** Parses the configuration from the environment. */
export function configFromEnv(): TrainyardConfig {
  return parseConfig(JSON.parse(requireEnv(CONFIG_VARIABLE)), CONFIG_VARIABLE);
}
