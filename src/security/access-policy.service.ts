import { Injectable, Optional } from '@nestjs/common';
import { SecurityConfig } from '../config/config-slices';
import type { Principal } from './principal';
import { AdminAccountsService } from './admin-accounts.service';
import {
  bareNameKind,
  type ApplicationSecurity,
  type PrincipalKind,
  type SecuritySettings,
} from '../config/security-settings';

/** What a submission asks R to do: run a script (ZIP, form, SOAP) or call a catalog function. */
export type SubmissionKind = 'script' | 'functionCall';

/** A question to the policy: a rule and, for per-application rules, the application. */
export type AccessQuestion =
  | { rule: 'public' }
  | { rule: 'submitJob'; application: string; kind: SubmissionKind }
  | { rule: 'functionCall'; application: string }
  | { rule: 'readResults'; application: string }
  | { rule: 'cancelJob'; application: string }
  | { rule: 'applicationAdmin'; application: string }
  | { rule: 'anyAdmin' }
  | { rule: 'globalAdmin' };

/**
 * The policy's answer. `authenticate`: credentials are needed (401). `forbid`: the caller is known
 * and may not do this, or no admin exists to do it (403). `hide`: the caller may not see the
 * application's results, so they must look absent (404).
 */
export type AccessDecision =
  | { outcome: 'allow' }
  | { outcome: 'authenticate' }
  | { outcome: 'forbid'; message: string }
  | { outcome: 'hide' };

/** The one command that makes an admin while the service runs, its data kept. */
export const MAKE_ADMIN_COMMAND = 'npx svc admin create <name>';

export const NO_ADMIN_MESSAGE =
  `No administrator is configured. Run \`${MAKE_ADMIN_COMMAND}\` where the service runs: it ` +
  'makes a global admin at once, prints the password, and keeps the data (or set ADMIN_USER and ' +
  'ADMIN_PASSWORD, or with AUTH_MODE=basic or apiKey GLOBAL_ADMINS, and restart); see ' +
  'docs/security.md.';

const ALLOW: AccessDecision = { outcome: 'allow' };

/**
 * Who may do what (SPEC §10, the RSB model), as a pure function of the configuration, the
 * principal and the question. Front ends that cannot use the guard (the form post, whose
 * application is in the body; SOAP) ask it directly.
 */
@Injectable()
export class AccessPolicyService {
  private readonly settings: SecuritySettings;
  /** What a bare name in a rule stands for (null: bare names name nobody). */
  private readonly bareKind: PrincipalKind | null;

  constructor(
    config: SecurityConfig,
    /** Admins made at run time: whether one exists (AdminAccountsModule, API nodes only). */
    @Optional() private readonly adminAccounts?: AdminAccountsService,
  ) {
    this.settings = config;
    this.bareKind = bareNameKind(config.authMode);
  }

  /** Whether anyone can act as an admin (of the service or of some application) at all. */
  anyAdminConfigured(): boolean {
    return (
      this.adminConfigured(null) ||
      Object.keys(this.settings.applicationSecurity).some((application) =>
        this.adminConfigured(application),
      )
    );
  }

  /** Whether a principal is a global admin: ADMIN_USER, or named in GLOBAL_ADMINS. */
  isGlobalAdmin(principal: Principal): boolean {
    if (principal.source === 'adminUser') {
      return true;
    }
    if (this.settings.authMode === 'none') {
      return false;
    }
    const admins = this.settings.globalAdmins;
    return this.matches(principal, admins.principals, admins.roles);
  }

  decide(principal: Principal | null, question: AccessQuestion): AccessDecision {
    if (question.rule === 'public') {
      return ALLOW;
    }
    if (question.rule === 'globalAdmin') {
      return this.decideAdmin(principal, null);
    }
    if (question.rule === 'applicationAdmin') {
      return this.decideAdmin(principal, question.application);
    }
    if (question.rule === 'anyAdmin') {
      return this.decideAnyAdmin(principal);
    }
    if (this.settings.authMode === 'none') {
      return ALLOW;
    }
    if (principal === null) {
      return { outcome: 'authenticate' };
    }
    if (this.isGlobalAdmin(principal)) {
      return ALLOW;
    }
    const rules = this.rulesOf(question.application);
    const isAdmin = this.matches(principal, rules.adminPrincipals, rules.adminRoles);
    const isUser = isAdmin || this.matches(principal, rules.userPrincipals, rules.userRoles);
    if (question.rule === 'readResults') {
      return isUser ? ALLOW : { outcome: 'hide' };
    }
    if (question.rule === 'cancelJob') {
      if (!isUser) {
        return { outcome: 'hide' };
      }
      return isAdmin || rules.scriptSubmissionAllowed === true || rules.functionCallAllowed === true
        ? ALLOW
        : forbid(`${principal.id} may not submit jobs to application ${question.application}.`);
    }
    if (!isUser) {
      return forbid(`${principal.id} may not use application ${question.application}.`);
    }
    const kind = question.rule === 'functionCall' ? 'functionCall' : question.kind;
    const granted =
      kind === 'functionCall' ? rules.functionCallAllowed : rules.scriptSubmissionAllowed;
    if (isAdmin || granted === true) {
      return ALLOW;
    }
    return forbid(
      kind === 'functionCall'
        ? `Application ${question.application} does not allow function calls (functionCallAllowed).`
        : `Application ${question.application} does not allow script submissions (scriptSubmissionAllowed).`,
    );
  }

  /** The admin rules; `application` null for globalAdmin. */
  private decideAdmin(principal: Principal | null, application: string | null): AccessDecision {
    if (!this.adminConfigured(application)) {
      return forbid(NO_ADMIN_MESSAGE);
    }
    if (principal === null) {
      return { outcome: 'authenticate' };
    }
    if (this.isGlobalAdmin(principal)) {
      return ALLOW;
    }
    if (application !== null && this.settings.authMode !== 'none') {
      const rules = this.rulesOf(application);
      if (this.matches(principal, rules.adminPrincipals, rules.adminRoles)) {
        return ALLOW;
      }
      return forbid(`${principal.id} is not an admin of application ${application}.`);
    }
    return forbid(`${principal.id} is not a global admin.`);
  }

  /**
   * The applications whose admins (adminPrincipals/adminRoles, as configured or stored at run
   * time) include the principal, sorted; a global admin's are given by the caller (every known
   * application), so this is for the others.
   */
  administeredApplications(principal: Principal): string[] {
    if (this.settings.authMode === 'none') {
      return [];
    }
    return Object.keys(this.settings.applicationSecurity)
      .filter((application) => {
        const rules = this.rulesOf(application);
        return this.matches(principal, rules.adminPrincipals, rules.adminRoles);
      })
      .sort();
  }

  /** A global admin, or an admin of at least one application (the operator console). */
  private decideAnyAdmin(principal: Principal | null): AccessDecision {
    if (!this.anyAdminConfigured()) {
      return forbid(NO_ADMIN_MESSAGE);
    }
    if (principal === null) {
      return { outcome: 'authenticate' };
    }
    if (this.isGlobalAdmin(principal) || this.administeredApplications(principal).length > 0) {
      return ALLOW;
    }
    return forbid(`${principal.id} is not an admin of any application.`);
  }

  /** Whether anyone at all could pass an admin rule, so a 403 can say how to fix it. */
  private adminConfigured(application: string | null): boolean {
    const { adminUser, authMode, globalAdmins } = this.settings;
    if (adminUser !== null || this.adminAccounts?.any === true) {
      return true;
    }
    if (authMode === 'none') {
      return false;
    }
    if ((globalAdmins.principals?.length ?? 0) + (globalAdmins.roles?.length ?? 0) > 0) {
      return true;
    }
    if (application === null) {
      return false;
    }
    const rules = this.rulesOf(application);
    return (rules.adminPrincipals?.length ?? 0) + (rules.adminRoles?.length ?? 0) > 0;
  }

  /**
   * Whether a rule names the principal: by `<kind>:<name>`, or by its bare name where AUTH_MODE
   * lets in one kind of caller only; or grants one of its roles.
   */
  private matches(
    principal: Principal,
    principals: readonly string[] | undefined,
    roles: readonly string[] | undefined,
  ): boolean {
    const bare = this.bareKind === principal.kind ? principal.name : null;
    return (
      (principals?.some((entry) => entry === principal.id || entry === bare) ?? false) ||
      (roles?.some((role) => principal.roles.includes(role)) ?? false)
    );
  }

  /** An application without an entry has no users and no admins: only global admins reach it. */
  private rulesOf(application: string): ApplicationSecurity {
    return Object.hasOwn(this.settings.applicationSecurity, application)
      ? this.settings.applicationSecurity[application]
      : {};
  }
}

function forbid(message: string): AccessDecision {
  return { outcome: 'forbid', message };
}
