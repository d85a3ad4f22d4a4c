"""A traced program: the function and its example arguments, JAX's trace and lowering, one fact per equation, and the x-ray linking equations to StableHLO lines."""
