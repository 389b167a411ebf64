# A partial stub: the one Django type mypy cannot infer without django-stubs (which found more
# errors than it removed here). Every other name of the package is Any, as without stubs.
from typing import Any

def __getattr__(name: str) -> Any: ...
