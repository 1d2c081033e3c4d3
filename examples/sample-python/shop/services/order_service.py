"""Placing and paying orders."""

import logging

from shop.models import Customer, Money, Order, OrderLine

from ..repository.order_repository import OrderRepository
from . import pricing

log = logging.getLogger(__name__)


class OrderService:
    def __init__(self, orders: OrderRepository) -> None:
        self.orders = orders

    def place(self, customer: Customer, lines: list[OrderLine]) -> Order:
        order = Order(customer)
        for line in lines:
            order.add_line(line)
        log.info("placed order for %s", customer.display_name())
        return self.orders.save(order)

    def amount_due(self, order: Order) -> Money:
        total: Money = order.total()
        if order.customer.vip:
            total = pricing.discounted(total, 10)
        return pricing.with_vat(total)

    def pay(self, order_id: int) -> Order:
        order = self.orders.find(order_id)
        if order is None:
            raise KeyError(f"no order {order_id}")
        order.mark_paid()
        return order
