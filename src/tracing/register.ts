/**
 * Imported first by main.ts: when tracing is on (tracing-settings.ts), starts the OpenTelemetry
 * SDK before the modules it instruments (http, Express, pg) are loaded. When it is off, nothing
 * of OpenTelemetry is loaded at all.
 */
import { tracingSettingsOf } from './tracing-settings';

const settings = tracingSettingsOf(process.env);
if (settings) {
  // Loaded only here, on demand: a service without tracing pays nothing for the SDK.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const sdk = require('./otel-tracing') as typeof import('./otel-tracing');
  sdk.startTracing(settings);
}
