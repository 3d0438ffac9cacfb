"""The LiteLLM reader's cost per payload line: :func:`analyzer.io.litellm_records.map_block`.

The sample LiteLLM week's payloads (sample_logs/litellm, 28 calls as LiteLLM wrote
them) are repeated into one block of ``--lines`` lines; a tenth of them get a lone
surrogate escape in their answer (half an emoji, which the reader mends). The
script maps the block ``--repeat`` times and prints the median microseconds per
line, and the peak RSS of the process. Run it on two trees to compare them::

    PYTHONPATH=<tree under test> python benchmarks/litellm_read.py [--lines 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import statistics
import time
from pathlib import Path

from analyzer.io.linereader import LineBlock, arrow
from analyzer.io.litellm_records import map_block

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "litellm" / "s3"


def payload_lines() -> list[str]:
    """The sample week's payload lines, in file order."""
    out = []
    for path in sorted(SAMPLE.rglob("*.jsonl.gz")):
        out += [line for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]
    return out


def block_of(n: int) -> LineBlock:
    """``n`` payload lines (the sample's, repeated); every tenth with a lone surrogate escape in its answer."""
    pa, _ = arrow()
    sample = payload_lines()
    lines = []
    for i in range(n):
        line = sample[i % len(sample)]
        if i % 10 == 0:
            doc = json.loads(line)
            # json.dumps writes it as a lone \ud83d escape; the id goes into both records
            doc["litellm_call_id"] = f"{doc['litellm_call_id']}-\ud83d"
            line = json.dumps(doc)
        lines.append(line)
    size = sum(len(x) + 1 for x in lines)
    return LineBlock(1, pa.array(lines, pa.large_string()), size, size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    block = block_of(args.lines)
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        mapped, aside = map_block(block)
        times.append(time.perf_counter() - t)
    assert not aside and len(mapped.lines) == 2 * args.lines, (len(aside), len(mapped.lines))
    mended = sum("\ufffd" in line for line in mapped.lines.to_pylist())
    assert mended == 2 * len(range(0, args.lines, 10)), mended  # both records of each such line
    per_line = statistics.median(times) / args.lines * 1e6
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"map_block: {args.lines:,} LiteLLM payload lines (a tenth with a lone surrogate escape), "
          f"{args.repeat} runs")
    print(f"  median {per_line:.1f} us per line (min {min(times) / args.lines * 1e6:.1f}, "
          f"max {max(times) / args.lines * 1e6:.1f}); peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
