import { ApiError } from '../common/api-error';
import { FLOW_MAX_STEPS, flowStepsOf } from './flow-definition';

function refusal(body: unknown): string {
  try {
    flowStepsOf(body);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).getStatus()).toBe(400);
    return (error as ApiError).message;
  }
  throw new Error('the flow was accepted');
}

describe('flowStepsOf', () => {
  it('orders the steps so that each follows the steps it needs', () => {
    const steps = flowStepsOf({
      steps: [
        { name: 'report', needs: ['fit1', 'fit2'], function: 'report' },
        { name: 'fit2', needs: ['prep'], function: 'fit', arguments: { k: 2 } },
        { name: 'fit1', needs: ['prep'], function: 'fit', arguments: { k: 1 } },
        { name: 'prep', function: 'prepare', arguments: { n: 100 } },
      ],
    });
    expect(steps.map((s) => s.name)).toEqual(['prep', 'fit2', 'fit1', 'report']);
    expect(steps[0]).toMatchObject({
      kind: 'function',
      function: 'prepare',
      argumentsJson: '{"n":100}',
      onFailure: 'fail',
      retries: 0,
      needs: [],
    });
  });

  it('reads a script step: its files from base64, its catalog script as rScript', () => {
    const [step] = flowStepsOf({
      steps: [
        {
          name: 'run',
          rScript: 'fit.R',
          meta: { model: 'lm' },
          files: { 'data.csv': Buffer.from('a,b').toString('base64') },
          onFailure: 'continue',
          retries: 2,
        },
      ],
    });
    expect(step).toEqual({
      name: 'run',
      kind: 'script',
      needs: [],
      onFailure: 'continue',
      retries: 2,
      meta: { model: 'lm', rScript: 'fit.R' },
      files: [{ name: 'data.csv', content: Buffer.from('a,b') }],
    });
  });

  it('refuses, naming the step: cycles, unknown needs, twins, bad fields', () => {
    expect(
      refusal({
        steps: [
          { name: 'a', needs: ['b'], function: 'f' },
          { name: 'b', needs: ['a'], function: 'f' },
          { name: 'c', function: 'f' },
        ],
      }),
    ).toMatch(/^step "[ab]": its needs make a cycle/);
    expect(refusal({ steps: [{ name: 'a', needs: ['a'], function: 'f' }] })).toMatch(
      /^step "a": its needs make a cycle/,
    );
    expect(refusal({ steps: [{ name: 'a', needs: ['x'], function: 'f' }] })).toBe(
      'step "a": it needs "x", which is no step of the flow.',
    );
    expect(
      refusal({
        steps: [
          { name: 'a', function: 'f' },
          { name: 'a', function: 'f' },
        ],
      }),
    ).toBe('step "a": another step has the same name.');
    expect(refusal({ steps: [{ name: '../x', function: 'f' }] })).toMatch(/^step #1: its "name"/);
    expect(refusal({ steps: [{ name: 'a', function: 'f', colour: 'red' }] })).toBe(
      'step "a": unknown field "colour".',
    );
    expect(refusal({ steps: [{ name: 'a', function: 'f', retries: 11 }] })).toMatch(
      /^step "a": "retries"/,
    );
    expect(refusal({ steps: [{ name: 'a', function: 'f', onFailure: 'ignore' }] })).toMatch(
      /^step "a": "onFailure"/,
    );
    expect(
      refusal({
        steps: [
          { name: 'p', function: 'f' },
          { name: 'a', needs: ['p'], function: 'f', arguments: { p: 1 } },
        ],
      }),
    ).toBe('step "a": the argument "p" is the result of the step it needs.');
    expect(
      refusal({
        steps: [
          { name: 's', files: { 'x.R': '' } },
          { name: 'a', needs: ['s'], function: 'f' },
        ],
      }),
    ).toMatch(/^step "a": a function step takes JSON values/);
    expect(refusal({ steps: [{ name: 's', files: { 'x.R': 'not base64!' } }] })).toMatch(
      /^step "s": the file "x.R" is not base64/,
    );
  });

  it('refuses a flow that is not one, empty or too long', () => {
    expect(refusal([])).toMatch(/"steps" is a list/);
    expect(refusal({ steps: [] })).toBe('A flow has at least one step.');
    expect(refusal({ steps: [], name: 'x' })).toBe('A flow has "steps" and nothing else.');
    expect(
      refusal({
        steps: Array.from({ length: FLOW_MAX_STEPS + 1 }, (_, i) => ({
          name: `s${i}`,
          function: 'f',
        })),
      }),
    ).toBe(`A flow has at most ${FLOW_MAX_STEPS} steps; this one has ${FLOW_MAX_STEPS + 1}.`);
  });
});
