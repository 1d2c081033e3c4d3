const counters = new Map<string, number>();

/** The next id for a kind of entity: `book-1`, `book-2`, ... */
export function nextId(prefix: string): string {
  const next = (counters.get(prefix) ?? 0) + 1;
  counters.set(prefix, next);
  return `${prefix}-${next}`;
}

export function resetIds(): void {
  counters.clear();
}
