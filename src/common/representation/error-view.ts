import type { RestElement, RestView } from './rest-representation';

/** The body of every failed REST request (written by the exception filter). */
export interface ErrorView {
  status: number;
  /** Short reason, e.g. "Bad Request". */
  error: string;
  message: string;
}

/** `error`: the status and reason as attributes, the message as a child element. */
export class ErrorRepresentation implements RestView {
  constructor(private readonly view: ErrorView) {}

  toElement(): RestElement {
    const v = this.view;
    return {
      name: 'error',
      attributes: { status: v.status, error: v.error },
      children: [{ name: 'message', attributes: {}, text: v.message }],
    };
  }
}
