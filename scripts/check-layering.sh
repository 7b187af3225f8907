#!/usr/bin/env bash
# The layering of the whole tree, checked against its one description,
# layers.txt at the repository's root (read its header for the syntax).
#
#   scripts/check-layering.sh [ROOT]             check every #include "…"
#   scripts/check-layering.sh --markdown [ROOT]  print the table docs/design.md holds
#
# Every folder holding C++ under src/, cmd/, tests/ and bench/ must be named
# in layers.txt (a new folder is a decision, not an accident); a file may
# include its own folder's headers and those of the folders its line names;
# a `*_test.cc` file also those of its folder's `(tests)` line. A `never`
# line is checked against the rules themselves: the folders a folder can
# reach through any chain of allowed includes must not contain those named,
# so a trust boundary (the agent, the gateway) cannot be crossed by a detour.
# The check also fails when docs/design.md's copy of the table differs.
# Fails naming the file, the line, the header and the rule.
set -euo pipefail
set -f # the rules hold "*", never a glob
markdown=0
if [ "${1:-}" = "--markdown" ]; then
  markdown=1
  shift
fi
root=${1:-"$(dirname "$0")/.."}
cd "$root"
rules=layers.txt
[ -f "$rules" ] || { echo "layering: no $rules in $(pwd)"; exit 1; }

declare -A allow testallow never declared
order=()
lineno=0
while IFS= read -r raw || [ -n "$raw" ]; do
  lineno=$((lineno + 1))
  line=${raw%%#*}
  [[ -z "${line//[[:space:]]/}" ]] && continue
  if [[ ! "$line" =~ ^[[:space:]]*(never[[:space:]]+)?([A-Za-z0-9_/.-]+)([[:space:]]+\(tests\))?[[:space:]]*:(.*)$ ]]; then
    echo "layering: $rules:$lineno: cannot read: $raw"
    exit 1
  fi
  kind=${BASH_REMATCH[1]:+never}
  folder=${BASH_REMATCH[2]}
  [ -n "${BASH_REMATCH[3]}" ] && kind=tests
  deps=$(echo ${BASH_REMATCH[4]})
  case $kind in
    never) never[$folder]=$deps ;;
    tests) testallow[$folder]=$deps ;;
    *)
      [ -n "${declared[$folder]:-}" ] && { echo "layering: $rules:$lineno: $folder named twice"; exit 1; }
      declared[$folder]=1
      allow[$folder]=$deps
      order+=("$folder")
      ;;
  esac
done <"$rules"

for f in "${!never[@]}" "${!testallow[@]}"; do
  [ -n "${declared[$f]:-}" ] || { echo "layering: $rules names $f in a never or (tests) line but has no rule for it"; exit 1; }
done
for f in "${order[@]}"; do
  for d in ${allow[$f]} ${testallow[$f]:-} ${never[$f]:-}; do
    [ "$d" = "*" ] || [ -n "${declared[$d]:-}" ] || { echo "layering: $rules: $f names $d, which has no rule"; exit 1; }
  done
done

# The folders reachable from $1 through allowed (non-test) includes.
reach() {
  local -A seen=()
  local queue=("$1") cur d
  while [ ${#queue[@]} -gt 0 ]; do
    cur=${queue[0]}
    queue=("${queue[@]:1}")
    for d in ${allow[$cur]}; do
      [ "$d" = "*" ] && { echo "*"; return; }
      [ -n "${seen[$d]:-}" ] && continue
      seen[$d]=1
      queue+=("$d")
    done
  done
  echo "${!seen[@]}"
}

if [ "$markdown" = 1 ]; then
  echo "| folder | may include | never reaches |"
  echo "|---|---|---|"
  for f in "${order[@]}"; do
    inc=${allow[$f]:-"(nothing of ours)"}
    [ -n "${testallow[$f]:-}" ] && inc="$inc; its tests also ${testallow[$f]}"
    echo "| \`$f\` | $inc | ${never[$f]:-} |"
  done
  exit 0
fi

bad=0
for f in "${!never[@]}"; do
  reached=" $(reach "$f") "
  for n in ${never[$f]}; do
    if [[ "$reached" == *" * "* || "$reached" == *" $n "* ]]; then
      echo "layering: $rules lets $f reach $n (through its allowed includes), which its never line forbids"
      bad=1
    fi
  done
done

# The declared folder a directory belongs to: its longest declared prefix.
declare -A owner_cache
owner() {
  local d=$1
  if [ -n "${owner_cache[$1]+x}" ]; then
    echo "${owner_cache[$1]}"
    return
  fi
  while [ -n "$d" ] && [ "$d" != "." ]; do
    if [ -n "${declared[$d]:-}" ]; then
      owner_cache[$1]=$d
      echo "$d"
      return
    fi
    [[ "$d" == */* ]] && d=${d%/*} || d=""
  done
  owner_cache[$1]=""
}

roots=()
for r in src cmd tests bench; do [ -d "$r" ] && roots+=("$r"); done
files=$(find "${roots[@]}" -path tests/layering/fixture -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) -print | sort)
checked=0
for file in $files; do
  dir=$(dirname "$file")
  [[ "$dir" == src/* || "$dir" == src ]] && dir=${dir#src/}
  me=$(owner "$dir")
  if [ -z "$me" ]; then
    echo "layering: $file: its folder $dir has no rule in $rules"
    bad=1
    continue
  fi
  checked=$((checked + 1))
  is_test=0
  [[ "$file" == *_test.cc || "$file" == *_test.h ]] && is_test=1
  ok=" ${allow[$me]} "
  [ "$is_test" = 1 ] && ok="$ok ${testallow[$me]:-} "
  [[ "$ok" == *" * "* ]] && continue
  n=0
  while IFS= read -r l; do
    n=$((n + 1))
    [[ "$l" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    h=${BASH_REMATCH[1]}
    [[ "$h" == */* ]] || continue # the file's own folder
    hdir=$(dirname "$h") # "tests/…", "bench/…" from the root, the rest under src/
    them=$(owner "$hdir")
    if [ -z "$them" ]; then
      echo "layering: $file:$n: includes \"$h\", whose folder $hdir has no rule in $rules"
      bad=1
      continue
    fi
    [ "$them" = "$me" ] && continue
    [[ "$ok" == *" $them "* ]] && continue
    echo "layering: $file:$n: $me may not include \"$h\" ($them); $rules allows $me: ${allow[$me]:-nothing of ours}"
    bad=1
  done <"$file"
done

if [ -f docs/design.md ] && grep -q '<!-- layers:begin' docs/design.md; then
  want=$("$0" --markdown .)
  have=$(sed -n '/<!-- layers:begin/,/<!-- layers:end/p' docs/design.md | sed '1d;$d')
  if [ "$want" != "$have" ]; then
    echo "layering: docs/design.md's table of layers differs from $rules; replace it with: scripts/check-layering.sh --markdown"
    bad=1
  fi
fi

[ "$checked" -gt 0 ] || { echo "layering: no files checked"; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "layering: $checked files hold to $rules"
