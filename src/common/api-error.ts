import { HttpException, HttpStatus } from '@nestjs/common';

/**
 * An error a client caused or must be told about. Rendered as the `error` body of SPEC §4
 * (status, short reason, message) in the negotiated format; never a stack trace.
 */
export class ApiError extends HttpException {
  constructor(
    status: HttpStatus,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message, status);
  }

  static badRequest(message: string): ApiError {
    return new ApiError(HttpStatus.BAD_REQUEST, message);
  }
  static notFound(message: string): ApiError {
    return new ApiError(HttpStatus.NOT_FOUND, message);
  }
  static payloadTooLarge(message: string): ApiError {
    return new ApiError(HttpStatus.PAYLOAD_TOO_LARGE, message);
  }
  static unsupportedMediaType(message: string): ApiError {
    return new ApiError(HttpStatus.UNSUPPORTED_MEDIA_TYPE, message);
  }
  static notAcceptable(message: string): ApiError {
    return new ApiError(HttpStatus.NOT_ACCEPTABLE, message);
  }
  /** A limit of the caller's or the application's was reached: try again after `retryAfterSeconds`. */
  static tooManyRequests(message: string, retryAfterSeconds: number): ApiError {
    return new ApiError(HttpStatus.TOO_MANY_REQUESTS, message, {
      'Retry-After': String(retryAfterSeconds),
    });
  }
  static serviceUnavailable(message: string, retryAfterSeconds = 5): ApiError {
    return new ApiError(HttpStatus.SERVICE_UNAVAILABLE, message, {
      'Retry-After': String(retryAfterSeconds),
    });
  }
}
