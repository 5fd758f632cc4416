"""The checkpoint store: one contract (`contract.StoreSaver`), savers as storage primitives.

`registry.get_saver` picks and builds a saver; `planning` holds the pure rules the
contract applies; `capabilities` what a store can do beyond LangGraph's interface.
"""
