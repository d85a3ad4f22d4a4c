"""The gym over HTTP from memory: the server, its request head, its render workers."""
