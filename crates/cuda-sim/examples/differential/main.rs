//! The differential program: one driver call per probe (bad arguments, pointer
//! attributes, queries before and after completion, pageable-copy synchronisation,
//! batch failure indices, 2-D pitch errors, capture, contexts), made against each
//! driver library named on the command line, with the answers side by side and the
//! reference's answer beside them, as a Markdown table.
//!
//! ```text
//! differential DRIVER [DRIVER...]
//! ```
//!
//! e.g. on a GPU machine, with the simulator copied beside the program:
//!
//! ```text
//! ./differential libcuda.so.1 ./libcuda_sim.so > fidelity.md
//! ```
//!
//! Each probe runs in a child process of its own per driver (the program runs itself
//! with `--probe N DRIVER`), so that a driver that crashes on a bad argument, or a
//! fault that poisons a context, costs that one answer only. The exit status is 0
//! when every answer of the last driver (the simulator, when it is last) matches the
//! first's, apart from the rows the probes mark as documented differences.

#[path = "../../tests/common/mod.rs"]
mod common;
mod probes;

use std::process::{Command, ExitCode};

use probes::{all, answer_of, RESULT};

/// A short name for a driver library: "simulator" when it exports the simulator's
/// own entry point, else the path as given.
fn label(path: &str) -> String {
    // SAFETY: the simulator or the NVIDIA driver (what this program is run with):
    // opening either runs only its own initialisers.
    match unsafe { libloading::Library::new(path) } {
        // SAFETY: only looked up, never called.
        Ok(lib) if unsafe { lib.get::<unsafe extern "C" fn()>(b"cuSimInjectFault\0") }.is_ok() => {
            format!("simulator ({path})")
        }
        Ok(_) => format!("driver ({path})"),
        Err(e) => format!("{path} (does not open: {e})"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--probe" {
        let Ok(i) = args[2].parse::<usize>() else {
            eprintln!("--probe N DRIVER: N is a number");
            return ExitCode::from(2);
        };
        let probes = all();
        let Some(p) = probes.get(i) else {
            eprintln!("no probe {i}");
            return ExitCode::from(2);
        };
        // SAFETY: 1. the NVIDIA driver or the simulator, as this program is run with.
        // 2. Both export the CUDA driver API's signatures.
        if let Err(e) = unsafe { cuda_sys::Driver::load_from(&args[3]) } {
            println!("{RESULT}the driver does not load: {e}");
            return ExitCode::SUCCESS;
        }
        let d = common::load(&args[3]);
        println!("{RESULT}{}", (p.run)(d));
        return ExitCode::SUCCESS;
    }
    let drivers = &args[1..];
    if drivers.is_empty() || drivers.iter().any(|a| a.starts_with('-')) {
        eprintln!("usage: differential DRIVER [DRIVER...]   (e.g. libcuda.so.1 ./libcuda_sim.so)");
        return ExitCode::from(2);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let probes = all();
    let labels: Vec<String> = drivers.iter().map(|d| label(d)).collect();
    let mut answers: Vec<Vec<String>> = Vec::new();
    for (i, _) in probes.iter().enumerate() {
        let row = drivers
            .iter()
            .map(|d| {
                let mut cmd = Command::new(&exe);
                cmd.args(["--probe", &i.to_string(), d]);
                answer_of(cmd)
            })
            .collect();
        answers.push(row);
        eprint!(".");
    }
    eprintln!();
    let mut head =
        String::from("| # | group | call | simulator's answer (the reference's unless noted) |");
    let mut rule = String::from("|---|---|---|---|");
    for l in &labels {
        head.push_str(&format!(" {l} |"));
        rule.push_str("---|");
    }
    if drivers.len() > 1 {
        head.push_str(" first vs last |");
        rule.push_str("---|");
    }
    println!("{head}\n{rule}");
    let mut mismatches = 0;
    for (i, (p, row)) in probes.iter().zip(&answers).enumerate() {
        let mut line = format!("| {i} | {} | {} | {} |", p.group, p.call, p.expected);
        for a in row {
            line.push_str(&format!(" {} |", a.replace('|', "/")));
        }
        if drivers.len() > 1 {
            let same = row.first() == row.last();
            let verdict = match (same, p.differs) {
                (true, _) => "same".to_owned(),
                (false, Some(why)) => format!("documented: {why}"),
                (false, None) => {
                    mismatches += 1;
                    "**MISMATCH**".to_owned()
                }
            };
            line.push_str(&format!(" {verdict} |"));
        }
        println!("{line}");
    }
    println!(
        "\n{} probes; {mismatches} undocumented mismatches",
        probes.len()
    );
    if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
