import { JobCallbackEntity } from '../callbacks/job-callback.entity';
import { DropFileEntity } from '../dropdir/drop-file.entity';
import { CatalogFileEntity } from '../catalog/catalog-file.entity';
import { JobFileChunkEntity } from '../jobs/job-file-chunk.entity';
import { JobFileEntity } from '../jobs/job-file.entity';
import { JobLogLineEntity } from '../jobs/job-log-line.entity';
import { JobEntity } from '../jobs/job.entity';
import { ResultChunkEntity } from '../results/result-chunk.entity';
import { ResultEntity } from '../results/result.entity';
import { RPackageNodeEntity } from '../packages/r-package-node.entity';
import { RPackageEntity } from '../packages/r-package.entity';
import { JobUsageEntity } from '../usage/job-usage.entity';

export const ENTITIES = [
  JobEntity,
  JobFileEntity,
  JobFileChunkEntity,
  JobLogLineEntity,
  ResultEntity,
  ResultChunkEntity,
  CatalogFileEntity,
  JobUsageEntity,
  DropFileEntity,
  JobCallbackEntity,
  RPackageEntity,
  RPackageNodeEntity,
];
