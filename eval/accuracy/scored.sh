# Sourced by the accuracy scripts (eval/accuracy, eval/spatial, eval/descriptors): the one
# reading of a `vocab evaluate --held-out` output.
# scored OUT: prints "accuracy,balanced_accuracy,held_out,c" (C empty when the output names none).
scored() {
  local out=$1 acc bal n c
  acc=$(echo "$out" | awk '/^accuracy / {print $2}')
  bal=$(echo "$out" | awk '/^balanced_accuracy / {print $2}')
  n=$(echo "$out" | sed -n 's/^(\([0-9]*\) held-out.*/\1/p')
  c=$(echo "$out" | sed -n 's/.*C = \([0-9.e-]*\))$/\1/p')
  echo "$acc,$bal,$n,$c"
}
