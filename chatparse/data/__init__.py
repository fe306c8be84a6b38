"""Datasets of generations: `arrow` (pyarrow batches in, message columns out, built in one pass by the C module
`_message_columns.c` where built), `parse_file` (a JSONL or Parquet file streamed through worker processes),
`table_cache` (compiled tables kept on disk between runs). Built on the public API (`chatparse.compiled`,
`chatparse.tokenizer_dir`); the command line of `parse_file` is `chatparse.cli.parse_file`."""
