"""Run LangGraph's own test suite (from the installed version's sdist) on our savers."""
