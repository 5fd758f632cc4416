"""The Platform's meta routes: ``/ok`` (and the mount's root) and ``/info``.

Both answer without credentials, as the Platform's do: LangGraph Studio reads ``/info``
before it asks for a key, and a load balancer probes ``/ok``. Neither says anything a
caller could not learn by sending a request: the versions, and which features exist.
"""

from __future__ import annotations

from importlib import metadata

import langgraph.version
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from checkpoints.langgraph_api.base import LangGraphView


def store_version() -> str:
    try:
        return metadata.version("checkpoint-store")
    except metadata.PackageNotFoundError:
        # Run from a source tree that was never installed: no version recorded.
        return "0+unknown"


class MetaView(LangGraphView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    http_method_names = ["get", "head", "options"]


class OkView(MetaView):
    def get(self, request):
        # The Platform lists the services it probed; this probe checks nothing behind it
        # (``/health/`` checks the store's databases).
        return Response({"ok": True, "services": {}})


class InfoView(MetaView):
    def get(self, request):
        return Response(
            {
                "version": store_version(),
                "langgraph_py_version": langgraph.version.__version__,
                "flags": {
                    # Read-only assistants (the registered graphs); no crons, no tracing.
                    "assistants": True,
                    "crons": False,
                    "langsmith": False,
                    "langsmith_tracing_replicas": False,
                    "langsmith_tracing_session_on_runs": False,
                },
                "host": {
                    "kind": "self-hosted",
                    "project_id": None,
                    "host_revision_id": None,
                    "revision_id": None,
                    "tenant_id": None,
                },
            }
        )
