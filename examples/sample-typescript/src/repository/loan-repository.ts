import { Loan, LoanStatus } from '../model/loan';
import type { Member } from '../model/member';
import { InMemoryRepository } from './repository';

export class LoanRepository extends InMemoryRepository<Loan> {
  openLoansOf(member: Member): Loan[] {
    return this.all().filter(
      (loan) => loan.member.equals(member) && loan.status !== LoanStatus.Returned,
    );
  }

  overdue(at: Date): Loan[] {
    return this.all().filter((loan) => loan.status === LoanStatus.Open && loan.due < at);
  }
}
