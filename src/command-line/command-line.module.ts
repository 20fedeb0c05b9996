import { Module } from '@nestjs/common';
import { SchedulesModule } from '../schedules/schedules.module';
import { AdminAccountsModule } from '../security/admin-accounts.module';
import { CommandChannel } from './command-channel.server';

/**
 * The command line's way into a running service: the command socket (CommandChannel), on the
 * nodes that own an embedded database. The services it calls are the admin API's.
 */
@Module({
  imports: [AdminAccountsModule, SchedulesModule],
  providers: [CommandChannel],
})
export class CommandLineModule {}
