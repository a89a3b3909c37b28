"""Packing a token store into fixed-length sequences for masked-LM training (RoBERTa's
FULL-SENTENCES scheme): documents are read back to back with a separator after each one, and the
stream is cut into bodies of `body` tokens. A sequence crosses a document boundary only through a
separator."""

from __future__ import annotations

import numpy as np

from sentkit.core.errors import InputError


class Packing:
    """Sequence i is ``stream[i * body : (i + 1) * body]`` of the virtual stream
    ``doc0 SEP doc1 SEP ...``; the last partial body is dropped (unless it is the only one)."""

    def __init__(self, offsets: np.ndarray, body: int, sep_id: int) -> None:
        if body < 1:
            raise InputError(f"body must be at least 1 token, got {body}")
        self.offsets = np.asarray(offsets, dtype=np.int64)  # [docs + 1]
        n_docs = len(self.offsets) - 1
        # virtual start of document d: its token offset plus the d separators before it
        self.vstart = self.offsets[:-1] + np.arange(n_docs, dtype=np.int64)  # [docs]
        self.length = int(self.offsets[-1]) + n_docs  # tokens + separators
        self.body = body
        self.sep_id = sep_id
        self.count = max(1, self.length // body) if self.length else 0

    def __len__(self) -> int:
        return self.count

    def sequence(self, i: int, tokens: np.ndarray) -> np.ndarray:
        """The body of sequence i (`tokens`: the store's flat token array) -> int64 [<= body]."""
        if not 0 <= i < self.count:
            raise IndexError(f"sequence {i} of {self.count}")
        s, e = i * self.body, min((i + 1) * self.body, self.length)
        d = int(np.searchsorted(self.vstart, s, side="right")) - 1
        parts: list[np.ndarray] = []
        pos = s
        while pos < e:
            doc_len = int(self.offsets[d + 1] - self.offsets[d])
            inner = pos - int(self.vstart[d])  # position inside document d (doc_len = its separator)
            if inner < doc_len:
                take = min(doc_len - inner, e - pos)
                start = int(self.offsets[d]) + inner
                parts.append(np.asarray(tokens[start : start + take], dtype=np.int64))
                pos += take
            else:
                parts.append(np.asarray([self.sep_id], dtype=np.int64))
                pos += 1
                d += 1
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
