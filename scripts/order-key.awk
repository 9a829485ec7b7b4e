# The key of a symbol in dsh's link order file (crates/cli/hot-functions.txt): its name with what
# changes from build to build taken out, so that one function keeps one key across dependency,
# feature and code changes. Used by scripts/link-ordered (link time), scripts/hot-functions
# (generation) and, in Rust, by dsh-bench's layout rows (crates/bench/src/layout.rs, whose test
# runs this file to keep the two equal).
#
# Names are v0-mangled (.cargo/config.toml), which spell every generic argument out:
# - `.llvm.<digits>`: the suffix ThinLTO gives a promoted local symbol (its module's hash);
# - `Cs<base-62>_`: a crate's disambiguator (a hash of cargo's metadata, which changes with any
#   dependency or feature change below the crate) becomes `C_`;
# - `B<base-62>_`: a back-reference (a byte offset into the name, which moves when a
#   disambiguator's length does) becomes `B_`.
# The same text changes apply inside identifiers too, on both sides: a key is a fingerprint for
# matching, never a name to link with.
function order_key(s) {
    sub(/\.llvm\.[0-9]+$/, "", s)
    gsub(/Cs[0-9A-Za-z]+_/, "C_", s)
    gsub(/B[0-9A-Za-z]*_/, "B_", s)
    return s
}

# mode=key: the key of each input line's first field, a line each.
mode == "key" { print order_key($1); next }

# mode=resolve: the first file is an order file (keys, `#` comments), the rest `nm -P` output;
# prints each defined function whose key the order file lists, as "RANK NAME" (RANK: the key's
# line in the order file).
mode == "resolve" && FNR == NR {
    if ($0 !~ /^#/ && $0 != "" && !($0 in rank)) rank[$0] = FNR
    next
}
mode == "resolve" && $2 ~ /^[tTwW]$/ && !($1 in done) {
    k = order_key($1)
    if (k in rank) { done[$1] = 1; print rank[k], $1 }
}
