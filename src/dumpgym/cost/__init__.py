"""What each compiled instruction costs on a named chip, the table and page views of it, and two compiles compared."""
