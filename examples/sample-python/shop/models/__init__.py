"""The shop's domain model."""

from .customer import Customer
from .money import Money
from .order import Order, OrderLine, OrderStatus

__all__ = ["Customer", "Money", "Order", "OrderLine", "OrderStatus"]
