"""API routes for finish marks, declared retention and the sweep (filled in by the API work)."""

urlpatterns: list = []
