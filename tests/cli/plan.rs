//! What `vocab run --plan` states beyond sizes: the disk each stage takes, and times at rates
//! measured on this machine (or, asked, the reference machine's).

use crate::util::*;

#[test]
fn a_plan_states_its_disk_and_times_at_this_machines_rates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let config = small_config(dir.path(), &photos);
    let plan = ok(&["run", s(&config), "--plan"]);
    let disk = plan.lines().find(|l| l.trim_start().starts_with("disk"));
    assert!(
        disk.is_some_and(|l| l.contains("a trial")
            && l.contains("encode")
            && l.contains("partition")),
        "{plan}"
    );
    assert!(plan.contains("vocab clean CONFIG --encodings"), "{plan}");
    assert!(
        plan.contains("measured just now: the photo stages"),
        "{plan}"
    );

    // The reference rates: the same plan every time, anywhere.
    let text = std::fs::read_to_string(&config).expect("config");
    let fixed = dir.path().join("fixed.toml");
    std::fs::write(&fixed, format!("{text}\n[plan]\ncalibrate = false\n")).expect("config");
    let a = ok(&["run", s(&fixed), "--plan"]);
    assert!(
        a.contains("not measured here ([plan] calibrate = false"),
        "{a}"
    );
    assert_eq!(a, ok(&["run", s(&fixed), "--plan"]));
}
