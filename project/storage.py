"""Static files storage: WhiteNoise's hashed, compressed names, the manifest out of sight."""

from __future__ import annotations

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class ManifestOutsideStaticRoot(CompressedManifestStaticFilesStorage):
    """Keep ``staticfiles.json`` in DATA_DIR: in STATIC_ROOT it is served at /static/ and
    lists every file the service has, with its hash.

    Before collectstatic has written the manifest (DJANGO_DEBUG=0 and runserver, as people
    try first), names are linked unhashed instead of every page answering 500 ("Missing
    staticfiles manifest entry"); the system check checkpoints.W050 (E050 on --deploy) says
    to run collectstatic.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("manifest_storage", FileSystemStorage(location=settings.DATA_DIR))
        super().__init__(*args, **kwargs)
        self.manifest_missing = not self.manifest_storage.exists(self.manifest_name)

    def stored_name(self, name):
        if self.manifest_missing and not self.hashed_files:
            return name
        return super().stored_name(name)

    def save_manifest(self):
        super().save_manifest()
        self.manifest_missing = False
        # One an earlier release wrote into STATIC_ROOT would be served still.
        if self.exists(self.manifest_name):
            self.delete(self.manifest_name)
