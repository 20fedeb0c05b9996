import { CatalogFileEntity } from '../catalog/catalog-file.entity';
import { JobFileEntity } from '../jobs/job-file.entity';
import { JobEntity } from '../jobs/job.entity';
import { ResultEntity } from '../results/result.entity';

export const ENTITIES = [JobEntity, JobFileEntity, ResultEntity, CatalogFileEntity];
