# Sourced, after setting `here`, by the scripts that score levers on the development set with
# this build (normalise.sh, augment.sh, c_path.sh): root, photos (scene15-train), vocab (the
# release build, built here) and scored (scored.sh).
root=$(cd "$here/../.." && pwd)
. "$here/scored.sh"
photos=$(realpath "$root/../shared/datasets/scene15-train")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
