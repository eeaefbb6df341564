// `trainyard local` in a terminal that goes away (an SSH session that ends): the hangup stops it as Ctrl-C does,
// attempts killed and the folder released, though nothing can be printed any more (every write fails with EIO).
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, tempDir } from './support';

const folder = tempDir('hangup');
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe('trainyard local when its terminal hangs up', () => {
  it('kills its running attempts and releases its folder', () => {
    const run = spawnSync('/usr/bin/python3', [join(ROOT, 'test', 'e2e', 'hangup.py'), ROOT, folder], {
      encoding: 'utf8',
      timeout: 170_000,
    });
    const report = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
      started?: boolean;
      submitted?: number;
      attemptProcessesBefore?: number;
      leftOver?: number[];
      files?: string[];
    };
    expect(report.started, run.stderr).toBe(true);
    expect(report.submitted).toBe(0);
    expect(report.attemptProcessesBefore).toBeGreaterThan(0);
    // A write to the gone terminal no longer ends the process inside its stop, before the attempts are killed.
    expect(report.leftOver).toEqual([]);
    expect(report.files).not.toContain('local.lock');
    expect(report.files).not.toContain('local.json');
  });
});
