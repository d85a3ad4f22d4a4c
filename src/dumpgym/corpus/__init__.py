"""The corpus: the built-in and the user's stores of program records, and the one pipeline that makes a record."""
