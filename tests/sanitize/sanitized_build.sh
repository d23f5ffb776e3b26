# Sourced by the sanitizer tests: sanitized_make TARGET... builds targets of the
# AddressSanitizer + UndefinedBehaviorSanitizer build (build/sanitize, leak checks on) with
# one set of flags, so every test that needs it shares the same objects.
B=build/sanitize
SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -Wno-error"
sanitized_make() {
  make -s -j2 BUILD=$B EXTRA_CFLAGS="$SAN_FLAGS" LDLIBS="-lopenblas -fopenmp -lm -fsanitize=address,undefined" "$@"
}
