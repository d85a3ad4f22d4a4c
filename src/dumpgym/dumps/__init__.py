"""A folder a run wrote (JAX_DUMP_IR_TO, --xla_dump_to): its modules found, read and linked into records."""
