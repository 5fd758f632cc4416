"""Live test servers that answer without Nagle's delay.

Django's test server writes a response's headers and body in separate sends; on a
keep-alive connection the second waits for the client's delayed ACK (about 40 ms on Linux)
unless TCP_NODELAY is set. A test of the remote saver makes one HTTP call per saver call,
so a LangGraph test of a few dozen calls spent most of a second in those waits. Servers in
production (uvicorn, gunicorn) set TCP_NODELAY themselves; Django's test server does not.
"""

from __future__ import annotations

import socket

from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread


class NoDelayWSGIServer(ThreadedWSGIServer):
    def get_request(self):
        sock, address = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


# pytest-django's live_server and the LangGraph suite's service thread both build their
# server from this attribute.
LiveServerThread.server_class = NoDelayWSGIServer
