import { MigrationInterface } from 'typeorm';
import { CreateCoreTables1795341869415 } from './1795341869415-CreateCoreTables';
import { BlobChunks1795445354085 } from './1795445354085-BlobChunks';
import { AddJobCancellation1795476005358 } from './1795476005358-AddJobCancellation';
import { AddJobLog1795477094456 } from './1795477094456-AddJobLog';
import { AddJobProgress1795560000000 } from './1795560000000-AddJobProgress';
import { AddJobCallbacks1795623279370 } from './1795623279370-AddJobCallbacks';
import { AddJobUsage1795624631424 } from './1795624631424-AddJobUsage';
import { AddRPackages1795630000000 } from './1795630000000-AddRPackages';
import { AddDropFile1795634587042 } from './1795634587042-AddDropFile';
import { AddJobLostRuns1795650000000 } from './1795650000000-AddJobLostRuns';
import { AddJobTraceContext1795660000000 } from './1795660000000-AddJobTraceContext';
import { AddWebSession1795700000000 } from './1795700000000-AddWebSession';
import { AddApiKeys1795710000000 } from './1795710000000-AddApiKeys';
import { AddApplicationSettings1795711000000 } from './1795711000000-AddApplicationSettings';
import { AddAuditTrail1795712000000 } from './1795712000000-AddAuditTrail';
import { FairClaims1795720000000 } from './1795720000000-FairClaims';
import { AddMailReply1795730000000 } from './1795730000000-AddMailReply';
import { AddSchedules1795740000000 } from './1795740000000-AddSchedules';
import { AddScheduleEmail1795750000000 } from './1795750000000-AddScheduleEmail';
import { CallbackJobs1795760000000 } from './1795760000000-CallbackJobs';
import { WidenPrincipalColumns1795765000000 } from './1795765000000-WidenPrincipalColumns';
import { AddScheduleAuthors1795770500000 } from './1795770500000-AddScheduleAuthors';
import { MailReplyJobs1795780000000 } from './1795780000000-MailReplyJobs';
import { ConsoleJobsAndWorkers1795790000000 } from './1795790000000-ConsoleJobsAndWorkers';
import { QueuedKindIndex1795800000000 } from './1795800000000-QueuedKindIndex';
import { AddAdminAccount1795805500000 } from './1795805500000-AddAdminAccount';
import { AddJobFunctionName1795900000000 } from './1795900000000-AddJobFunctionName';
import { AddWorkerNodeDetails1795900100000 } from './1795900100000-AddWorkerNodeDetails';
import { AddREnvironments1796000000000 } from './1796000000000-AddREnvironments';
import { AddFlows1796148000000 } from './1796148000000-AddFlows';

/** Every migration, oldest first. Listed here so the same list works from TypeScript and from dist/. */
export const MIGRATIONS: Array<new () => MigrationInterface> = [
  CreateCoreTables1795341869415,
  BlobChunks1795445354085,
  AddJobCancellation1795476005358,
  AddJobLog1795477094456,
  AddJobProgress1795560000000,
  AddJobCallbacks1795623279370,
  AddJobUsage1795624631424,
  AddRPackages1795630000000,
  AddDropFile1795634587042,
  AddJobLostRuns1795650000000,
  AddJobTraceContext1795660000000,
  AddWebSession1795700000000,
  AddApiKeys1795710000000,
  AddApplicationSettings1795711000000,
  AddAuditTrail1795712000000,
  FairClaims1795720000000,
  AddMailReply1795730000000,
  AddSchedules1795740000000,
  AddScheduleEmail1795750000000,
  CallbackJobs1795760000000,
  WidenPrincipalColumns1795765000000,
  AddScheduleAuthors1795770500000,
  MailReplyJobs1795780000000,
  ConsoleJobsAndWorkers1795790000000,
  QueuedKindIndex1795800000000,
  AddAdminAccount1795805500000,
  AddJobFunctionName1795900000000,
  AddWorkerNodeDetails1795900100000,
  AddREnvironments1796000000000,
  AddFlows1796148000000,
];
