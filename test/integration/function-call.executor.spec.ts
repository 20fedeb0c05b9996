import { payloadFileName, type FunctionCallKind } from '../../src/job-core/function-call-result';
import type { ResultData } from '../../src/queue/queue.types';
import { missingFunctionMessage } from '../../src/r-engine/function-call-engine';
import { FUNCTION_CALL_PROVIDERS } from '../../src/r-engine/function-call.providers';
import { FunctionCallJobExecutor } from '../../src/worker/function-call.executor';
import {
  ExecutorHarness,
  NATIVE_R,
  queueAndClaim,
  startExecutorHarness,
  ENVIRONMENT_RUNTIME_PROVIDERS,
} from '../support/executor-harness';
import { FAILURE_FUNCTIONS } from '../support/function-calls';
import { SERVER_DATABASE_URL } from '../support/test-service';

// The function libraries follow catalog changes on a LISTEN connection to the server.
const runs = NATIVE_R && SERVER_DATABASE_URL !== null;
const describeNativeOnServer = runs ? describe : describe.skip;

/** An application whose functions answer a JSON and an XML document built from the payload. */
const ANSWERING_FUNCTIONS = `
svcJsonService <- function(payload) sprintf('{"received":%d}', nchar(payload))
svcXmlService <- function(payload) sprintf('<answer received="%d"/>', nchar(payload))
`;

/** What one function-call job gives its user, run by the executor on native R's session pool. */
describeNativeOnServer(
  `FunctionCallJobExecutor${runs ? '' : ' (skipped: needs native R and DATABASE_URL)'}`,
  () => {
    let harness: ExecutorHarness;
    let executor: FunctionCallJobExecutor;

    beforeAll(async () => {
      harness = await startExecutorHarness(() => [
        FunctionCallJobExecutor,
        // The function libraries read from the catalog and the session pool, as a node has them.
        ...FUNCTION_CALL_PROVIDERS,
        ...ENVIRONMENT_RUNTIME_PROVIDERS,
      ]);
      executor = harness.module.get(FunctionCallJobExecutor);
      await harness.catalog.putFile(
        'answers',
        'R_FUNCTIONS',
        'answers.R',
        Buffer.from(ANSWERING_FUNCTIONS),
      );
      await harness.catalog.putFile(
        'calls',
        'R_FUNCTIONS',
        'calls.R',
        Buffer.from(FAILURE_FUNCTIONS),
      );
    });

    afterAll(async () => {
      await harness?.close();
    });

    async function call(
      applicationName: string,
      kind: FunctionCallKind,
      payload: string,
    ): Promise<ResultData> {
      const job = await queueAndClaim(harness.queue, {
        applicationName,
        kind,
        files: [{ name: payloadFileName(kind), content: Buffer.from(payload) }],
      });
      return executor.execute(job, new AbortController().signal);
    }

    it('answers the JSON the application’s svcJsonService returned', async () => {
      const result = await call('answers', 'json', '{"n":12345}');
      expect(result).toMatchObject({
        success: true,
        type: 'json',
        contentType: expect.stringMatching(/^application\/json/),
      });
      expect(JSON.parse(result.data.toString())).toEqual({ received: 11 });
    });

    it('answers the XML the application’s svcXmlService returned', async () => {
      const result = await call('answers', 'xml', '<n>1</n>');
      expect(result).toMatchObject({
        success: true,
        type: 'xml',
        contentType: expect.stringMatching(/xml/),
      });
      expect(result.data.toString()).toBe('<answer received="8"/>');
    });

    it('answers an error result when the application defines no such function', async () => {
      const result = await call('calls', 'xml', '<n>1</n>');
      expect(result).toMatchObject({ success: false, type: 'xml' });
      expect(result.data.toString()).toContain(missingFunctionMessage('calls', 'svcXmlService'));
    });

    it('answers an error result with R’s message when the function stops', async () => {
      const result = await call('calls', 'json', 'error');
      expect(result).toMatchObject({ success: false, type: 'json' });
      expect(JSON.parse(result.data.toString())).toMatchObject({
        applicationName: 'calls',
        errorMessage: expect.stringContaining('the analysis failed: bad input'),
      });
    });
  },
);
