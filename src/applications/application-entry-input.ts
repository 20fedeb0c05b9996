import { applicationSettingsProblems } from '../config/application-settings';
import { applicationSecurityProblems } from '../config/security-settings';
import { ApiError } from '../common/api-error';
import type { ApplicationEntryDto } from './application-entry.dto';
import type { StoredApplicationEntry } from './application-settings.entity';

/** The same bound as a slot count of the configuration (SCRIPT_SLOTS). */
const MAX_SLOTS = 256;

/** What a replacement keeps from before: the secret when none is sent, the configured drop directory. */
export interface EntryContext {
  currentCallbackSecret: string | undefined;
  configuredDropDirectory: string | undefined;
  /** AUTH_MODE: whether a bare principal name is one kind of caller or ambiguous (then 400). */
  authMode: string;
}

/**
 * The configuration's own checks, with their prefix (`APPLICATION_SETTINGS: "app": `) turned into
 * the part of the body that holds the field (`settings: networkAllowed must be …`).
 */
function firstProblem(problems: string[], variable: string, app: string, part: string): void {
  if (problems.length > 0) {
    const message = problems[0]
      .replace(`${variable}: "${app}": `, `${part}: `)
      .replace(`${variable}: `, `${part}: `);
    throw ApiError.badRequest(message);
  }
}

/**
 * The entry a PUT body stores: its shape checked by `ApplicationEntryDto`, its parts here by the
 * same checks as APPLICATION_SECURITY and APPLICATION_SETTINGS at start-up (so a setting added
 * there is accepted here too); 400 naming the part and field.
 */
export function parseApplicationEntry(
  app: string,
  body: ApplicationEntryDto,
  context: EntryContext,
): StoredApplicationEntry {
  const { security = {}, settings = {}, slots = null } = body;
  firstProblem(
    applicationSecurityProblems({ [app]: security }, context.authMode),
    'APPLICATION_SECURITY',
    app,
    'security',
  );
  // Shown by GET in place of the secret; sent back unchanged, it changes nothing.
  const sent: Record<string, unknown> = { ...settings };
  delete sent.callbackSecretSet;
  if (sent.dropDirectory !== undefined && sent.dropDirectory !== context.configuredDropDirectory) {
    throw ApiError.badRequest(
      'settings: dropDirectory is set in APPLICATION_SETTINGS only (a node watches it from its start)',
    );
  }
  delete sent.dropDirectory;
  if (sent.callbackSecret === undefined && context.currentCallbackSecret !== undefined) {
    sent.callbackSecret = context.currentCallbackSecret;
  } else if (sent.callbackSecret === null) {
    delete sent.callbackSecret;
  }
  firstProblem(
    applicationSettingsProblems({ [app]: sent }),
    'APPLICATION_SETTINGS',
    app,
    'settings',
  );
  if (
    slots !== null &&
    !(typeof slots === 'number' && Number.isInteger(slots) && slots >= 1 && slots <= MAX_SLOTS)
  ) {
    throw ApiError.badRequest(
      `slots: must be a whole number from 1 to ${MAX_SLOTS} (extra slots of this application), or null`,
    );
  }
  return { security, settings: sent, slots };
}
