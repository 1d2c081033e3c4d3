"""A small shop: customers, orders and the services around them."""

__version__ = "0.3.0"
