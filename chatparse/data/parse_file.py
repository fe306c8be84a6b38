"""`chatparse parse-file IN OUT --template NAME|FILE`: parse a JSONL or Parquet file of generations.

The formats follow the extensions (``.jsonl`` / ``.json`` / ``.ndjson``, ``.parquet`` / ``.pq``; a ``.gz``
after a JSONL one is read and written gzip-compressed). The file is streamed in batches of
``--batch-size`` rows, fewer where a batch would hold more than about 2 MB (JSONL: by its bytes; Parquet: by
the bytes per row of the file's first rows), so memory stays flat in the file's size and its rows' length: at
most ``2 * workers`` batches are in flight.
Each batch is parsed by `chatparse.data.arrow.parse_arrow` (one-shot path, one row = one ``CompiledTemplate.parse``)
in ``--workers`` processes, which load the compiled tables from the table-format bytes (not a pickle); the
bytes come from the disk cache when a run before made them (`chatparse.data.table_cache`).

Output rows are the input's fields followed by the message columns (`chatparse.data.arrow.MESSAGE_SCHEMA`:
role, reasoning_content, content, tool_calls with arguments as JSON text, extra, error), in input order;
``--drop-input`` keeps the message columns only, ``--column-prefix`` renames them. A JSONL line that is not
a JSON object becomes a row with only its ``error`` (``"JSONDecodeError: line N: ..."``). A row that fails to
parse carries its error and does not stop the run; a summary of failed rows (by error class, with the first
line numbers) goes to stderr at the end, after the progress bar (rows/s; ``--no-progress`` hides it).
The output is written to ``OUT.partial`` and renamed at the end, so a stopped run leaves no truncated OUT.

Before any row is parsed, a ``--text-column`` or ``--prefix-column`` the input does not have is an error (a
KeyError naming the column and the file: Parquet by its schema, JSONL by its first line that is a JSON object).
An input column whose values Parquet output cannot hold in one type is a ValueError naming the column. The
command exits 1 when rows were read and every one failed; its errors are one line (`chatparse.cli`).
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
import sys
import time
from pathlib import Path

JSONL_EXT = (".jsonl", ".json", ".ndjson")
PARQUET_EXT = (".parquet", ".pq")
FIRST_ERRORS = 5  # rows listed per error class in the summary

_state: dict = {}  # per worker process: the compiled template and the options


# ------------------------------------------------------------------------------------------------ formats
def file_format(path, what: str) -> str:
    """'jsonl' or 'parquet', from the extension of `path` (an error names `what` and the path)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
        if not name.endswith(JSONL_EXT):
            raise ValueError(f"{what}: {path}: compression (.gz) is supported for JSONL files only")
    if name.endswith(JSONL_EXT):
        return "jsonl"
    if name.endswith(PARQUET_EXT):
        return "parquet"
    raise ValueError(f"{what}: {path}: unknown extension (use {', '.join(JSONL_EXT + PARQUET_EXT)})")


def _open(path, mode: str):
    if str(path).lower().endswith((".gz", ".gz.partial")):
        return gzip.open(path, mode)
    return open(path, mode)


def _first_object(path, lines: int = 100):
    """``(line number, the object)`` of the first line of JSONL file `path` that is a JSON object, or None when
    its first `lines` lines hold none."""
    with _open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if n > lines:
                break
            try:
                obj = json.loads(line) if line.strip() else None
            except ValueError:
                continue
            if isinstance(obj, dict):
                return n, obj
    return None


def count_lines(path) -> int | None:
    """Lines of a JSONL file (for the progress bar's total); None for compressed files (not worth a pass)."""
    if str(path).lower().endswith(".gz"):
        return None
    n = 0
    last = b"\n"
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 24)
            if not block:
                break
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


# ------------------------------------------------------------------------------------------------ the work
class _NoPandas:
    """An import hook that refuses pandas. pyarrow imports pandas (about 45 MB) the first time it builds an
    array from a Python list, only to ask whether the list is a pandas object; the processes parse-file owns
    (its workers, and the command's own process) never hold one. Installed there only."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not loaded in chatparse parse-file's processes")
        return None


def _own_process() -> None:
    """Settings for the processes parse-file owns: no pandas (`_NoPandas`), and pyarrow on the system
    allocator, which hands freed batches back where mimalloc keeps them (25-40 MB less per process here)."""
    if "pandas" not in sys.modules and _NoPandas not in sys.meta_path:
        sys.meta_path.insert(0, _NoPandas)
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _init(tables: bytes, options: dict, own_process: bool = False) -> None:
    """Worker start: the compiled template from table-format bytes, once per process."""
    from ..runtime.tables.loader import compiled_from_bytes

    if own_process:
        _own_process()
    _state["compiled"] = compiled_from_bytes(tables)
    _state["options"] = options


def _work(kind: str, payload, first_line: int, ipc: bool = True):
    """One batch: ``(kind, payload)`` is ``("jsonl", bytes of lines)`` (the first one is line `first_line`),
    ``("arrow", IPC stream bytes)`` or ``("table", a pyarrow table)`` (its first row is row `first_line`).
    Returns ``(output, rows, {error class: [count, [(line, error)]]})``; the output is JSONL bytes, or for
    Parquet the Arrow table: as IPC stream bytes when `ipc` (a worker process's answer), else the table
    itself (one worker: no copy)."""
    import pyarrow as pa

    from .arrow import parse_arrow

    opts = _state["options"]
    cp, keep = opts["column_prefix"], not opts["drop_input"]
    objs = None  # JSONL read line by line: the objects
    bad: dict = {}  # row -> error text, for rows whose input cannot be read
    lines = None  # JSONL: the input line of each row (None where it is unreadable), for the output's fields
    if kind == "jsonl":
        table = _arrow_jsonl(payload, opts)
        if table is not None:  # the fast path: pyarrow's reader, all lines good
            numbers = range(first_line, first_line + table.num_rows)
            if keep and opts["out_format"] == "jsonl":
                lines = payload.split(b"\n")[:table.num_rows]
        else:  # line by line: blank lines skipped, each bad line its row's error
            lines = payload.split(b"\n")
            if lines and not lines[-1]:
                lines.pop()
            objs, numbers, kept = [], [], []
            for k, line in enumerate(lines):
                if not line.strip():
                    continue
                numbers.append(first_line + k)
                try:
                    obj = json.loads(line)
                    if not isinstance(obj, dict):
                        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
                except ValueError as e:
                    bad[len(objs)] = f"{type(e).__name__}: line {first_line + k}: {e}"
                    obj, line = None, None
                objs.append(obj)
                kept.append(line)
            lines = kept
            table = _jsonl_table(objs, numbers, bad, opts)
    elif kind == "table":
        table = payload
        numbers = range(first_line, first_line + table.num_rows)
    else:
        table = pa.ipc.open_stream(payload).read_all()
        numbers = range(first_line, first_line + table.num_rows)
    if keep:
        if objs is not None:
            names = {k for o in objs if o for k in o}
        else:
            names = table.schema.names
        clash = [cp + f for f in MESSAGE_COLUMNS if cp + f in names]
        if clash:
            raise ValueError(f"the input already has column(s) {clash}; pass --column-prefix (e.g. parsed_) "
                             "or --drop-input")
    parsed = parse_arrow(table, _state["compiled"], text_column=opts["text_column"], prefix=opts["prefix"],
                         prefix_column=opts["prefix_column"], tools_column=opts["tools_column"],
                         dialect=opts["dialect"], malformed=opts["malformed"], column_prefix=cp)
    if bad:  # unreadable rows carry their own error
        i_err = parsed.schema.get_field_index(cp + "error")
        errors = parsed.column(i_err).to_pylist()
        for i, msg in bad.items():
            errors[i] = msg
        parsed = parsed.set_column(i_err, cp + "error", pa.array(errors, pa.string()))
    summary: dict = {}
    err = parsed.column(cp + "error")
    if err.null_count < len(err):
        for i, e in enumerate(err.to_pylist()):
            if e is not None:
                entry = summary.setdefault(e.split(":", 1)[0], [0, []])
                entry[0] += 1
                if len(entry[1]) < FIRST_ERRORS:
                    entry[1].append((numbers[i], e[:300]))
    n = parsed.num_rows
    if opts["out_format"] == "jsonl":
        dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode
        rows = [dumps(row).encode("utf-8") for row in parsed.to_pylist()]
        if keep and lines is not None:  # the input line's own text, then the message fields
            rows = [row if line is None else _splice(line, row) for line, row in zip(lines, rows)]
        elif keep:  # Parquet in
            rows = [dumps({**base, **row}).encode("utf-8") for base, row in zip(table.to_pylist(),
                                                                              parsed.to_pylist())]
        return b"\n".join(rows) + b"\n" if rows else b"", n, summary
    if keep:
        base = table if objs is None else _input_table(objs, numbers)
        if base.num_columns == 0:
            base = pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        for f in parsed.schema:
            base = base.append_column(f, parsed.column(f.name))
        parsed = base
    if not ipc:
        return parsed, n, summary
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, parsed.schema) as w:
        w.write_table(parsed)
    return sink.getvalue().to_pybytes(), n, summary


def _input_table(objs: list, numbers) -> "pa.Table":
    """The JSONL objects as an Arrow table (for Parquet output); a column whose values do not share one type is
    a ValueError naming it and the line where its values stop fitting one type."""
    import pyarrow as pa

    bad = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)
    rows = [o if o is not None else {} for o in objs]
    try:
        return pa.Table.from_pylist(rows)
    except bad as e:
        error = e

    def fits(values) -> bool:
        try:
            pa.array(values)
            return True
        except bad:
            return False

    for name in dict.fromkeys(k for o in rows for k in o):
        values = [o.get(name) for o in rows]
        if not fits(values):
            lo, hi = 1, len(values)  # the shortest head of the column that does not fit: values[:hi]
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if not fits(values[:mid]) else (mid + 1, hi)
            raise ValueError(f"input column {name!r} mixes types: its {type(values[hi - 1]).__name__} at line "
                             f"{numbers[hi - 1]} does not fit the type of the lines before, and a Parquet column "
                             "holds one type; write JSONL, or pass --drop-input")
    raise ValueError(f"the input rows do not make a Parquet table ({error}); write JSONL, or pass --drop-input")


def _splice(line: bytes, fields: bytes) -> bytes:
    """The JSON object `line` with the members of the JSON object `fields` appended."""
    inner = line.rstrip()[:-1].rstrip()
    return inner + fields[1:] if inner.endswith(b"{") else inner + b", " + fields[1:]


_BLANK_INNER_LINE = re.compile(rb"\n[ \t\r\x0b\x0c]*\n")  # a line bytes.strip() empties, between two others


def _arrow_jsonl(payload: bytes, opts: dict):
    """The batch read by pyarrow's JSON reader (the columns parse_arrow reads typed as strings, the others
    as inferred), or None where it cannot be: a blank line, a line pyarrow rejects, a value
    that is not a string in a text column (those rows get their own errors line by line), a tools column
    (its schemas must stay as written, not unified across rows). Looks at the bytes in C only: no Python
    step per line."""
    import pyarrow as pa
    import pyarrow.json as pj

    body = payload[:-1] if payload.endswith(b"\n") else payload
    first_end = body.find(b"\n")
    if (opts["tools_column"] is not None or not body[:first_end if first_end >= 0 else len(body)].strip()
            or not body[body.rfind(b"\n") + 1:].strip() or _BLANK_INNER_LINE.search(body)):
        return None
    n_lines = body.count(b"\n") + 1
    names = [c for c in (opts["text_column"], opts["prefix_column"]) if c is not None]
    try:
        table = pj.read_json(
            pa.BufferReader(payload),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(payload) + 1, 1 << 20)),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema([(c, pa.string()) for c in names]),
                                          unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != n_lines or not all(c in table.schema.names for c in names):
        return None
    return table


MESSAGE_COLUMNS = ("role", "reasoning_content", "content", "tool_calls", "extra", "error")


def _jsonl_table(objs: list, numbers: list, bad: dict, opts: dict):
    """The columns `parse_arrow` reads, from the JSONL objects (tools as JSON text). A text or prefix that is
    not a string makes its row's error (in `bad`)."""
    import pyarrow as pa

    cols = {}
    for name, what in ((opts["text_column"], "--text-column"), (opts["prefix_column"], "--prefix-column")):
        if name is None:
            continue
        vals = []
        for i, o in enumerate(objs):
            v = None if o is None else o.get(name)
            if v is not None and not isinstance(v, str):
                bad.setdefault(i, f"TypeError: line {numbers[i]}: {what} {name!r} holds a "
                                  f"{type(v).__name__}, not a string")
                v = None
            vals.append(v)
        cols[name] = pa.array(vals, pa.string())
    tools = opts["tools_column"]
    if tools is not None:
        cols[tools] = pa.array([None if o is None or o.get(tools) is None else json.dumps(o[tools])
                                for o in objs], pa.string())
    if not cols:
        return pa.table({})
    return pa.table(cols)


# ------------------------------------------------------------------------------------------------ the driver
BATCH_BYTES = 2 << 20  # a batch also ends at about this many bytes (long rows: memory stays flat)


def _jsonl_batches(path, batch_size: int):
    """``("jsonl", bytes of whole lines, number of the first line)``, streaming: each batch is `batch_size`
    lines, or fewer where its bytes reach `BATCH_BYTES` first (the line that reaches it ends the batch) or
    the file ends. Blocks of `BATCH_BYTES` are read whole and a batch may span two or more of them (a line
    longer than a block is read on): batches are not cut short at block ends, since each batch costs
    pyarrow's JSON reader about 0.2 ms however few its rows (bench/PERF_NOTES.md#parse-file-batches). Line
    ends are found with `bytes.find`, once each, and a block's bytes are copied once, into their batch."""
    with _open(path, "rb") as f:
        line_no = 1
        pending: list = []  # the next batch's bytes read so far (from the blocks before this one)
        held_lines = held_bytes = 0  # its line ends, its bytes
        while True:
            block = f.read(BATCH_BYTES)
            if not block:  # the end of the file: what is held is the last batch (its last line may lack its end)
                if pending:
                    yield "jsonl", b"".join(pending), line_no
                return
            pos = 0
            while pos < len(block):
                need, cap = batch_size - held_lines, pos + BATCH_BYTES - held_bytes
                end, lines = _batch_end(block, pos, need, cap)
                if lines < need and not (lines and end >= cap):
                    pending.append(block[pos:] if pos else block)  # the batch goes on in the next block
                    held_lines += lines
                    held_bytes += len(block) - pos
                    break
                piece = block[pos:end]
                yield "jsonl", b"".join((*pending, piece)) if pending else piece, line_no
                line_no += held_lines + lines
                pending, held_lines, held_bytes = [], 0, 0
                pos = end


def _batch_end(data: bytes, start: int, n: int, cap: int) -> tuple:
    """``(end, lines)``: from `start`, just past the `n`-th line end of `data` or the first line end at or after
    offset `cap`, whichever comes first, and the line ends up to there; where neither comes, just past the
    last line end (`start` if none) and the line ends found (fewer than `n`, the last one before `cap`)."""
    pos, lines = start, 0
    while lines < n:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        pos, lines = nl + 1, lines + 1
        if pos >= cap:
            break
    return pos, lines


def _parquet_batches(path, batch_size: int, columns, ipc: bool = True):
    """``("arrow", IPC stream bytes, first row)`` per batch of rows, for worker processes; ``("table", the
    rows as a table, first row)`` when `ipc` is false (one worker: no copy). Batches of `batch_size` rows, or
    fewer where rows are long (`_parquet_batch_rows`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    row = 0
    for batch in pf.iter_batches(batch_size=_parquet_batch_rows(pf, batch_size, columns), columns=columns):
        if not ipc:
            yield "table", pa.Table.from_batches([batch]), row
            row += batch.num_rows
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        yield "arrow", sink.getvalue().to_pybytes(), row
        row += batch.num_rows


def _parquet_batch_rows(pf, batch_size: int, columns) -> int:
    """`batch_size`, or fewer so that a batch holds about `BATCH_BYTES` of Arrow data, as a JSONL batch does:
    memory stays flat however long the rows (4,096 rows of 100 KB generations would be 400 MB a batch). The
    bytes per row are those of the file's first rows (up to 64), read once; the file's metadata cannot tell,
    since its sizes are of encoded pages (a dictionary-encoded column of one repeated text counts it once)."""
    first = next(pf.iter_batches(batch_size=min(64, batch_size), columns=columns), None)
    if first is None or first.num_rows == 0:
        return batch_size
    per_row = first.nbytes / first.num_rows
    return max(1, min(batch_size, int(BATCH_BYTES / max(per_row, 1.0))))


class _Writer:
    """The output file: JSONL bytes appended, or Arrow batches into one Parquet file (the first batch's
    schema; later batches are cast to it, and an error names the column that will not fit).

    Parquet batches are held until they make a row group of `ROW_GROUP_ROWS` rows or `ROW_GROUP_BYTES` of
    Arrow data, whichever comes first (and at the end), not one row group per batch: readers plan and read by
    row groups (a 2.2M-row file of 2,000-row batches had 1,100 of them), and each costs the writer its own
    pages and metadata (on 100,000 short rows, 2,000-row groups took 1.8 µs of writing per row, 16,000-row
    ones 1.64, 64,000-row ones 1.44). The bytes bound keeps memory flat: with 32 MB, the 1 GB bench file's
    largest process grew by 36 MB (139 -> 175 MB), with 16 MB by 17 (156 MB)."""

    ROW_GROUP_ROWS = 65536
    ROW_GROUP_BYTES = 16 << 20

    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt = path, fmt
        self.wide: tuple = ()  # columns of long unique text (`_parquet_options`)
        self.tmp = path.with_name(path.name + ".partial")
        self.f = _open(self.tmp, "wb") if fmt == "jsonl" else None
        self.pq = None
        self.schema = None
        self.held: list = []  # tables of the next row group
        self.held_rows = self.held_bytes = 0

    def write(self, payload) -> None:
        """`payload`: JSONL bytes, or for Parquet an Arrow table or its IPC stream bytes."""
        if self.fmt == "jsonl":
            self.f.write(payload)
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = payload if isinstance(payload, pa.Table) else pa.ipc.open_stream(payload).read_all()
        if self.pq is None:
            self.schema = _widen(table.schema)
            self.pq = pq.ParquetWriter(str(self.tmp), self.schema, **_parquet_options(self.schema, self.wide))
        if table.schema != self.schema:
            table = _conform(table, self.schema, self.path)
        self.held.append(table)
        self.held_rows += table.num_rows
        self.held_bytes += table.nbytes
        if self.held_rows >= self.ROW_GROUP_ROWS or self.held_bytes >= self.ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.held:
            import pyarrow as pa

            table = self.held[0] if len(self.held) == 1 else pa.concat_tables(self.held)
            self.held, self.held_rows, self.held_bytes = [], 0, 0
            self.pq.write_table(table)

    def close(self, ok: bool) -> None:
        if self.f is not None:
            self.f.close()
        if self.pq is not None:
            if ok:
                self._flush()
            self.pq.close()
        elif self.fmt == "parquet" and ok:  # no rows at all: an empty file with the message columns
            import pyarrow.parquet as pq

            from .arrow import MESSAGE_SCHEMA

            pq.write_table(MESSAGE_SCHEMA.empty_table(), str(self.tmp))
        if ok:
            os.replace(self.tmp, self.path)
        else:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass


def _parquet_options(schema, wide) -> dict:
    """ParquetWriter settings: no dictionary encoding and no min/max statistics for the `wide` columns
    (generated text, prompts, message text: long and nearly all distinct, so a dictionary is built and then
    dropped, and the statistics are truncated strings no reader filters on). About 20% less writing time on
    ~3.5 KB rows (bench/results/DATASETS.md); the file reads the same."""
    narrow = [f.name for f in schema if f.name not in wide]
    return {"use_dictionary": narrow, "write_statistics": narrow}


def _widen(schema):
    """Input columns inferred as null from the first JSONL batch (all values missing there) become strings,
    so that later batches with values still fit."""
    import pyarrow as pa

    return pa.schema([f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in schema])


def _conform(table, schema, path):
    import pyarrow as pa

    cols = []
    for f in schema:
        if f.name not in table.schema.names:
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        try:
            cols.append(col if col.type == f.type else col.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValueError(f"{path}: input column {f.name!r} changes type from {f.type} to {col.type} "
                             f"between batches ({e}); write JSONL, or pass --drop-input") from None
    extra = [n for n in table.schema.names if n not in schema.names]
    if extra:
        raise ValueError(f"{path}: input column(s) {extra} first appear after the first batch, which Parquet "
                         "cannot add; write JSONL, use a larger --batch-size, or pass --drop-input")
    return pa.Table.from_arrays(cols, schema=schema)


def parse_file(src, dst, template, *, text_column: str = "text", prefix: str | None = None,
               prefix_column: str | None = None, tools_column: str | None = None, workers: int = 1,
               batch_size: int = 4096, drop_input: bool = False, column_prefix: str = "", dialect=None,
               malformed: str | None = None, progress: bool = True, stream=None) -> dict:
    """Parse the generations in file `src` into file `dst` (module docstring). Returns a summary:
    ``{"rows", "failed", "seconds", "errors": {class: [count, [(line or row, error), ...]]}}``."""
    stream = sys.stderr if stream is None else stream
    src, dst = Path(src), Path(dst)
    in_fmt, out_fmt = file_format(src, "IN"), file_format(dst, "OUT")
    if not src.is_file():
        raise FileNotFoundError(f"IN: {src} does not exist")
    if src.resolve() == dst.resolve():
        raise ValueError(f"OUT: {dst} is the input file")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {batch_size}")
    if prefix is None and prefix_column is None:
        raise ValueError('give --prefix-column (the chat prompt of each row) or --prefix (one for all rows; '
                         '--prefix "" opts out), because chat templates often pre-write part of the assistant '
                         "message")
    if prefix is not None and prefix_column is not None:
        raise ValueError("give either --prefix or --prefix-column, not both")
    tables = _tables_of(template)
    options = dict(text_column=text_column, prefix=prefix, prefix_column=prefix_column, tools_column=tools_column,
                   dialect=dialect, malformed=malformed, column_prefix=column_prefix, drop_input=drop_input,
                   out_format=out_fmt)
    if in_fmt == "jsonl":
        first = _first_object(src)
        for col, what in ((text_column, "--text-column"), (prefix_column, "--prefix-column")):
            if first is not None and col is not None and col not in first[1]:
                raise KeyError(f"{what}: no key {col!r} in line {first[0]} of {src}, its first row (its keys: "
                               f"{list(first[1])})")
        total = count_lines(src) if progress else None
        batches = _jsonl_batches(src, batch_size)
    else:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(src)
        total = meta.metadata.num_rows
        names = meta.schema_arrow.names
        for col, what in ((text_column, "--text-column"), (prefix_column, "--prefix-column"),
                          (tools_column, "--tools-column")):
            if col is not None and col not in names:
                raise KeyError(f"{what}: no column {col!r} in {src} (its columns: {names})")
        columns = None if not drop_input else [c for c in (text_column, prefix_column, tools_column) if c]
        batches = _parquet_batches(src, batch_size, columns, ipc=workers > 1)
    from tqdm import tqdm

    bar = tqdm(total=total, unit=" rows", unit_scale=True, file=stream, disable=not progress, smoothing=0.1,
               desc=src.name, dynamic_ncols=True)
    summary = {"rows": 0, "failed": 0, "errors": {}}
    writer = _Writer(dst, out_fmt)
    writer.wide = tuple(c for c in (text_column, prefix_column) if c) + tuple(
        column_prefix + c for c in ("reasoning_content", "content", "tool_calls", "extra", "error"))
    started = time.perf_counter()
    ok = False
    try:
        for out, n, errs in _run(batches, tables, options, workers):
            writer.write(out)
            summary["rows"] += n
            for cls, (count, first) in errs.items():
                entry = summary["errors"].setdefault(cls, [0, []])
                entry[0] += count
                entry[1].extend(first[: FIRST_ERRORS - len(entry[1])])
                summary["failed"] += count
            bar.update(n)
            if summary["failed"]:
                bar.set_postfix(failed=summary["failed"], refresh=False)
        ok = True
    finally:
        bar.close()
        writer.close(ok)
    summary["seconds"] = time.perf_counter() - started
    return summary


def _table_bytes_of(template) -> bytes:
    from .arrow import compiled_of, table_bytes

    return table_bytes(compiled_of(template, "--template"))


def _tables_of(template) -> bytes:
    """The template's table bytes: from the disk cache (`chatparse.data.table_cache`: a run after the first skips
    the compiler), else made in a short-lived process, so that the compiler's working memory (about 100 MB
    for a bundled template) never joins this long-running one, which then only loads the bytes."""
    if isinstance(template, (bytes, bytearray)):
        return bytes(template)
    from .table_cache import cached_table_bytes

    if isinstance(template, os.PathLike):
        template = os.fspath(template)
    return cached_table_bytes(template, lambda: _compile_apart(template))


def _compile_apart(template) -> bytes:
    import concurrent.futures
    import multiprocessing as mp

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(_table_bytes_of, template).result()


def _run(batches, tables: bytes, options: dict, workers: int):
    """The batches' results in input order: in this process for one worker, else in a pool of `workers`
    processes (started with spawn; each loads the tables from bytes once), at most 2 * workers in flight."""
    if workers == 1:
        _init(tables, options)
        for kind, payload, first in batches:
            yield _work(kind, payload, first, ipc=False)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    pending: collections.deque = collections.deque()
    with ctx.Pool(workers, initializer=_init, initargs=(tables, options, True)) as pool:
        for kind, payload, first in batches:
            pending.append(pool.apply_async(_work, (kind, payload, first)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def format_summary(summary: dict, src, dst) -> str:
    rows, failed, secs = summary["rows"], summary["failed"], summary["seconds"]
    rate = rows / secs if secs > 0 else float("inf")
    lines = [f"chatparse: {rows} rows from {src} to {dst} in {secs:.1f} s ({rate:,.0f} rows/s); "
             f"{failed} failed" + (":" if failed else "")]
    where = "line" if file_format(src, "IN") == "jsonl" else "row"
    for cls, (count, first) in sorted(summary["errors"].items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {cls}: {count} row(s)")
        for at, err in first:
            err = err.replace("\n", "\\n")
            lines.append(f"    {where} {at}: {err[:160]}{'...' if len(err) > 160 else ''}")
    return "\n".join(lines)
