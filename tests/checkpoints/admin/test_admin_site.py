"""The service's own admin templates (templates/): its name, and the operator's places."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_admin_says_checkpoint_store_and_links_sweep_audit_and_docs(client, superuser):
    client.force_login(superuser)
    page = client.get("/admin/").content.decode()
    assert "Checkpoint Store</a>" in page and "Django administration" not in page
    assert "<title>Site administration | Checkpoint Store</title>" in page
    for url in ("/admin/retention/sweeprun/sweep/", "/admin/checkpoints/auditevent/", "/api/docs/"):
        assert f'href="{url}"' in page, url
        assert client.get(url).status_code == 200, url
    client.logout()
    login = client.get("/admin/login/").content.decode()
    assert "Checkpoint Store</a>" in login and "Django administration" not in login
