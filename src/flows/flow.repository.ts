import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { FlowEntity, FlowStepEntity } from './flow.entity';

/** The flow and flow_step tables: every statement on them. */
@Injectable()
export class FlowRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Runs `work` in one transaction: a flow and all its steps' jobs are stored together. */
  inTransaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }

  /** The flow's row and its steps' rows, in `manager`'s transaction (the steps' jobs first). */
  async insert(manager: EntityManager, flow: FlowEntity, steps: FlowStepEntity[]): Promise<void> {
    await manager.insert(FlowEntity, flow);
    await manager.insert(FlowStepEntity, steps);
  }

  /** A flow of `applicationName` with its steps in the request's order; null when there is none. */
  async find(
    applicationName: string,
    flowId: string,
  ): Promise<{ flow: FlowEntity; steps: FlowStepEntity[] } | null> {
    const flow = await this.dataSource
      .getRepository(FlowEntity)
      .findOne({ where: { id: flowId, applicationName } });
    if (flow === null) {
      return null;
    }
    const steps = await this.dataSource
      .getRepository(FlowStepEntity)
      .find({ where: { flowId }, order: { position: 'ASC' } });
    return { flow, steps };
  }

  /** Marks the flow cancelled by `by` unless it was already; false when it was. */
  async markCancelled(flowId: string, by: string, at: Date): Promise<boolean> {
    const result = await this.dataSource
      .createQueryBuilder()
      .update(FlowEntity)
      .set({ cancelledAt: at, cancelledBy: by })
      .where('id = :flowId AND cancelled_at IS NULL', { flowId })
      .execute();
    return (result.affected ?? 0) > 0;
  }
}
