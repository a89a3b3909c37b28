"""Search over embeddings: a cached neighbour index of a corpus for any encoder with exact top-k
cosine search (`neighbours`), and the approximate index past a size over an ``embed`` output
(`index`; `sentkit.search` goes through it)."""
