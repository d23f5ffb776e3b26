"""Prints the exact bits of a run's metrics.jsonl, one line per step: every *_hex field
but the wall-clock ones, and num_zeros (an integer). tests/e2e/test_pinned_bits.sh
compares this against the files in tests/e2e/pinned/."""
import json
import sys

WALL_CLOCK = ("step_ms_hex", "tok_per_s_hex")
for line in open(sys.argv[1]):
    d = json.loads(line)
    bits = [f"{k}={v}" for k, v in d.items() if k.endswith("_hex") and k not in WALL_CLOCK]
    print(d["step"], " ".join(bits), f"num_zeros={d['num_zeros']}")
