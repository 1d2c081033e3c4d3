import { Entity } from './entity';

export type MemberLevel = 'basic' | 'premium';

export class Member extends Entity {
  private fines = 0;

  constructor(
    id: string,
    public readonly name: string,
    public readonly email: string,
    public level: MemberLevel = 'basic',
  ) {
    super(id);
  }

  describe(): string {
    return `${this.name} <${this.email}>`;
  }

  maxLoans(): number {
    return this.level === 'premium' ? 10 : 3;
  }

  addFine(amount: number): void {
    this.fines += amount;
  }

  owes(): number {
    return this.fines;
  }
}
