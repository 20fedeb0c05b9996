import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { ResultRepository } from './result.repository';

@Module({
  imports: [QueueModule],
  providers: [ResultRepository],
  exports: [ResultRepository],
})
export class ResultsModule {}
