import { currentLogContext, runWithLogContext } from './log-context';
import { outsideRequests } from './outside-requests';
import { currentRequestActor, identifyRequestActor, runAsRequest } from './request-actor';

describe('outsideRequests', () => {
  it("runs work a request arms, and the timers it arms, without the request's actor or log context", async () => {
    const seen = await new Promise<unknown[]>((resolve) => {
      runWithLogContext({ requestId: 'req-1' }, () =>
        runAsRequest('req-1', '203.0.113.7', () => {
          identifyRequestActor('alice', 'user');
          outsideRequests(() => {
            const now = [currentRequestActor(), currentLogContext()];
            setTimeout(() => resolve([...now, currentRequestActor(), currentLogContext()]), 1);
          });
        }),
      );
    });
    expect(seen).toEqual([null, {}, null, {}]);
  });

  it('leaves the request its own context', () => {
    runAsRequest('req-2', null, () => {
      outsideRequests(() => undefined);
      expect(currentRequestActor()?.requestId).toBe('req-2');
    });
  });
});
