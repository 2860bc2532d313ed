# Shared by the bench/gpu-*.sh scripts: $out (from $OUT, default ./out) and step NAME CMD..., which runs
# CMD under a heading and records a failure in $status without stopping the script.
out=${OUT:-out}
mkdir -p "$out"
status=0
step() {
  local name=$1
  shift
  echo "== $name"
  "$@" || { echo "!! $name failed"; status=1; }
}
