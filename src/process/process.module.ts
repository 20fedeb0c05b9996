import { Module } from '@nestjs/common';
import { REngineModule } from '../r-engine/r-engine.module';
import { ProcessController } from './process.controller';
import { ProcessService } from './process.service';

/** Synchronous function calls on API nodes, on this node's own function-call engine. */
@Module({
  imports: [REngineModule],
  controllers: [ProcessController],
  providers: [ProcessService],
})
export class ProcessModule {}
