"""API routes for threads, history, state and time travel (filled in by the API work)."""

urlpatterns: list = []
