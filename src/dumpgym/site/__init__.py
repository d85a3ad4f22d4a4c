"""The gym as static files: the inputs read from the corpus, the pages, highlighting, the curriculum, the kept rendered files."""
