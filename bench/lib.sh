# Shared by the bench/gpu-*.sh scripts: $out (from $OUT, default ./out); step NAME CMD..., which runs
# CMD under a heading, records a failure in $status without stopping the script, and returns CMD's status;
# torch_step NAME SECTIONS, PyTorch's figures of those sections of bench/torch-baselines.py on $world GPUs
# (one process each) into $out/NAME.json, a step like any other.
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
torch_step() {
  step "$1" python3 -m torch.distributed.run --nproc_per_node "$world" bench/torch-baselines.py \
    --sections "$2" --json "$out/$1.json"
}
