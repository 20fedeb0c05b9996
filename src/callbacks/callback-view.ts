import type { RestElement } from '../common/representation/rest-representation';

/** How the delivery of a job's callback stands, as its jobStatus shows it. */
export interface CallbackStatusView {
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  lastAttemptTime: Date | null;
  deliveryTime: Date | null;
}

/** The `callback` child of a jobStatus. */
export function callbackStatusElement(v: CallbackStatusView): RestElement {
  return {
    name: 'callback',
    attributes: {
      state: v.state,
      attempts: v.attempts,
      lastHttpStatus: v.lastHttpStatus,
      lastError: v.lastError,
      lastAttemptTime: v.lastAttemptTime,
      deliveryTime: v.deliveryTime,
    },
  };
}
