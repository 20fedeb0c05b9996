import { Global, Module } from '@nestjs/common';
import { AdminAccountRepository } from './admin-account.repository';
import { AdminAccountsService } from './admin-accounts.service';

/**
 * Admins made at run time (admin_account). Global, so AuthenticationService and
 * AccessPolicyService (SecurityModule) find them without SecurityModule needing the database:
 * ApiModule loads this module; without it there are none.
 */
@Global()
@Module({
  providers: [AdminAccountRepository, AdminAccountsService],
  exports: [AdminAccountsService],
})
export class AdminAccountsModule {}
