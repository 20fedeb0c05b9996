import { Module } from '@nestjs/common';
import { JobsModule } from '../jobs/jobs.module';
import { QueueModule } from '../queue/queue.module';
import { ResultsModule } from '../results/results.module';
import { SecurityModule } from '../security/security.module';
import { SoapJobService } from './soap-job.service';
import { SoapService } from './soap.service';
import { WsdlService } from './wsdl.service';

/**
 * The SOAP front end (SPEC §7): the same job and result services as REST behind a SOAP 1.1 /
 * MTOM endpoint, and the WSDL and schemas it publishes. Its controllers are registered by
 * ApiModule, before the REST fallback.
 */
@Module({
  imports: [JobsModule, QueueModule, ResultsModule, SecurityModule],
  providers: [WsdlService, SoapJobService, SoapService],
  exports: [WsdlService, SoapService],
})
export class SoapModule {}
