import { StreamableFile } from '@nestjs/common';
import { lastValueFrom, of, toArray } from 'rxjs';
import {
  controllerOf,
  eventStreamOf,
  fakeRequest,
  UNCHANGING_RIGHTS,
} from '../../test/support/controller-testing';
import { RestApiConfig } from '../config/config-slices';
import { EventStreamQuota } from '../security/event-stream-quota';
import { JobLogController } from './job-log.controller';
import { JobLogService } from './job-log.service';

const JOB_ID = '0f8fad5b-d9cb-469f-a165-70867728950e';

describe('JobLogController', () => {
  it('follows the log live from the last event the client saw', async () => {
    const follow = jest.fn().mockResolvedValue(eventStreamOf(of({ data: 'line' })));
    const controller = await controllerOf(JobLogController, [
      { provide: JobLogService, useValue: { follow } },
      EventStreamQuota,
      UNCHANGING_RIGHTS,
      { provide: RestApiConfig, useValue: { eventStreamsPerCaller: 1 } },
    ]);
    const live = await controller.live(fakeRequest(), 'app', JOB_ID, '42');
    expect(await lastValueFrom(live.asObservable().pipe(toArray()))).toEqual([{ data: 'line' }]);
    expect(follow).toHaveBeenCalledWith('app', JOB_ID, '42');
    // The stream ended: the caller's one stream is free again.
    await controller.live(fakeRequest(), 'app', JOB_ID, '42');
  });

  it('answers the stored text', async () => {
    const file = new StreamableFile(Buffer.from('text'));
    const plain = jest.fn().mockResolvedValue(file);
    const controller = await controllerOf(JobLogController, [
      { provide: JobLogService, useValue: { plain } },
      EventStreamQuota,
      UNCHANGING_RIGHTS,
      { provide: RestApiConfig, useValue: { eventStreamsPerCaller: 1 } },
    ]);
    expect(await controller.log('app', JOB_ID)).toBe(file);
    expect(plain).toHaveBeenCalledWith('app', JOB_ID);
  });
});
