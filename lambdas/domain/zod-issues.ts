/** One way of saying what failed validation, shared by every schema boundary: `path: message; path: message`. */
import type * as z from 'zod';

/** `attempts[0].container.exitCode: expected number, received string; …` (`(root)` for the value itself). */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => {
      const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
      return `${path.replace(/^\./, '') || '(root)'}: ${issue.message}`;
    })
    .join('; ');
}
