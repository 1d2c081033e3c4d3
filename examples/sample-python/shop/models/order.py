"""Orders and their lines."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional

from .base import Entity
from .customer import Customer
from .money import Money


class OrderStatus(Enum):
    OPEN = "open"
    PAID = "paid"
    SHIPPED = "shipped"


@dataclass
class OrderLine:
    product: str
    quantity: int
    unit_price: Money
    tags: list[str] = field(default_factory=list)

    def total(self) -> Money:
        return self.unit_price.times(self.quantity)


class Order(Entity):
    """A customer's order of some lines."""

    def __init__(self, customer: Customer, entity_id: Optional[int] = None) -> None:
        super().__init__(entity_id)
        self.customer = customer
        self.lines: list[OrderLine] = []
        self.status = OrderStatus.OPEN

    def add_line(self, line: OrderLine) -> None:
        self.lines.append(line)

    def total(self) -> Money:
        amount = Money(0)
        for line in self.lines:
            amount = amount.plus(line.total())
        return amount

    def mark_paid(self) -> None:
        self.status = OrderStatus.PAID
