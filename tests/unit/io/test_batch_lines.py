"""LineBatch: the lines of many files made Arrow batches, copied only where that pays."""

from __future__ import annotations

import pyarrow as pa

from analyzer.io.batch_lines import LineBatch, _OWN_PIECE, _SMALL_PIECE
from analyzer.io.linereader import LineBlock


class _State:
    def __init__(self, file_id: int) -> None:
        self.file_id = file_id


def _run(tag: str, files: int, lines_per_file: int) -> list[LineBlock]:
    """Blocks of ``files`` files that are consecutive slices of one array (a run of small files)."""
    lines = pa.array([f"{tag}-{i}" for i in range(files * lines_per_file)], pa.large_string())
    return [LineBlock(1, lines.slice(k * lines_per_file, lines_per_file), 10, 10, True, True)
            for k in range(files)]


def test_part_runs_stay_uncopied_and_in_order_while_short_pieces_are_merged():
    # two runs, each of a vector's lines or more but fewer than a small piece's
    # (what a seal leaves when it cuts runs), then short files of arrays of their own
    a = _run("a", 6, (_OWN_PIECE + 100) // 6)
    b = _run("b", 5, (_OWN_PIECE + 50) // 5)
    short = [_run(f"s{i}", 1, 7)[0] for i in range(4)]
    assert all(len(x.lines) < _SMALL_PIECE for x in a + b + short)
    batch = LineBatch()
    blocks = a + b + short
    for i, block in enumerate(blocks):
        batch.add(_State(i), block, False, None)
    batch.seal()
    table = pa.Table.from_batches(batch.pieces)
    assert table.column("line").to_pylist() == [x for blk in blocks for x in blk.lines.to_pylist()]
    assert table.column("file_id").to_pylist() == [i for i, blk in enumerate(blocks) for _ in range(len(blk.lines))]
    data = [p.column(2).buffers()[2].address for p in batch.pieces]
    # each run is one batch over its own array's bytes (no copy); the short files, one merged batch
    assert data[:2] == [a[0].lines.buffers()[2].address, b[0].lines.buffers()[2].address]
    assert len(batch.pieces) == 3
