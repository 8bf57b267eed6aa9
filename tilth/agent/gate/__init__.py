"""The objective gate: the seed tests in the project's interpreter, and what proves they passed."""
