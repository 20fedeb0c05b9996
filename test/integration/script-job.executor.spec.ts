import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClaimedJob, JobFileInput, ResultData } from '../../src/queue/queue.types';
import { ScriptJobExecutor } from '../../src/worker/script-job.executor';
import {
  ExecutorHarness,
  NATIVE_R,
  queueAndClaim,
  startExecutorHarness,
  ENVIRONMENT_RUNTIME_PROVIDERS,
} from '../support/executor-harness';
import { zipEntries } from '../support/zip-fixtures';

const describeNative = NATIVE_R ? describe : describe.skip;

/** What one script job gives its user, run by the executor on native R and the real database. */
describeNative(
  `ScriptJobExecutor${NATIVE_R ? '' : ' (skipped: needs native R, R_ENGINE=webr or no Rscript)'}`,
  () => {
    let harness: ExecutorHarness;
    let executor: ScriptJobExecutor;

    beforeAll(async () => {
      harness = await startExecutorHarness(() => [
        ScriptJobExecutor,
        ...ENVIRONMENT_RUNTIME_PROVIDERS,
      ]);
      executor = harness.module.get(ScriptJobExecutor);
    });

    afterAll(async () => {
      await harness?.close();
    });

    async function run(
      files: Record<string, string>,
      meta: Record<string, string> = {},
      applicationName = 'executor',
    ): Promise<{ result: ResultData; job: ClaimedJob }> {
      const inputs: JobFileInput[] = Object.entries(files).map(([name, content]) => ({
        name,
        content: Buffer.from(content),
      }));
      const job = await queueAndClaim(harness.queue, {
        applicationName,
        kind: 'script',
        files: inputs,
        meta,
      });
      return { result: await executor.execute(job, new AbortController().signal), job };
    }

    it('answers a ZIP of the files R wrote, subdirectories included, without the inputs', async () => {
      const { result } = await run(
        {
          'analysis.R': [
            'x <- read.csv("data.csv")$x',
            'writeLines(as.character(sum(x)), "sum.txt")',
            'dir.create("plots")',
            'pdf("plots/x.pdf"); plot(x); invisible(dev.off())',
            'writeLines(readLines("configuration.txt"), "seen-configuration.txt")',
            'cat("done\\n")',
          ].join('\n'),
          'data.csv': 'x\n1\n2\n3\n',
        },
        { colour: 'blue' },
      );
      expect(result).toMatchObject({ success: true, type: 'zip', contentType: 'application/zip' });
      const entries = await zipEntries(result.data);
      // Not analysis.R, data.csv, configuration.txt (the service's) nor out.log (R's console).
      expect([...entries.keys()].sort()).toEqual([
        'plots/x.pdf',
        'seen-configuration.txt',
        'sum.txt',
      ]);
      expect(entries.get('sum.txt')?.toString()).toBe('6\n');
      expect(entries.get('plots/x.pdf')?.subarray(0, 5).toString()).toBe('%PDF-');
      expect(entries.get('seen-configuration.txt')?.toString()).toMatch(/colour.*blue/);
    });

    it('answers a failed result with R’s own message when the script stops with an error', async () => {
      const { result, job } = await run({
        'analysis.R': 'fit <- function() stop("the model did not converge")\nfit()\n',
      });
      expect(result).toMatchObject({ success: false, type: 'txt' });
      const text = result.data.toString();
      expect(text).toMatch(
        new RegExp(`^Job ${job.id} of application executor, submitted .*, failed\\.\\n`),
      );
      expect(text).toContain('the model did not converge');
    });

    it('runs the catalog script the rScript meta parameter names, instead of one sent along', async () => {
      await harness.catalog.putFile(
        'executor',
        'R_SCRIPTS',
        'fit.R',
        Buffer.from('writeLines(toupper(readLines("data.txt")), "fitted.txt")\n'),
      );
      const { result } = await run(
        {
          'mine.R': 'writeLines("the job’s own script ran", "own.txt")\n',
          'data.txt': 'abc\n',
        },
        { rScript: 'fit.R' },
      );
      expect(result).toMatchObject({ success: true, type: 'zip' });
      const entries = await zipEntries(result.data);
      // The catalog's copy of fit.R is the service's, not a result.
      expect([...entries.keys()]).toEqual(['fitted.txt']);
      expect(entries.get('fitted.txt')?.toString()).toBe('ABC\n');
    });

    it('answers a failed result naming a catalog script that does not exist', async () => {
      const { result } = await run({ 'data.txt': 'abc\n' }, { rScript: 'missing.R' });
      expect(result).toMatchObject({ success: false, type: 'txt' });
      expect(result.data.toString()).toContain(
        'The catalog of application executor has no R script named "missing.R" (section R_SCRIPTS).',
      );
    });

    describe('with hostile output', () => {
      let canary: string;
      const SECRET = 'HOST-SECRET-4f1c9a';

      beforeAll(() => {
        canary = mkdtempSync(join(tmpdir(), 'svc-canary-'));
        writeFileSync(join(canary, 'secret.txt'), SECRET);
      });

      afterAll(() => {
        rmSync(canary, { recursive: true, force: true });
      });

      /** The executor's directory for this attempt of the job. */
      const jobDirectory = (job: ClaimedJob): string =>
        join(tmpdir(), 'svc-jobs', `${job.id}-${job.attempts}`);

      it('leaves links to host files and FIFOs out of the ZIP, follows none, and removes them', async () => {
        const { result, job } = await run({
          'analysis.R': [
            `stopifnot(file.symlink(${JSON.stringify(join(canary, 'secret.txt'))}, "secret.txt"))`,
            `stopifnot(file.symlink(${JSON.stringify(canary)}, "canary"))`,
            'stopifnot(file.symlink("/proc/self/environ", "environ.txt"))',
            'dir.create("plots")',
            `stopifnot(file.symlink(${JSON.stringify(join(canary, 'secret.txt'))}, "plots/secret.txt"))`,
            // Opening it for reading and writing creates the FIFO without waiting for a peer.
            'close(fifo("plots/hang.fifo", open = "w+"))',
            'stopifnot(file.exists("plots/hang.fifo"))',
            'writeLines("mine", "plots/mine.txt")',
          ].join('\n'),
        });
        expect(result).toMatchObject({ success: true, type: 'zip' });
        const entries = await zipEntries(result.data);
        expect([...entries.keys()]).toEqual(['plots/mine.txt']);
        expect(result.data.includes(SECRET)).toBe(false);
        expect(existsSync(jobDirectory(job))).toBe(false);
        expect(existsSync(join(canary, 'secret.txt'))).toBe(true);
      });

      it('answers a failed result naming a file name that is not UTF-8, and removes the directory', async () => {
        const { result, job } = await run({
          'analysis.R': [
            'writeLines("fine", "fine.txt")',
            'dir.create("plots")',
            // In the C locale R writes the name's bytes as they are.
            'invisible(Sys.setlocale("LC_CTYPE", "C"))',
            'writeLines("odd", file.path("plots", rawToChar(as.raw(c(0x62, 0xff)))))',
          ].join('\n'),
        });
        expect(result).toMatchObject({ success: false, type: 'txt' });
        expect(result.data.toString()).toContain(
          `The job's output cannot be returned: The file name "plots/b\\xff" is not valid UTF-8.`,
        );
        expect(existsSync(jobDirectory(job))).toBe(false);
      });
    });
  },
);
