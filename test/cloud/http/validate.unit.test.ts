import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { parseInput } from '../../../cloud/src/http/validate.ts';

/** The details of a 400 `invalid_request` in words a person reads (cloud/src/http/validate.ts). */
function detailsOf(schema: z.ZodType, input: unknown): { path: string; message: string }[] {
  try {
    parseInput(schema, input, 'body');
  } catch (err) {
    return (err as { details: { path: string; message: string }[] }).details;
  }
  throw new Error('parsed');
}

describe('parseInput', () => {
  const schema = z.strictObject({
    name: z.string().min(1).max(5),
    count: z.number().int().min(2).max(9),
    tags: z.array(z.string()).min(1).max(2),
    email: z.email(),
    kind: z.enum(['a', 'b']),
    note: z.string().refine((v) => v !== 'x', 'note may not be x'),
  });
  const good = { name: 'ab', count: 3, tags: ['t'], email: 'a@example.com', kind: 'a', note: 'y' };
  const message = (patch: Record<string, unknown>) => detailsOf(schema, { ...good, ...patch })[0];

  it("says what a field must be, without zod's own wording", () => {
    expect(message({ name: '' })).toEqual({ path: 'name', message: 'must not be empty' });
    expect(message({ name: 'abcdef' })).toEqual({ path: 'name', message: 'must be at most 5 characters' });
    expect(message({ name: 3 })).toEqual({ path: 'name', message: 'must be a string' });
    expect(message({ name: undefined })).toEqual({ path: 'name', message: 'required' });
    expect(message({ count: 1 })).toEqual({ path: 'count', message: 'must be at least 2' });
    expect(message({ count: 10 })).toEqual({ path: 'count', message: 'must be at most 9' });
    expect(message({ count: 2.5 })).toEqual({ path: 'count', message: 'must be an integer' });
    expect(message({ tags: [] })).toEqual({ path: 'tags', message: 'must not be empty' });
    expect(message({ tags: ['a', 'b', 'c'] })).toEqual({ path: 'tags', message: 'must be at most 2 items' });
    expect(message({ email: 'nope' })).toEqual({ path: 'email', message: 'must be an e-mail address' });
    expect(message({ kind: 'c' })).toEqual({ path: 'kind', message: 'must be one of "a", "b"' });
    expect(message({ extra: 1 })).toEqual({ path: '(root)', message: 'unknown field: extra' });
  });

  it('says the odd shapes plainly too: exact lengths, dates, bigint literals', () => {
    expect(detailsOf(z.object({ c: z.string().length(1) }), { c: '' })[0]).toEqual({
      path: 'c',
      message: 'must be exactly 1 character',
    });
    expect(detailsOf(z.object({ d: z.date().min(new Date(0)) }), { d: new Date(-1) })[0]).toEqual({
      path: 'd',
      message: 'must be at least 1970-01-01T00:00:00.000Z',
    });
    expect(detailsOf(z.object({ b: z.literal(5n) }), { b: 6n })[0]).toEqual({
      path: 'b',
      message: 'must be 5',
    });
  });

  it("keeps a schema's own messages", () => {
    expect(message({ note: 'x' })).toEqual({ path: 'note', message: 'note may not be x' });
  });
});
