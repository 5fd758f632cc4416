"""Static files storage: WhiteNoise's hashed, compressed names, the manifest out of sight."""

from __future__ import annotations

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class ManifestOutsideStaticRoot(CompressedManifestStaticFilesStorage):
    """Keep ``staticfiles.json`` in DATA_DIR: in STATIC_ROOT it is served at /static/ and
    lists every file the service has, with its hash."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("manifest_storage", FileSystemStorage(location=settings.DATA_DIR))
        super().__init__(*args, **kwargs)

    def save_manifest(self):
        super().save_manifest()
        # One an earlier release wrote into STATIC_ROOT would be served still.
        if self.exists(self.manifest_name):
            self.delete(self.manifest_name)
