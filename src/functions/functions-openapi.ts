import { ArgumentType, ExportedFunction, isArrayType } from '../r-engine/exported-functions';

/**
 * The JSON Schema of a declared type (docs/functions.md): `T[]` is an array of T (null for NA) or
 * a single T, which R holds alike; an undeclared type is any JSON value.
 */
export function jsonSchemaOf(type: ArgumentType | null): Record<string, unknown> {
  if (type !== null && isArrayType(type)) {
    const item = type.slice(0, -2);
    return { type: ['array', item], items: { type: [item, 'null'] } };
  }
  switch (type) {
    case null:
    case 'any':
      return {};
    case 'number':
    case 'integer':
    case 'string':
    case 'boolean':
    case 'object':
    case 'array':
      return { type };
    case 'data.frame':
      return { type: 'array', items: { type: 'object' } };
  }
}

/**
 * The OpenAPI 3.1 description of one application's exported functions: one POST operation per
 * function, its request a JSON object of the named arguments (those without a default required),
 * its answer the function's value as JSON, documented by its roxygen block.
 */
export function functionsOpenApi(
  applicationName: string,
  functions: ExportedFunction[],
  baseUrl: string,
): object {
  const error = { $ref: '#/components/responses/Error' };
  const paths: Record<string, object> = {};
  for (const fn of functions) {
    const named = fn.arguments.filter((a) => a.name !== '...');
    const properties: Record<string, object> = {};
    for (const argument of named) {
      properties[argument.name] = {
        ...jsonSchemaOf(argument.type),
        description: [
          argument.description,
          argument.default === null ? null : `Default (R): ${argument.default}`,
        ]
          .filter((part) => part !== null)
          .join('. '),
      };
    }
    paths[`/svc/api/rest/functions/${applicationName}/${fn.name}`] = {
      post: {
        operationId: fn.name,
        summary: fn.title ?? fn.name,
        ...(fn.description ? { description: fn.description } : {}),
        parameters: [
          {
            name: 'Prefer',
            in: 'header',
            required: false,
            description: '`respond-async` queues the call as a job (202) instead of answering it.',
            schema: { type: 'string', enum: ['respond-async'] },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                properties,
                required: named.filter((a) => a.default === null).map((a) => a.name),
                additionalProperties: fn.arguments.some((a) => a.name === '...'),
              },
            },
          },
        },
        responses: {
          '200': {
            description: fn.returns ?? `The value of ${fn.name}, as JSON.`,
            content: { 'application/json': { schema: jsonSchemaOf(fn.returnType) } },
          },
          '202': {
            description: 'Queued (Prefer: respond-async): the job, its status at Location.',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
          '400': error,
          '401': error,
          '403': error,
          '404': error,
          '413': error,
          '415': error,
          '503': error,
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: `${applicationName}: exported R functions`,
      version: '1',
      description: `The R functions application ${applicationName} exports (roxygen @export), each called with a JSON object of its named arguments.`,
    },
    servers: [{ url: baseUrl }],
    paths,
    components: {
      responses: {
        Error: {
          description: 'An error: its message says what went wrong.',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                properties: { error: { type: 'object' } },
              },
            },
          },
        },
      },
    },
  };
}
