/** What a handler may set beyond its body: a status of its own and headers it computes. */
export interface HttpAnswerInit {
  /** Overrides the route's status (its `@HttpCode`, or Nest's 200/201). */
  status?: number;
  /** Set as given, except `Vary`, which is appended to (CORS adds `Origin`). */
  headers?: Readonly<Record<string, string>>;
}

/**
 * A handler's answer whose status or headers depend on the request (ETag, Location,
 * Retry-After, the Content-Type of a chosen representation or table). Handlers return it
 * instead of writing to Express's response; `HttpAnswerAdapter` applies it. The body is a
 * string, a Buffer or a Readable (sent as they are, under the answer's Content-Type), a plain
 * object (JSON), or null (no body). Fixed headers and statuses stay `@Header` and `@HttpCode`.
 */
export class HttpAnswer {
  readonly status: number | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly body: unknown,
    init: HttpAnswerInit = {},
  ) {
    this.status = init.status;
    this.headers = init.headers ?? {};
  }

  /** 201 with the new resource's Location, or 204 when an existing one was replaced. */
  static createdOrReplaced(created: boolean, location: string): HttpAnswer {
    return created
      ? new HttpAnswer(null, { status: 201, headers: { Location: location } })
      : new HttpAnswer(null, { status: 204 });
  }
}
