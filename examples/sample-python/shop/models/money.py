"""Amounts of money in one currency."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Money:
    cents: int
    currency: str = "EUR"

    def plus(self, other: "Money") -> "Money":
        if other.currency != self.currency:
            raise ValueError("currencies differ")
        return Money(self.cents + other.cents, self.currency)

    def times(self, factor: int) -> "Money":
        return Money(self.cents * factor, self.currency)

    def __str__(self) -> str:
        return f"{self.cents / 100:.2f} {self.currency}"
