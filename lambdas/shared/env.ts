/** Environment access for Lambda handlers: read once at cold start, fail fast naming the variable. */

/** Raised at cold start when a required variable is missing. */
export class MissingEnvironment extends Error {
  override name = 'MissingEnvironment';
}

/** The value of a required environment variable. */
export function requireEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') {
    throw new MissingEnvironment(`environment variable ${name} is not set; the function's stack must provide it`);
  }
  return value;
}
