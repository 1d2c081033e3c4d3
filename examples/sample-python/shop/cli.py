"""A command line to try the shop."""

import sys

from shop.models import Customer, Money, OrderLine
from shop.repository.order_repository import OrderRepository
from shop.services.order_service import OrderService
from shop.util.text_util import *


def main(argv: list[str]) -> int:
    service = OrderService(OrderRepository())
    customer = Customer("Ada Lovelace", "ada@example.org")
    line = OrderLine("notebook", 2, Money(450))
    order = service.place(customer, [line])
    print(slug(customer.name), shorten(order.describe()))
    print("due:", service.amount_due(order))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
