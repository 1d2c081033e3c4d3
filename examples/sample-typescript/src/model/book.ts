import { Entity } from './entity';

export interface BookInput {
  title: string;
  author: string;
  isbn: string;
  copies?: number;
}

export class Book extends Entity {
  private available: number;

  constructor(
    id: string,
    public readonly title: string,
    public readonly author: string,
    public readonly isbn: string,
    private readonly copies: number = 1,
  ) {
    super(id);
    this.available = copies;
  }

  describe(): string {
    return `${this.title} by ${this.author}`;
  }

  isAvailable(): boolean {
    return this.available > 0;
  }

  checkOut(): void {
    if (!this.isAvailable()) {
      throw new Error(`no copy of ${this.isbn} left`);
    }
    this.available -= 1;
  }

  giveBack(): void {
    this.available = Math.min(this.copies, this.available + 1);
  }
}
