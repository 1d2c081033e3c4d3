"""What every stored entity has."""

from datetime import datetime
from typing import Optional


class Entity:
    """A stored object with an id and the time it was created."""

    def __init__(self, entity_id: Optional[int] = None) -> None:
        self.entity_id = entity_id
        self.created_at: datetime = datetime.now()

    def is_new(self) -> bool:
        return self.entity_id is None

    def describe(self) -> str:
        return f"{type(self).__name__}#{self.entity_id}"
