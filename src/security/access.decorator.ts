import { SetMetadata } from '@nestjs/common';

/**
 * What a route requires of its caller (SPEC §10). Every controller route declares one; the
 * security module's global guard enforces it and denies any route that declares none.
 *
 * - `public`: anyone (health, the upload page, the WSDL and schemas, metrics).
 * - `submitJob`: submit a job to the application named by the request; the guard tells a
 *   function call (XML/JSON body) from a script job (ZIP or form) by the Content-Type.
 * - `functionCall`: a synchronous function call for the application named by the request (its
 *   header, or the `app` of the path: exported functions and their listing).
 * - `readResults`: read or delete results and job states of the application in the path.
 * - `cancelJob`: cancel a job of the application in the path: its admins, and its users who
 *   may submit jobs to it (script or function call); anyone else sees a 404, as for results.
 * - `applicationAdmin`: an admin of the application named by `X-SVC-Application-Name`.
 * - `anyAdmin`: a global admin or an admin of any application (the operator console; what each
 *   may see within it is the console's to limit to the applications they administer).
 * - `globalAdmin`: a global admin (system-wide configuration).
 * - `usageStatistics`: an admin of the application named by the `application` query parameter,
 *   or a global admin when it names none (every application's figures).
 */
export type AccessRule =
  | 'public'
  | 'submitJob'
  | 'functionCall'
  | 'readResults'
  | 'cancelJob'
  | 'applicationAdmin'
  | 'anyAdmin'
  | 'globalAdmin'
  | 'usageStatistics';

export const ACCESS_RULE = 'svc:access-rule';

/** Declares the access rule of a route or of every route of a controller. */
export const Access = (rule: AccessRule): ReturnType<typeof SetMetadata> =>
  SetMetadata(ACCESS_RULE, rule);
