"""Models room: named base models, pooling, the transformer encoder and its on-disk format."""
