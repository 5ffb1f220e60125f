"""Everything that crosses a Temporal boundary: workflow and activity inputs and outputs, the run
report, the replan request and outcome. Plain pydantic models and enums; no engine, no world."""
