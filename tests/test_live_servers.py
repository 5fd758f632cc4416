"""The suite's live servers set TCP_NODELAY on every connection they accept."""

import socket

from django.test.testcases import LiveServerThread

from tests.live_servers import NoDelayWSGIServer


def test_accepted_connections_send_without_nagles_delay():
    assert LiveServerThread.server_class is NoDelayWSGIServer
    server = NoDelayWSGIServer(("127.0.0.1", 0), None)
    client = socket.create_connection(server.server_address)
    try:
        accepted, _ = server.get_request()
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        accepted.close()
    finally:
        client.close()
        server.server_close()
