"""The store service's routes; a host mounts them with
``path("store/v1/", include("checkpoints.store_service.urls"))`` (the remote saver's URL
is then ``checkpoints+https://host/<the host's prefix>``)."""

from django.urls import path

from checkpoints.store_service.views import StoreServiceView

app_name = "store_service"

urlpatterns = [path("<str:call>", StoreServiceView.as_view(), name="call")]
