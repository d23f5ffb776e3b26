#!/usr/bin/env bash
# `detrain data` through the binary: tokenize a file (one shard, split shards, a
# validation shard), `info` reports the header, the shard bytes are the input bytes,
# `builtin` writes the corpus, and malformed shards and bad flags fail with exit 2 and a
# message naming the problem.
set -u
DETRAIN=${DETRAIN:-build/detrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect RC PATTERN CMD...: runs CMD, requires exit code RC and PATTERN in its output
expect() {
  local rc=$1 pat=$2; shift 2
  local out; out=$("$@" 2>&1); local got=$?
  [ "$got" -eq "$rc" ] || fail "$* -> rc $got, want $rc: $out"
  printf '%s' "$out" | grep -q -- "$pat" || fail "$* -> output lacks '$pat': $out"
}

python3 -c "import sys; sys.stdout.buffer.write(bytes((i * 7 + i // 3) % 256 for i in range(3000)))" > "$tmp/in.dat"

expect 0 "wrote $tmp/one.bin: 3000 tokens" "$DETRAIN" data tokenize --bytes "$tmp/in.dat" --out "$tmp/one.bin"
expect 0 "tokens    3000" "$DETRAIN" data info "$tmp/one.bin"
expect 0 "magic     20240520" "$DETRAIN" data info "$tmp/one.bin" --vocab 256
expect 0 "version   1" "$DETRAIN" data info "$tmp/one.bin"
expect 0 "max_token 255" "$DETRAIN" data info "$tmp/one.bin"
[ "$(stat -c %s "$tmp/one.bin")" -eq $((1024 + 6000)) ] || fail "one.bin has the wrong size"
# the tokens are the input bytes, widened to little-endian uint16
python3 - "$tmp/in.dat" "$tmp/one.bin" <<'PY' || fail "shard tokens differ from the input bytes"
import struct, sys
data = open(sys.argv[1], 'rb').read()
shard = open(sys.argv[2], 'rb').read()
hdr = struct.unpack('<256i', shard[:1024])
assert hdr[:3] == (20240520, 1, len(data)) and not any(hdr[3:]), hdr[:3]
assert list(struct.unpack('<%dH' % len(data), shard[1024:])) == list(data)
PY

# split into shards of at most 1000 tokens, with a 10% validation shard
expect 0 "wrote $tmp/split.val.bin: 300 tokens" "$DETRAIN" data tokenize --bytes "$tmp/in.dat" \
  --out "$tmp/split.bin" --val-fraction 0.1 --shard-tokens 1000
for f in split_000000 split_000001 split_000002 split.val; do
  [ -f "$tmp/$f.bin" ] || fail "missing $f.bin"
done
expect 0 "tokens    700" "$DETRAIN" data info "$tmp/split_000002.bin"
cat "$tmp"/split_00000[0-2].bin > /dev/null || fail "split shards unreadable"

expect 0 "1048576 tokens" "$DETRAIN" data builtin --out "$tmp/builtin.bin"
expect 0 "max_token" "$DETRAIN" data info "$tmp/builtin.bin" --vocab 256

# malformed shards: each names the file and the problem, exit 2
cp "$tmp/one.bin" "$tmp/magic.bin"; printf '\x00' | dd of="$tmp/magic.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
expect 2 "magic.bin: bad magic" "$DETRAIN" data info "$tmp/magic.bin"
cp "$tmp/one.bin" "$tmp/version.bin"; printf '\x02' | dd of="$tmp/version.bin" bs=1 seek=4 conv=notrunc 2>/dev/null
expect 2 "unsupported version 2" "$DETRAIN" data info "$tmp/version.bin"
head -c 2000 "$tmp/one.bin" > "$tmp/trunc.bin"
expect 2 "trunc.bin: truncated" "$DETRAIN" data info "$tmp/trunc.bin"
expect 2 "is >= vocab size 200" "$DETRAIN" data info "$tmp/one.bin" --vocab 200
expect 2 "cannot open" "$DETRAIN" data info "$tmp/none.bin"

# usage errors: exit 2 with a message; --help exits 0
expect 2 "unknown argument '--frobnicate'" "$DETRAIN" data tokenize --bytes "$tmp/in.dat" --out "$tmp/x.bin" --frobnicate
expect 2 "--out PATH is required" "$DETRAIN" data tokenize --bytes "$tmp/in.dat"
expect 2 "needs a value" "$DETRAIN" data tokenize --bytes
expect 2 "must be a number" "$DETRAIN" data tokenize --bytes "$tmp/in.dat" --out "$tmp/x.bin" --val-fraction abc
expect 2 "must be an integer" "$DETRAIN" data tokenize --bytes "$tmp/in.dat" --out "$tmp/x.bin" --shard-tokens 0
expect 2 "must be an integer" "$DETRAIN" data info "$tmp/one.bin" --vocab 70000
expect 2 "unknown subcommand" "$DETRAIN" data frob
expect 2 "usage" "$DETRAIN" data
expect 0 "tokenize --bytes FILE" "$DETRAIN" data --help
[ -e "$tmp/x.bin" ] && fail "a failed tokenize left $tmp/x.bin"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all data CLI checks passed"
