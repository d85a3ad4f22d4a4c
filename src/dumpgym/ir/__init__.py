"""The one reader of compiler text: jaxpr, StableHLO (jaxlib's MLIR bindings) and HLO (XLA's bindings and printed form). Produces parsed modules and facts; nothing else imports jaxlib's bindings."""
