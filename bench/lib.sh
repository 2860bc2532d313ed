# Shared by the bench/gpu-*.sh scripts: $out (from $OUT, default ./out) and step NAME CMD..., which runs
# CMD under a heading, records a failure in $status without stopping the script, and returns CMD's status.
out=${OUT:-out}
mkdir -p "$out"
status=0
step() {
  local name=$1
  shift
  echo "== $name"
  "$@"
  local rc=$?
  if ((rc != 0)); then
    echo "!! $name failed ($rc)"
    status=1
  fi
  return $rc
}
