import { ApiError } from '../common/api-error';

/** What a client asks for when it creates a key. */
export interface NewApiKeyRequest {
  principal: string;
  roles: string[];
  expiresAt: Date | null;
}

/** The same rule as configured users and key principals: no spaces, no ":". */
const NAME = /^[^\s:]{1,128}$/;
const MAX_ROLES = 100;
const FIELDS = ['principal', 'roles', 'expiresAt'];
/** An ISO 8601 time with a date and a zone, e.g. 2027-01-31T00:00:00Z. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** Date rolls 2027-02-31 over into March: the day must exist in its month. */
function isCalendarDate(time: string): boolean {
  const [year, month, day] = time.slice(0, 10).split('-').map(Number);
  return (
    month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate()
  );
}

/** 400 naming the field, in the error's message. */
function bad(field: string, problem: string): ApiError {
  return ApiError.badRequest(`${field}: ${problem}`);
}

/** A create request's JSON body, checked field by field (400 naming the field). */
export function parseNewApiKey(body: unknown, now: Date): NewApiKeyRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw ApiError.badRequest('The body must be a JSON object: {"principal": …, "roles": […]}.');
  }
  const fields = body as Record<string, unknown>;
  for (const field of Object.keys(fields)) {
    if (!FIELDS.includes(field)) {
      throw bad(field.slice(0, 64), `unknown field (known: ${FIELDS.join(', ')})`);
    }
  }
  const { principal, roles = [], expiresAt = null } = fields;
  if (typeof principal !== 'string' || !NAME.test(principal)) {
    throw bad('principal', 'must be a name of 1 to 128 characters without spaces or ":"');
  }
  if (
    !Array.isArray(roles) ||
    roles.length > MAX_ROLES ||
    !roles.every((role) => typeof role === 'string' && NAME.test(role))
  ) {
    throw bad(
      'roles',
      `must be a list of at most ${MAX_ROLES} names without spaces or ":" (1 to 128 characters)`,
    );
  }
  let expires: Date | null = null;
  if (expiresAt !== null) {
    expires =
      typeof expiresAt === 'string' && ISO_TIME.test(expiresAt) && isCalendarDate(expiresAt)
        ? new Date(expiresAt)
        : null;
    if (expires === null || Number.isNaN(expires.getTime())) {
      throw bad('expiresAt', 'must be a time in ISO 8601 with a zone, e.g. 2027-01-31T00:00:00Z');
    }
    if (expires.getTime() <= now.getTime()) {
      throw bad('expiresAt', 'must be in the future');
    }
  }
  return { principal, roles: [...new Set(roles as string[])], expiresAt: expires };
}
