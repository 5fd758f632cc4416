"""Benchmarks of the checkpoint savers against LangGraph's own and raw storage floors."""
