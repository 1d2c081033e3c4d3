"""Customers by email."""

from typing import Optional

from shop.models import Customer

from .base_repository import Repository


class CustomerRepository(Repository[Customer]):
    def by_email(self, email: str) -> Optional[Customer]:
        for customer in self.all():
            if customer.email == email:
                return customer
        return None
