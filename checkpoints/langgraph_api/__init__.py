"""LangGraph Platform's threads API over the store, for ``langgraph-sdk``'s client.

Add ``"checkpoints.langgraph_api"`` to INSTALLED_APPS (it keeps each thread's Platform
metadata) and mount ``path("langgraph/", include("checkpoints.langgraph_api.urls"))``.
"""
