"""Orders by customer and status."""

from shop.models import Customer, Order, OrderStatus

from .base_repository import Repository


class OrderRepository(Repository[Order]):
    def by_customer(self, customer: Customer) -> list[Order]:
        return [o for o in self.all() if o.customer is customer]

    def open_orders(self) -> list[Order]:
        return [o for o in self.all() if o.status == OrderStatus.OPEN]
