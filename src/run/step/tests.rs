//! The step runner's own tests: printed paths, the work folder, keys.

use super::*;
use anyhow::ensure;

#[test]
fn printed_paths_name_the_finished_folder_even_across_writes() {
    let mut out = Relocate::new(
        Path::new("/w/kmeans/.tmp-k4-ab"),
        Path::new("/w/kmeans/k4-ab"),
        Vec::new(),
    );
    write!(out, "  wrote /w/kmeans/.tmp-k").expect("write");
    writeln!(out, "4-ab/vocabulary.bin and more").expect("write");
    write!(out, "no newline /w/kmeans/.tmp-k4-ab").expect("write");
    out.flush().expect("flush");
    assert_eq!(
        String::from_utf8(out.inner).expect("utf-8"),
        "  wrote /w/kmeans/k4-ab/vocabulary.bin and more\nno newline /w/kmeans/k4-ab"
    );
}

/// A step that writes `value` into `out.txt`, or fails.
struct Toy {
    value: &'static str,
    fail: bool,
}

impl Stage for Toy {
    type Output = String;
    fn stage(&self) -> &'static str {
        "kmeans"
    }
    fn label(&self) -> String {
        "k4".into()
    }
    fn key(&self) -> String {
        "same".into()
    }
    fn run(&self, tmp: &Path, _out: &mut dyn Write) -> anyhow::Result<String> {
        std::fs::write(tmp.join("out.txt"), self.value)?;
        ensure!(!self.fail, "the disk is full");
        Ok(self.value.into())
    }
    fn cached(&self, dir: &Path) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(dir.join("out.txt"))?)
    }
}

#[test]
fn a_forced_step_keeps_the_old_one_until_the_new_one_is_complete() {
    let work = tempfile::tempdir().expect("tempdir");
    let done = work.path().join("kmeans/k4-same");
    let old = work.path().join("kmeans/.old-k4-same");
    let mut runner = Runner::new(work.path(), None).expect("runner");
    runner
        .run(&Toy {
            value: "first",
            fail: false,
        })
        .expect("first");
    // Forced, and failing (a full disk, a kill): the finished step is still there.
    let mut forced = Runner::new(work.path(), Some("kmeans")).expect("runner");
    forced
        .run(&Toy {
            value: "second",
            fail: true,
        })
        .expect_err("fails");
    assert_eq!(
        std::fs::read_to_string(done.join("out.txt")).expect("kept"),
        "first"
    );
    let mut again = Runner::new(work.path(), None).expect("runner");
    let (_, cached) = again
        .run(&Toy {
            value: "unused",
            fail: true,
        })
        .expect("cached");
    assert_eq!(cached, "first");
    // Forced and complete: replaced, nothing left beside it.
    let mut forced = Runner::new(work.path(), Some("kmeans")).expect("runner");
    forced
        .run(&Toy {
            value: "third",
            fail: false,
        })
        .expect("third");
    assert_eq!(
        std::fs::read_to_string(done.join("out.txt")).expect("new"),
        "third"
    );
    let names: Vec<String> = std::fs::read_dir(work.path().join("kmeans"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["k4-same"]);
    // Killed between the renames: the old step comes back.
    std::fs::rename(&done, &old).expect("as if killed");
    let mut after = Runner::new(work.path(), None).expect("runner");
    let (_, cached) = after
        .run(&Toy {
            value: "unused",
            fail: true,
        })
        .expect("restored");
    assert_eq!(cached, "third");
    assert!(!old.exists());
    // Killed while the old one was being removed: the rest goes.
    std::fs::create_dir(&old).expect("leftover");
    let mut after = Runner::new(work.path(), None).expect("runner");
    after
        .run(&Toy {
            value: "unused",
            fail: true,
        })
        .expect("cached");
    assert!(!old.exists() && done.is_dir());
}
