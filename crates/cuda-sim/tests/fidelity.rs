//! The simulator answers every probe of the differential program
//! (`examples/differential`) as the probe expects: the CUDA driver API reference's
//! answer, or, where the probe documents a stricter check or something not
//! modelled, the simulator's own. Each probe runs in a child process of its own, as
//! the differential program runs them.

mod common;
#[path = "../examples/differential/probes/mod.rs"]
mod probes;

use std::process::Command;

use common::*;

/// Set in a child's environment to the probe it runs.
const PROBE: &str = "CUDA_SIM_TEST_PROBE";

#[test]
fn the_simulator_answers_every_probe_as_the_reference_does() {
    let all = probes::all();
    if let Ok(i) = std::env::var(PROBE) {
        let p = all[i.parse::<usize>().expect("a probe number")];
        let d = sim();
        println!("{}{}", probes::RESULT, (p.run)(d));
        return;
    }
    assert!(all.len() >= 40, "at least 40 probes, found {}", all.len());
    let exe = std::env::current_exe().expect("current_exe");
    let mut wrong = Vec::new();
    for (i, p) in all.iter().enumerate() {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--exact",
            "the_simulator_answers_every_probe_as_the_reference_does",
            "--nocapture",
        ])
        .env(PROBE, i.to_string());
        let answer = probes::answer_of(cmd);
        if let Some(why) = p.differs {
            assert!(
                why.starts_with("stricter: ") || why.starts_with("not modelled: "),
                "{i}: a documented difference says which kind it is: {why}"
            );
        }
        if answer != p.expected {
            wrong.push(format!(
                "{i} ({}): {}: expected {:?}, the simulator said {answer:?}",
                p.group, p.call, p.expected
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} probes:\n{}",
        wrong.len(),
        all.len(),
        wrong.join("\n")
    );
}
