export * from './entity';
export * from './book';
export * from './member';
export { Loan, LoanStatus } from './loan';
