"""Customers of the shop."""

from typing import Optional

from .base import Entity


class Customer(Entity):
    """Someone who orders."""

    def __init__(self, name: str, email: str, entity_id: Optional[int] = None) -> None:
        super().__init__(entity_id)
        self.name = name
        self.email = email
        self.vip: bool = False

    def display_name(self) -> str:
        # VIPs get a star in every listing.
        return f"{self.name} *" if self.vip else self.name
