"""Driving runs: the runner and its model seam (tool_loop: a turn that reads the repository)."""
