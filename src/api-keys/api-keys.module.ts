import { Global, Module } from '@nestjs/common';
import { ApiKeyRepository } from './api-key.repository';
import { ApiKeysService } from './api-keys.service';

/**
 * API keys made at run time. Global, so authentication (security) finds the stored keys without
 * importing this module: ApiModule loads it, and a role without the API has no need of it.
 */
@Global()
@Module({
  providers: [ApiKeyRepository, ApiKeysService],
  exports: [ApiKeysService],
})
export class ApiKeysModule {}
