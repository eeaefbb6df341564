/**
 * How validation failures read, shared by every schema boundary. Trainyard's schemas use `zod/mini`, which Lambda
 * bundles can tree-shake (classic `zod` is some 96 KiB of every bundle), but which ships no messages of its own:
 * importing this module installs zod's English ones. Every module that builds schemas imports it.
 */
import { en } from 'zod/locales';
import * as z from 'zod/mini';

z.config(en());

/** `attempts[0].container.exitCode: expected number, received string; …` (`(root)` for the value itself). */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => {
      const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
      return `${path.replace(/^\./, '') || '(root)'}: ${issue.message}`;
    })
    .join('; ');
}
