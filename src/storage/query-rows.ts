/** Rows of a raw query: TypeORM returns UPDATE/DELETE ... RETURNING as [rows, count]. */
export function rowsOf<T>(raw: unknown): T[] {
  if (
    Array.isArray(raw) &&
    raw.length === 2 &&
    Array.isArray(raw[0]) &&
    typeof raw[1] === 'number'
  ) {
    return raw[0] as T[];
  }
  return raw as T[];
}

/** PostgreSQL's unique_violation: a row with that key exists already. */
export function isDuplicateKey(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}
