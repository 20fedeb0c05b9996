import {
  isJsonObject,
  JsonObject,
  Satisfies,
  unknownFields,
  WholeSatisfies,
} from '../common/dto-validation';

const PARTS = ['security', 'settings', 'slots'];
/** Fields of the GET answer a client may send back unchanged in a PUT: they are ignored. */
const READ_ONLY = ['application', 'source', 'version', 'updatedAt', 'updatedBy'];

/**
 * A PUT body, `{"security": {…}, "settings": {…}, "slots": n}`: its shape. What the parts hold is
 * checked by the service with the start-up checks of APPLICATION_SECURITY and APPLICATION_SETTINGS
 * (the settings against what is stored), and slots after them, as they always were.
 */
@JsonObject('The body must be a JSON object: {"security": {…}, "settings": {…}, "slots": …}.')
@WholeSatisfies((body) => {
  const [unknown] = unknownFields(body, [...PARTS, ...READ_ONLY]);
  return unknown === undefined
    ? undefined
    : `${unknown.slice(0, 64)}: unknown field (known: ${PARTS.join(', ')})`;
})
export class ApplicationEntryDto {
  /** Absent: no rights of its own. */
  @Satisfies((value) =>
    value === undefined || isJsonObject(value)
      ? undefined
      : 'security: must be an object, as an APPLICATION_SECURITY entry',
  )
  security?: Record<string, unknown>;

  /** Absent: no settings of its own. */
  @Satisfies((value) =>
    value === undefined || isJsonObject(value)
      ? undefined
      : 'settings: must be an object, as an APPLICATION_SETTINGS entry',
  )
  settings?: Record<string, unknown>;

  /** Checked by the service, after the parts' checks against the configuration's. */
  slots?: unknown;

  // Read-only fields of the GET answer, ignored.
  application?: unknown;
  source?: unknown;
  version?: unknown;
  updatedAt?: unknown;
  updatedBy?: unknown;
}
