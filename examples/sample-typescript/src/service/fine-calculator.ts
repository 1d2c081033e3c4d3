import { daysBetween } from '@lib/clock';
import type { Loan } from '../model/loan';
import type { MemberLevel } from '../model/member';

const DAILY_FINE: Record<MemberLevel, number> = { basic: 0.5, premium: 0.25 };

export class FineCalculator {
  constructor(private readonly cap: number = 20) {}

  fineFor(loan: Loan, returnedAt: Date): number {
    const late = daysBetween(loan.due, returnedAt);
    if (late <= 0) {
      return 0;
    }
    return Math.min(this.cap, late * DAILY_FINE[loan.member.level]);
  }
}
