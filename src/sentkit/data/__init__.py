"""Data room: the corpus reader every method uses, and the prepared token store."""

from sentkit.data.corpus import CorpusError, CorpusStats, Document, iter_documents

__all__ = ["CorpusError", "CorpusStats", "Document", "iter_documents"]
