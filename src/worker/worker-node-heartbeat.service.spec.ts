import { Test } from '@nestjs/testing';
import { SERVICE_VERSION } from '../config/app-config';
import { NodeConfig, QueueConfig } from '../config/config-slices';
import { R_ENGINE } from '../r-engine/r-engine';
import { WorkerNodesRepository } from '../queue/worker-nodes.repository';
import { NodeIdentity } from '../storage/node-identity';
import { WorkerNodeHeartbeat } from './worker-node-heartbeat.service';
import { WorkerService } from './worker.service';

describe('WorkerNodeHeartbeat', () => {
  let nodes: { beat: jest.Mock; remove: jest.Mock };
  let slots: { slots: number; busy: number };
  let heartbeat: WorkerNodeHeartbeat;
  const node = new NodeIdentity();

  beforeEach(async () => {
    jest.useFakeTimers();
    nodes = {
      beat: jest.fn().mockResolvedValue(undefined),
      remove: jest.fn().mockResolvedValue(undefined),
    };
    slots = { slots: 3, busy: 0 };
    const module = await Test.createTestingModule({
      providers: [
        WorkerNodeHeartbeat,
        { provide: WorkerNodesRepository, useValue: nodes },
        {
          provide: WorkerService,
          useValue: {
            get rSlots() {
              return { ...slots };
            },
          },
        },
        { provide: NodeIdentity, useValue: node },
        { provide: NodeConfig, useValue: { role: 'worker' } },
        // R_ENGINE=auto chose native R: the heartbeat names the engine, not the setting.
        { provide: R_ENGINE, useValue: { kind: 'native' } },
        { provide: QueueConfig, useValue: { heartbeatSeconds: 5 } },
      ],
    }).compile();
    heartbeat = module.get(WorkerNodeHeartbeat);
  });

  afterEach(async () => {
    await heartbeat.onApplicationShutdown();
    jest.useRealTimers();
  });

  it('reports the node at start and every HEARTBEAT_SECONDS, with its slots as they are then', async () => {
    await heartbeat.onApplicationBootstrap();
    expect(nodes.beat).toHaveBeenCalledWith({
      nodeId: node.id,
      role: 'worker',
      rEngine: 'native',
      slots: 3,
      busy: 0,
      version: SERVICE_VERSION,
      startedAt: expect.any(Date) as Date,
      memoryBytes: expect.any(Number) as number,
    });
    // The process's start, not the heartbeat's.
    const [[report]] = nodes.beat.mock.calls as Array<[{ startedAt: Date }]>;
    expect(report.startedAt.getTime()).toBeLessThanOrEqual(
      Date.now() - process.uptime() * 1000 + 1000,
    );
    slots.busy = 2;
    jest.advanceTimersByTime(4999);
    expect(nodes.beat).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(1);
    expect(nodes.beat).toHaveBeenCalledTimes(2);
    expect(nodes.beat).toHaveBeenLastCalledWith(expect.objectContaining({ busy: 2 }));
  });

  it('deletes its row when the node stops, and beats no more', async () => {
    await heartbeat.onApplicationBootstrap();
    await heartbeat.onApplicationShutdown();
    expect(nodes.remove).toHaveBeenCalledWith(node.id);
    jest.advanceTimersByTime(20000);
    expect(nodes.beat).toHaveBeenCalledTimes(1);
  });

  it('keeps beating after a failed heartbeat, and stops quietly when the database is gone', async () => {
    nodes.beat.mockRejectedValueOnce(new Error('connection lost'));
    await expect(heartbeat.onApplicationBootstrap()).resolves.toBeUndefined();
    jest.advanceTimersByTime(5000);
    expect(nodes.beat).toHaveBeenCalledTimes(2);
    nodes.remove.mockRejectedValueOnce(new Error('connection lost'));
    await expect(heartbeat.onApplicationShutdown()).resolves.toBeUndefined();
  });
});
