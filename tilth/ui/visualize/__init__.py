"""``tilth visualize``: one self-contained page of everything a session did."""
