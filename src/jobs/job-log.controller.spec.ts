import { StreamableFile } from '@nestjs/common';
import { of } from 'rxjs';
import { controllerOf } from '../../test/support/controller-testing';
import { JobLogController } from './job-log.controller';
import { JobLogService } from './job-log.service';

const JOB_ID = '0f8fad5b-d9cb-469f-a165-70867728950e';

describe('JobLogController', () => {
  it('follows the log live from the last event the client saw', async () => {
    const stream = of({ data: 'line' });
    const follow = jest.fn().mockResolvedValue(stream);
    const controller = await controllerOf(JobLogController, [
      { provide: JobLogService, useValue: { follow } },
    ]);
    expect(await controller.live('app', JOB_ID, '42')).toBe(stream);
    expect(follow).toHaveBeenCalledWith('app', JOB_ID, '42');
  });

  it('answers the stored text', async () => {
    const file = new StreamableFile(Buffer.from('text'));
    const plain = jest.fn().mockResolvedValue(file);
    const controller = await controllerOf(JobLogController, [
      { provide: JobLogService, useValue: { plain } },
    ]);
    expect(await controller.log('app', JOB_ID)).toBe(file);
    expect(plain).toHaveBeenCalledWith('app', JOB_ID);
  });
});
