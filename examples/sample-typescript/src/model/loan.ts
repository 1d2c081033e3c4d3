import { Entity } from './entity';
import type { Book } from './book';
import type { Member } from './member';

export enum LoanStatus {
  Open = 'open',
  Returned = 'returned',
  Overdue = 'overdue',
}

export class Loan extends Entity {
  status: LoanStatus = LoanStatus.Open;
  returnedAt?: Date;

  constructor(
    id: string,
    readonly book: Book,
    readonly member: Member,
    readonly due: Date,
  ) {
    super(id);
  }

  describe(): string {
    return `${this.book.describe()} lent to ${this.member.describe()}`;
  }

  close(at: Date): void {
    this.returnedAt = at;
    this.status = LoanStatus.Returned;
  }
}
