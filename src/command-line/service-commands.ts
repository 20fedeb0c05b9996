import { adminCommand } from './admin.command';
import { ServiceCommand } from './cli-command';
import { keysCommand } from './keys.command';
import { schedulesCommand } from './schedules.command';
import { settingsCommand } from './settings.command';

/**
 * The commands that act on what a service holds: beside a running service that owns DATA_DIR,
 * that service performs them (command-channel.ts); the command socket takes no other.
 */
export const SERVICE_COMMANDS: readonly ServiceCommand[] = [
  keysCommand,
  settingsCommand,
  adminCommand,
  schedulesCommand,
];
