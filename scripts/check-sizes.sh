#!/usr/bin/env bash
# The size rules of CONTRIBUTING.md ("Size"), as a test (ctest size_check):
#   - no C++ file under src/, cmd/, bench/ or tests/ over 600 lines;
#   - a function of src/, cmd/ or bench/ over 80 lines says why, in the
#     comment block right above it, with the words "long because" (or
#     "over 80 lines", followed by the reason).
# Functions are found by Universal Ctags (its C++ parser knows where each
# ends); tests' TEST/TEST_F bodies are not counted (a test's length is its
# script).
#
#   scripts/check-sizes.sh            the tree's tracked files
#   scripts/check-sizes.sh FILE...    those files (tests/sizes uses this)
set -euo pipefail
max_lines=${VESSEL_MAX_FILE_LINES:-600}
max_function=${VESSEL_MAX_FUNCTION_LINES:-80}
command -v ctags >/dev/null || { echo "check-sizes: ctags missing (apt-get install universal-ctags)" >&2; exit 1; }
ctags --version 2>/dev/null | grep -q 'Universal Ctags' ||
  { echo "check-sizes: ctags is not Universal Ctags (apt-get install universal-ctags)" >&2; exit 1; }

if [ $# -gt 0 ]; then
  files=("$@")
else
  cd "$(dirname "$0")/.."
  mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'cmd/*.cc' 'cmd/*.h' 'bench/*.cc' 'bench/*.h' \
    'tests/*.cc' 'tests/*.h')
fi

bad=0
for f in "${files[@]}"; do
  n=$(wc -l <"$f")
  if [ "$n" -gt "$max_lines" ]; then
    echo "$f: $n lines (at most $max_lines: split it by concern)"
    bad=1
  fi
done

# end-line start-line name file, for every function definition.
while read -r end start name file; do
  case "$file" in
    *_test.cc | tests/*) continue ;;
  esac
  len=$((end - start + 1))
  [ "$len" -gt "$max_function" ] || continue
  # The comment block right above: skip a template<> line, then every `//` line.
  why=$(awk -v s="$start" '
    { line[NR] = $0 }
    END {
      i = s - 1
      while (i > 0 && line[i] ~ /^[ \t]*template[ \t]*</) i--
      while (i > 0 && line[i] ~ /^[ \t]*\/\//) { text = line[i] " " text; i-- }
      print tolower(text)
    }' "$file")
  if ! [[ "$why" =~ long\ because|over\ 80\ lines ]]; then
    echo "$file:$start: $name is $len lines (over $max_function: split it, or say why in a \"long because\" comment above it)"
    bad=1
  fi
done < <(ctags -x --_xformat='%{end} %n %N %F' --kinds-C++=f --fields=+ne --language-force=C++ \
  "${files[@]}" 2>/dev/null)

if [ "$bad" -ne 0 ]; then
  echo "check-sizes: the rules are in CONTRIBUTING.md (\"Size\")" >&2
  exit 1
fi
echo "check-sizes: ${#files[@]} files within $max_lines lines, long functions explained"
