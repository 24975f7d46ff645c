#!/bin/sh
# pick_ab.sh BASE_REF [ROUNDS] — BenchmarkPick (the root package's: 2,048
# tokens, 64 endpoints, warm index, render excluded) of the commit BASE_REF
# against the working tree, interleaved round by round (base, then head) so
# both see the same machine load; prints every round and the median ns/op
# and allocs/op of each side and the ratio head/base.
#
#   nice -n 10 bench/scripts/pick_ab.sh 46ecb18 7
set -eu
base=${1:?usage: pick_ab.sh BASE_REF [ROUNDS]}
rounds=${2:-5}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" archive "$base" | tar -x -C "$tmp"
out="$tmp/rounds.txt"
: >"$out"
i=0
while [ "$i" -lt "$rounds" ]; do
	i=$((i + 1))
	for side in base head; do
		dir=$tmp
		[ "$side" = head ] && dir=$root
		(cd "$dir" && go test -run '^$' -bench '^BenchmarkPick$' -benchtime 20000x -count 1 .) |
			awk -v s="$side" '/^BenchmarkPick/ { for (f = 1; f <= NF; f++) { if ($f == "ns/op") ns = $(f-1); if ($f == "allocs/op") al = $(f-1) } print s, ns, al }' | tee -a "$out"
	done
done
awk '
	{ n[$1]++; ns[$1, n[$1]] = $2; al[$1] = $3 }
	function med(s,   k, j, t, a) { for (k = 1; k <= n[s]; k++) a[k] = ns[s, k]
		for (k = 1; k <= n[s]; k++) for (j = k + 1; j <= n[s]; j++) if (a[j] < a[k]) { t = a[k]; a[k] = a[j]; a[j] = t }
		return a[int((n[s] + 1) / 2)] }
	END { b = med("base"); h = med("head")
		printf "base median %.0f ns/op %s allocs/op\nhead median %.0f ns/op %s allocs/op\nhead/base %.3f\n", b, al["base"], h, al["head"], h / b }' "$out"
