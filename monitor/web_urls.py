"""The pages' URLs (filled in by the pages work)."""

urlpatterns: list = []
