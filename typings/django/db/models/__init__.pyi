# A partial stub: TextChoices as the str enum it is, so `RunKind.PROBE` types as a `str`
# (without a stub mypy reads the member as the tuple it is written as). Everything else is Any.
import enum
from typing import Any

class ChoicesType(enum.EnumMeta):
    @property
    def choices(cls) -> list[tuple[Any, str]]: ...
    @property
    def values(cls) -> list[Any]: ...
    @property
    def labels(cls) -> list[str]: ...

class Choices(enum.Enum, metaclass=ChoicesType):  # type: ignore[misc]
    @property
    def label(self) -> str: ...

class TextChoices(str, Choices):  # type: ignore[misc]
    @property
    def value(self) -> str: ...

def __getattr__(name: str) -> Any: ...
