// How local mode and the demo hear that they must stop: the signals of Ctrl-C, `trainyard local stop` and a closed
// terminal, and what a second one does while they stop. Signals are emitted on `process`, which runs the listeners
// as a delivered signal would, without one reaching the test runner.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { onStopSignal } from '../../lib/local/cli-commands';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('onStopSignal', () => {
  it.each(['SIGINT', 'SIGTERM', 'SIGHUP'] as const)('stops on %s', async (name) => {
    const stop = onStopSignal(true);
    try {
      process.emit(name, name);
      await expect(stop.signal).resolves.toBe(name);
    } finally {
      stop.dispose();
    }
  });

  it('answers a second signal while stopping with a line, not by dying; dispose stops listening', async () => {
    const before = process.listenerCount('SIGINT');
    const beforeHup = process.listenerCount('SIGHUP');
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const stop = onStopSignal(true);
    expect(process.listenerCount('SIGINT')).toBe(before + 1);

    process.emit('SIGINT', 'SIGINT');
    process.emit('SIGINT', 'SIGINT');

    await expect(stop.signal).resolves.toBe('SIGINT');
    expect(stderr).toHaveBeenCalledWith(
      'SIGINT: local mode is already stopping (killing attempts, closing the engines)…\n',
    );
    stop.dispose();
    expect(process.listenerCount('SIGINT')).toBe(before);
    expect(process.listenerCount('SIGHUP')).toBe(beforeHup);
  });

  it('without a terminal (nohup, a service) answers a hangup with a line and goes on; other signals still stop it', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const stop = onStopSignal(false);
    try {
      const heard: string[] = [];
      void stop.signal.then((name) => heard.push(name));
      process.emit('SIGHUP', 'SIGHUP');
      await new Promise((done) => setImmediate(done));
      expect(heard).toEqual([]);
      expect(stderr).toHaveBeenCalledWith(
        'SIGHUP: ignored, local mode has no terminal (started with nohup or as a service); `trainyard local stop` stops it\n',
      );
      process.emit('SIGTERM', 'SIGTERM');
      await expect(stop.signal).resolves.toBe('SIGTERM');
    } finally {
      stop.dispose();
    }
  });
});
