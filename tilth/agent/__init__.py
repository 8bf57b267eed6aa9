"""The agent loops: interview, worker, evaluator, stages and the outer run loop."""
