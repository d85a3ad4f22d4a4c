"""The compiled layers: XLA's compile of a traced program for a target, each instruction tied to its equations."""
