import { CanActivate, ExecutionContext, HttpStatus, Injectable, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import {
  applicationNameFromHeader,
  checkApplicationName,
  isJobId,
} from '../common/application-name';
import { SecurityConfig } from '../config/config-slices';
import { AccessQuestion, AccessPolicyService } from './access-policy.service';
import { ACCESS_RULE, AccessRule } from './access.decorator';
import { rememberAccessQuestion } from './held-rights';
import { RequestAccessService } from './request-access.service';
import { malformed, missing } from '../common/missing-resource';

function param(req: Request, name: string): string | undefined {
  const value = (req.params as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The one global access guard (SPEC §10): reads the route's `@Access` rule, authenticates the
 * caller and asks AccessPolicyService. Registered before NegotiationGuard, so an unauthenticated
 * caller learns nothing (not even 406) before authenticating. A route without a rule is denied.
 * Before any rule, a request that changes something with a browser's own credentials from
 * another site is refused (RequestAccessService.refuseCrossSite).
 */
@Injectable()
export class AccessGuard implements CanActivate {
  private readonly logger = new Logger('Security');

  constructor(
    private readonly reflector: Reflector,
    private readonly config: SecurityConfig,
    private readonly policy: AccessPolicyService,
    private readonly access: RequestAccessService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_RULE, [
      context.getHandler(),
      context.getClass(),
    ]);
    const req = context.switchToHttp().getRequest<Request>();
    if (rule === undefined) {
      this.logger.error(
        `${context.getClass().name}.${context.getHandler().name} declares no @Access rule: denied`,
      );
      throw new ApiError(
        HttpStatus.FORBIDDEN,
        'This resource declares no access rule; access is denied.',
      );
    }
    // Before any rule: public routes that act on a browser's credentials (the SOAP endpoint,
    // sign-out) are held to it too, and nothing is authenticated or read for such a request.
    this.access.refuseCrossSite(req);
    if (rule === 'public') {
      return true;
    }
    const isAdminRule =
      rule === 'applicationAdmin' ||
      rule === 'anyAdmin' ||
      rule === 'globalAdmin' ||
      rule === 'usageStatistics';
    if (this.config.authMode === 'none' && !isAdminRule) {
      // Open to all (SPEC §10): nothing to check, and the usual order of 406/400 answers stays.
      return true;
    }
    if (isAdminRule) {
      // With no admin configured at all the answer is a 403 that says how to configure one,
      // whatever credentials were sent (the policy forbids an anonymous caller only then).
      const withoutCredentials = this.policy.decide(null, this.questionOf(rule, req));
      if (withoutCredentials.outcome === 'forbid') {
        this.access.enforce(withoutCredentials);
      }
    }
    const principal = await this.access.principalOf(req);
    if (rule === 'submitJob') {
      // Who may submit to which application is the intake's one question (JobsService.submit),
      // whatever the front end: a form or an envelope names its application in the body. Here
      // only a caller who must authenticate is stopped, before any body is read.
      this.access.enforce(principal === null ? { outcome: 'authenticate' } : { outcome: 'allow' });
      return true;
    }
    const question = this.questionOf(rule, req);
    this.access.enforce(this.policy.decide(principal, question), () => hiddenAsMissing(req));
    // Asked again of what the request keeps open, when rights change (HeldRights).
    rememberAccessQuestion(req, question);
    return true;
  }

  private questionOf(
    rule: Exclude<AccessRule, 'public' | 'submitJob'>,
    req: Request,
  ): AccessQuestion {
    switch (rule) {
      case 'globalAdmin':
      case 'anyAdmin':
        return { rule };
      case 'usageStatistics': {
        const application = (req.query as Record<string, unknown>).application;
        return typeof application === 'string' && application !== ''
          ? {
              rule: 'applicationAdmin',
              application: checkApplicationName(application, 'The application parameter'),
            }
          : { rule: 'globalAdmin' };
      }
      case 'functionCall':
        // /process names the application in its header, /functions/{app}/... in the path.
        return {
          rule,
          application:
            param(req, 'app') === undefined
              ? applicationNameFromHeader(req)
              : checkApplicationName(param(req, 'app'), 'The application name in the path'),
        };
      case 'applicationAdmin':
        return { rule, application: applicationNameFromHeader(req) };
      case 'readResults':
      case 'cancelJob':
        return {
          rule,
          application: checkApplicationName(param(req, 'app'), 'The application name in the path'),
        };
    }
  }
}

/**
 * The 404 a caller who may not see an application gets: word for word what the results and job
 * controllers answer for a result or job that does not exist, so the two cannot be told apart
 * (and the same 400s for malformed ids, which those controllers check before looking).
 */
function hiddenAsMissing(req: Request): ApiError {
  const app = param(req, 'app') ?? '';
  const jobId = param(req, 'jobId');
  const file = param(req, 'file');
  if (jobId !== undefined) {
    if (!isJobId(jobId)) {
      return malformed.jobId(jobId);
    }
    const id = jobId.toLowerCase();
    if (req.path.includes('/jobs/')) {
      return missing.job(app, id);
    }
    return req.method === 'DELETE' ? missing.result(app, id) : missing.pendingResult(app, id);
  }
  if (file !== undefined) {
    const dot = file.lastIndexOf('.');
    if (!isJobId(dot < 0 ? file : file.slice(0, dot))) {
      return malformed.resultFile(file);
    }
    return missing.resultData(req.path);
  }
  return missing.results(app);
}
