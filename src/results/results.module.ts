import { Module } from '@nestjs/common';
import { ResultRepository } from './result.repository';

@Module({ providers: [ResultRepository], exports: [ResultRepository] })
export class ResultsModule {}
