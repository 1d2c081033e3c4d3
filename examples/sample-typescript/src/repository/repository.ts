import type { Entity } from '../model/entity';

export interface Repository<T extends Entity> {
  find(id: string): T | undefined;
  all(): readonly T[];
  save(entity: T): T;
  remove(id: string): boolean;
}

/** Keeps entities in a map, in the order they were first saved. */
export class InMemoryRepository<T extends Entity> implements Repository<T> {
  protected readonly items = new Map<string, T>();

  find(id: string): T | undefined {
    return this.items.get(id);
  }

  all(): readonly T[] {
    return [...this.items.values()];
  }

  save(entity: T): T {
    this.items.set(entity.id, entity);
    return entity;
  }

  remove(id: string): boolean {
    return this.items.delete(id);
  }
}
