const DAY_MS = 24 * 60 * 60 * 1000;

/** The current time; tests replace it through `setNow`. */
let current: () => Date = () => new Date();

export function now(): Date {
  return current();
}

export function setNow(clock: () => Date): void {
  current = clock;
}

export function addDays(date: Date, days: number): Date {
  return new Date(date.getTime() + days * DAY_MS);
}

export const daysBetween = (from: Date, to: Date): number =>
  Math.floor((to.getTime() - from.getTime()) / DAY_MS);
