/** Something the library keeps: it has an id and knows when it was created. */
export abstract class Entity {
  readonly createdAt: Date;

  constructor(public readonly id: string) {
    this.createdAt = new Date();
  }

  /** A short label for logs and lists. */
  abstract describe(): string;

  equals(other: Entity): boolean {
    return this.id === other.id;
  }
}
