import { spawn, type SpawnOptions } from 'node:child_process';

/** Runs a command to its end and collects what it printed on each stream. */
export async function runCommand(
  command: string,
  args: string[],
  options: Pick<SpawnOptions, 'env' | 'cwd'> = {},
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | string>((resolve) =>
    child.once('close', (exitCode, signal) => resolve(exitCode ?? signal ?? -1)),
  );
  return { code, stdout, stderr };
}
