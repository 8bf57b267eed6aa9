"""Recording the timeline: checkpoints, turn capture, the change feed, the blob store, retention.

Nothing here imports ``tilth.timeline.rewind``: going back reads what recording wrote.
"""
