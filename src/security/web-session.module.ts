import { Global, Module } from '@nestjs/common';
import { WebSessionRepository } from './web-session.repository';

/**
 * The upload page's sessions (web_session). Global, so RequestAccessService (SecurityModule)
 * finds them without SecurityModule needing the database: ApiModule loads this module, and a
 * role without the API, or a module without a database, has no sessions.
 */
@Global()
@Module({
  providers: [WebSessionRepository],
  exports: [WebSessionRepository],
})
export class WebSessionModule {}
