"""Where savers were imported from before the store package; kept as the public path.

`checkpoints.savers.get_saver` is public API (DESIGN.md); the savers live in
`checkpoints.store`.
"""

from checkpoints.store.contract import StoreSaver
from checkpoints.store.registry import PROVIDERS, get_saver

__all__ = ["get_saver", "StoreSaver", "PROVIDERS"]
