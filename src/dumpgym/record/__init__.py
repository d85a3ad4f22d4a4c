"""The typed record every stage writes and reads: the corpus schema, typed JSON, dtypes, named sets of primitives and opcodes, and the registry of compile targets. Imports nothing of JAX."""
