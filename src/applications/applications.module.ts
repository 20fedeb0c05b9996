import { Global, Module } from '@nestjs/common';
import { ApplicationSettingsRepository } from './application-settings.repository';
import { ApplicationSettingsService } from './application-settings.service';

/**
 * Applications' rights and settings changed at run time, in every role: API nodes check rights
 * with them, workers use the network flag, retention and callback settings. Global: only the
 * admin API calls it; everyone else reads the AppConfig maps it keeps up to date.
 */
@Global()
@Module({
  providers: [ApplicationSettingsRepository, ApplicationSettingsService],
  exports: [ApplicationSettingsService],
})
export class ApplicationsModule {}
