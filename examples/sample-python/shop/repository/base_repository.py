"""Storage of entities by id, in memory."""

from typing import Generic, Optional, TypeVar

from shop.models.base import Entity

T = TypeVar("T", bound=Entity)


class Repository(Generic[T]):
    def __init__(self) -> None:
        self._items: dict[int, T] = {}
        self._next_id = 1

    def save(self, item: T) -> T:
        if item.entity_id is None:
            item.entity_id = self._next_id
            self._next_id += 1
        self._items[item.entity_id] = item
        return item

    def find(self, entity_id: int) -> Optional[T]:
        return self._items.get(entity_id)

    def all(self) -> list[T]:
        return list(self._items.values())
