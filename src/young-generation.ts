/**
 * The young generation's size: 8 MiB per semi-space. Node 24's V8 lets the semi-spaces grow to
 * 32 MiB each (64 MiB of new space here, Node 20 stops at 16) under a stream of short-lived strings
 * such as a job printing 500 MB of lines, and keeps them committed: the node stayed 80-120 MiB
 * larger for good (docs/performance.md). V8 sizes its heap when the process starts, so the flag
 * set at run time (v8.setFlagsFromString) changes nothing; the process therefore replaces itself
 * with the same command plus `--max-semi-space-size=8` (process.execve: the same pid, standard
 * streams and environment) before anything else runs. Where Node has no process.execve (Node 20,
 * whose V8 keeps the semi-spaces at 16 MiB) it goes on as it is. An operator's own
 * --max-semi-space-size (on the command line or in NODE_OPTIONS) wins.
 */
const SEMI_SPACE_FLAG = '--max-semi-space-size';
const SEMI_SPACE_MIB = 8;

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`.includes(
  SEMI_SPACE_FLAG,
);
const execve = (process as unknown as { execve?: Execve }).execve;
if (!given && typeof execve === 'function') {
  execve.call(
    process,
    process.execPath,
    [
      process.execPath,
      `${SEMI_SPACE_FLAG}=${SEMI_SPACE_MIB}`,
      ...process.execArgv,
      ...process.argv.slice(1),
    ],
    process.env,
  );
}
