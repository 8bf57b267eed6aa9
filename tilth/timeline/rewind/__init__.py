"""Going back on the timeline: the planner, the plan, the journaled executor and the verbs.

Every go-back (rewind, restart, reset to the seed, fork) is planned here as a value and
carried out by the one executor. Depends on ``tilth.timeline.record``, never the reverse.
"""
