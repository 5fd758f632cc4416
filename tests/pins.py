"""The LangGraph versions the pins in pyproject.toml admit: the verified floors (the oldest
releases with every name the store imports) and the ceilings (the next major versions)."""

FLOORS = {"langgraph": (1, 2, 0), "langgraph-checkpoint": (4, 3, 0)}
CEILINGS = {"langgraph": (2,), "langgraph-checkpoint": (5,)}
