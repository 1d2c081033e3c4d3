"""Discounts and taxes."""

from shop.models.money import Money

VAT_PERCENT = 20


def with_vat(amount: Money) -> Money:
    return Money(amount.cents * (100 + VAT_PERCENT) // 100, amount.currency)


def discounted(amount: Money, percent: int) -> Money:
    return Money(amount.cents * (100 - percent) // 100, amount.currency)
