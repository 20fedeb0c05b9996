import { setFlagsFromString } from 'node:v8';

/**
 * The young generation's size: 8 MiB per semi-space (Node 20's default is 16). Node 24's V8 lets
 * it grow to several times that under a stream of short-lived strings (a job printing 500 MB of
 * lines) and keeps it committed afterwards: the node stayed some 100 MiB larger for good, and
 * with 16 MiB still 68 MiB larger on a busy machine. Set before anything is allocated in
 * quantity; an operator's own --max-semi-space-size (in NODE_OPTIONS) wins.
 */
if (
  !/--max-semi-space-size/.test(`${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`)
) {
  setFlagsFromString('--max-semi-space-size=8');
}
