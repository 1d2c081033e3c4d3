import { addDays, now } from '@lib/clock';
import { nextId } from '@lib/ids';
import { Book, Loan, Member } from '../model';
import { BookRepository } from '../repository/book-repository';
import { LoanRepository } from '../repository/loan-repository';
import { FineCalculator } from './fine-calculator';

const LOAN_DAYS = 21;

export class LoanError extends Error {}

export class LoanService {
  private readonly fines = new FineCalculator();

  constructor(
    private readonly books: BookRepository,
    private readonly loans: LoanRepository,
  ) {}

  lend(book: Book, member: Member): Loan {
    if (this.loans.openLoansOf(member).length >= member.maxLoans()) {
      throw new LoanError(`${member.name} has too many books`);
    }
    book.checkOut();
    const loan = new Loan(nextId('loan'), book, member, addDays(now(), LOAN_DAYS));
    return this.loans.save(loan);
  }

  giveBack(loan: Loan): number {
    const at: Date = now();
    const fine = this.fines.fineFor(loan, at);
    loan.close(at);
    loan.book.giveBack();
    loan.member.addFine(fine);
    return fine;
  }

  async lendByIsbn(isbn: string, member: Member): Promise<Loan> {
    const book = this.books.findByIsbn(isbn);
    if (book === undefined) {
      throw new LoanError(`unknown book ${isbn}`);
    }
    return this.lend(book, member);
  }
}
