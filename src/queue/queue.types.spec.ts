import { isJobSource, JobSource, jobSourceOf } from './queue.types';

describe("a job's source", () => {
  it.each(Object.values(JobSource))('reads %s as a source', (value) => {
    expect(isJobSource(value)).toBe(true);
    expect(jobSourceOf(value)).toBe(value);
  });

  it.each(['', 'test', 'REST', 'rest ', 'mail'])('refuses "%s", naming it', (value) => {
    expect(isJobSource(value)).toBe(false);
    expect(() => jobSourceOf(value)).toThrow(`A job's source "${value}" is none of rest, form,`);
  });
});
