import {
  HttpStatus,
  Injectable,
  Logger,
  OnApplicationShutdown,
  OnModuleInit,
  Optional,
} from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { AppConfig } from '../config/app-config';
import type { ApplicationSettings } from '../config/application-settings';
import { applicationSecurityProblems, type ApplicationSecurity } from '../config/security-settings';
import { AuditService } from '../audit/audit.service';
import { DatabaseEvents } from '../storage/database-events.service';
import { HeldRights } from '../security/held-rights';
import { parseApplicationEntry } from './application-entry-input';
import type { ApplicationEntryDto } from './application-entry.dto';
import { ApplicationSettingsEntity, StoredApplicationEntry } from './application-settings.entity';
import {
  APPLICATION_SETTINGS_CHANGED_CHANNEL,
  ApplicationSettingsRepository,
} from './application-settings.repository';

/** An application's rights and settings as GET answers them: never the callback secret. */
export interface ApplicationView {
  application: string;
  /** `stored`: changed at run time; `configuration`: as the environment says (version 0). */
  source: 'stored' | 'configuration';
  version: number;
  updatedAt: string | null;
  updatedBy: string | null;
  security: Record<string, unknown>;
  settings: Record<string, unknown>;
  slots: number | null;
}

export interface Replaced {
  view: ApplicationView;
  /** Changes that take effect only when the worker nodes start again. */
  restartRequired: string[];
}

/** `"<version>"`: the ETag of an application's rights and settings. */
export function applicationEtag(version: number): string {
  return `"${version}"`;
}

/** An entry for the audit trail: the callback secret only as whether one is set. */
function withoutSecret(entry: StoredApplicationEntry): StoredApplicationEntry {
  const { callbackSecret, ...settings } = entry.settings;
  return {
    ...entry,
    settings: { ...settings, callbackSecretSet: typeof callbackSecret === 'string' },
  };
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/**
 * Rights and settings of applications changed at run time (docs/security.md#application-rights-and-settings-at-run-time).
 * A stored entry replaces the configured APPLICATION_SECURITY, APPLICATION_SETTINGS and
 * APPLICATION_SLOTS entries of its application (the drop directory stays the configured one).
 * It is applied to this node's AppConfig maps, which every reader consults on each use
 * (`applicationSettingsOf`, the access policy), so nothing else needs to know where a value
 * came from. Each change notifies every node, which reads the row again. Slots are counted
 * when a worker starts (applyStoredSlots, before the modules are made), so a changed count
 * applies at the next start.
 */
@Injectable()
export class ApplicationSettingsService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('ApplicationSettings');
  private readonly configured: {
    security: Record<string, ApplicationSecurity>;
    settings: Record<string, ApplicationSettings>;
    slots: Record<string, number>;
  };
  /** Version of each stored entry in force on this node. */
  private readonly versions = new Map<string, number>();
  private pollTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly config: AppConfig,
    private readonly repository: ApplicationSettingsRepository,
    @Optional() private readonly events?: DatabaseEvents,
    @Optional() private readonly audit?: AuditService,
    /** What requests hold open under these rights (API nodes), checked again on each change. */
    @Optional() private readonly held?: HeldRights,
  ) {
    this.configured = clone({
      security: config.applicationSecurity,
      settings: config.applicationSettings,
      slots: config.applicationSlots,
    });
  }

  async onModuleInit(): Promise<void> {
    // In force before the node serves a request or claims a job.
    await this.reloadAll();
    if (!this.events) {
      return;
    }
    this.events.subscribe(APPLICATION_SETTINGS_CHANGED_CHANNEL, (app) => void this.reload(app));
    // Changes made while the connection was down were not heard: read them all again.
    this.events.onListening(() => void this.reloadAll());
    if (this.events.otherNodes === 'unheard') {
      this.pollTimer = setInterval(() => void this.reloadAll(), this.config.pollIntervalMs);
      this.pollTimer.unref();
    }
  }

  onApplicationShutdown(): void {
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
  }

  /** The applications with stored settings, and those the configuration names. */
  async namedApplications(): Promise<{ stored: string[]; configured: string[] }> {
    const stored = (await this.repository.all()).map((row) => row.applicationName);
    const configured = new Set([
      ...Object.keys(this.configured.security),
      ...Object.keys(this.configured.settings),
      ...Object.keys(this.configured.slots),
    ]);
    return { stored, configured: [...configured] };
  }

  async view(app: string): Promise<ApplicationView> {
    const row = await this.repository.find(app);
    const entry = row ? row.entry : clone(this.configuredEntry(app));
    const { callbackSecret, ...settings } = entry.settings;
    const dropDirectory = this.configured.settings[app]?.dropDirectory;
    return {
      application: app,
      source: row ? 'stored' : 'configuration',
      version: row?.version ?? 0,
      updatedAt: row?.updatedAt.toISOString() ?? null,
      updatedBy: row?.updatedBy ?? null,
      security: entry.security,
      settings: {
        ...settings,
        ...(dropDirectory !== undefined ? { dropDirectory } : {}),
        callbackSecretSet: typeof callbackSecret === 'string',
      },
      slots: entry.slots,
    };
  }

  /**
   * Replaces an application's rights and settings if `ifMatch` names the version in force:
   * 428 without it, 412 when it changed meanwhile, 400 naming a bad field.
   */
  async replace(
    app: string,
    body: ApplicationEntryDto,
    ifMatch: string | undefined,
    updatedBy: string | null,
  ): Promise<Replaced> {
    if (ifMatch === undefined) {
      throw new ApiError(
        HttpStatus.PRECONDITION_REQUIRED,
        'If-Match is required: send the ETag of a GET of this application.',
      );
    }
    const current = await this.repository.find(app);
    const version = current?.version ?? 0;
    const expected = /^\s*(?:W\/)?"(\d{1,9})"\s*$/.exec(ifMatch);
    if (expected === null || Number(expected[1]) !== version) {
      throw this.changedMeanwhile(app);
    }
    const before = current?.entry ?? this.configuredEntry(app);
    const entry = parseApplicationEntry(app, body, {
      currentCallbackSecret:
        typeof before.settings.callbackSecret === 'string'
          ? before.settings.callbackSecret
          : undefined,
      configuredDropDirectory: this.configured.settings[app]?.dropDirectory,
      authMode: this.config.authMode,
    });
    const saved = await this.repository.inTransaction(async (manager) => {
      const row = await this.repository.save(app, entry, version, updatedBy, manager);
      if (row !== null) {
        await this.audit?.record(
          {
            action: 'application.changed',
            applicationName: app,
            details: { before: withoutSecret(before), after: withoutSecret(entry) },
          },
          manager,
        );
      }
      return row;
    });
    if (saved === null) {
      throw this.changedMeanwhile(app);
    }
    this.apply(saved);
    return {
      view: await this.view(app),
      restartRequired: (before.slots ?? null) === entry.slots ? [] : ['slots'],
    };
  }

  /** The configured entries of an application, as a stored entry would hold them. */
  private configuredEntry(app: string): StoredApplicationEntry {
    return {
      security: { ...this.configured.security[app] },
      settings: { ...this.configured.settings[app] },
      slots: this.configured.slots[app] ?? null,
    };
  }

  private changedMeanwhile(app: string): ApiError {
    return new ApiError(
      HttpStatus.PRECONDITION_FAILED,
      `The settings of ${app} have changed since that ETag: GET them again, then repeat the change.`,
    );
  }

  private async reload(app: string): Promise<void> {
    try {
      const row = await this.repository.find(app);
      if (row) {
        this.apply(row);
      }
    } catch (error) {
      this.logger.warn(`could not read the settings of ${app}: ${(error as Error).message}`);
    }
  }

  private async reloadAll(): Promise<void> {
    try {
      for (const row of await this.repository.all()) {
        this.apply(row);
      }
    } catch (error) {
      this.logger.warn(
        `could not read the stored application settings: ${(error as Error).message}`,
      );
    }
  }

  /** Puts a stored entry in force on this node, unless a newer one already is. */
  private apply(row: ApplicationSettingsEntity): void {
    const app = row.applicationName;
    if ((this.versions.get(app) ?? 0) >= row.version) {
      return;
    }
    this.versions.set(app, row.version);
    // Stored under another AUTH_MODE, a bare name may be ambiguous now: such an entry names
    // nobody (the policy matches bare names only where one kind of caller can carry them).
    for (const problem of applicationSecurityProblems(
      { [app]: row.entry.security },
      this.config.authMode,
    )) {
      this.logger.warn(`the stored rights of ${app}: ${problem}; change them with PUT`);
    }
    const dropDirectory = this.configured.settings[app]?.dropDirectory;
    this.config.applicationSecurity[app] = clone(row.entry.security);
    this.config.applicationSettings[app] = {
      ...(clone(row.entry.settings) as ApplicationSettings),
      ...(dropDirectory !== undefined ? { dropDirectory } : {}),
    };
    // In force now: what was opened under the old rights is held to the new ones.
    this.held?.changed();
  }
}

/**
 * Stored slot counts replace APPLICATION_SLOTS before the node's modules are made (bootstrap):
 * a worker sizes its pools and the R engine its servers once, at start.
 */
export async function applyStoredSlots(
  config: AppConfig,
  repository: ApplicationSettingsRepository,
): Promise<void> {
  for (const row of await repository.all()) {
    if (row.entry.slots === null) {
      delete config.applicationSlots[row.applicationName];
    } else {
      config.applicationSlots[row.applicationName] = row.entry.slots;
    }
  }
}
