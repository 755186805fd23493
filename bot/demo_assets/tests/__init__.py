# Test package of the agent-d demo checkout (written for agent-d, TileGym-style layout).
