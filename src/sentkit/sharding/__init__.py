"""Work spread over processes and joined into one output: sharded embedding (`embed`: parts, manifest,
join in input order) and sharded prepare (`prepare`: one corpus tokenized by N processes into the
store one process writes)."""
