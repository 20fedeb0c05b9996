import { NodeConfig } from '../config/config-slices';
import { BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import type { ScheduleDto } from './schedule.dto';
import { SchedulesController } from './schedules.controller';
import { SchedulesService } from './schedules.service';

const APP = { 'X-SVC-Application-Name': 'app' };
const BODY = { name: 'nightly' } as unknown as ScheduleDto;
const VIEW = { id: 's1', selfUri: `${BASE}/svc/api/rest/admin/schedules/s1` };

describe('SchedulesController', () => {
  let schedules: Record<string, jest.Mock>;
  let controller: SchedulesController;
  const req = () => fakeRequest({ headers: APP });

  beforeEach(async () => {
    schedules = {
      list: jest.fn().mockResolvedValue([VIEW]),
      create: jest.fn().mockResolvedValue(VIEW),
      get: jest.fn().mockResolvedValue(VIEW),
      replace: jest.fn().mockResolvedValue(VIEW),
      remove: jest.fn(),
      setPaused: jest.fn().mockResolvedValue(VIEW),
    };
    controller = await controllerOf(SchedulesController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: SchedulesService, useValue: schedules },
    ]);
  });

  it("lists the application's schedules with links under the public base URL", async () => {
    expect(await controller.list(req())).toEqual({ schedules: [VIEW] });
    expect(schedules.list).toHaveBeenCalledWith('app', BASE);
  });

  it('creates a schedule: 201, the schedule, its Location', async () => {
    const answer = await controller.create(req(), BODY);
    expect(schedules.create).toHaveBeenCalledWith('app', BODY, BASE);
    expect(answer).toMatchObject({ status: 201, body: VIEW, headers: { Location: VIEW.selfUri } });
  });

  it('reads, replaces and removes a schedule of the application', async () => {
    expect(await controller.get(req(), 's1')).toBe(VIEW);
    expect(schedules.get).toHaveBeenCalledWith('app', 's1', BASE);
    expect(await controller.replace(req(), 's1', BODY)).toBe(VIEW);
    expect(schedules.replace).toHaveBeenCalledWith('app', 's1', BODY, BASE);
    await controller.remove(req(), 's1');
    expect(schedules.remove).toHaveBeenCalledWith('app', 's1');
  });

  it('pauses and resumes', async () => {
    await controller.pause(req(), 's1');
    await controller.resume(req(), 's1');
    expect(schedules.setPaused.mock.calls).toEqual([
      ['app', 's1', true, BASE],
      ['app', 's1', false, BASE],
    ]);
  });

  it('answers 400 without a valid X-SVC-Application-Name', async () => {
    await expect(controller.list(fakeRequest())).rejects.toMatchObject({ status: 400 });
    expect(schedules.list).not.toHaveBeenCalled();
  });
});
