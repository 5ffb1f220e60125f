"""A support team's refund agent: a LangGraph graph run on Temporal (``temporalio-langgraph``),
whose refund tool is the team's own activity, guarded by plangate."""
