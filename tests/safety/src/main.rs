//! fencelock-safety: a Jepsen-style history checker with fault injection.
//!
//! ```text
//! fencelock-safety run [--quick] [--seconds S] [--only a,b] [--langs rust,python,wasm,node]
//!                      [--workers N] [--seed X] [--run-dir DIR] [--out docs/safety.md]
//!                      [--fuzz-summary TEXT]
//! fencelock-safety worker --id ... (the Rust worker; started by `run`)
//! ```
//!
//! See docs/safety.md for what is checked and how to read the table.

mod checker;
mod clock;
mod history;
mod proxy;
mod redis_server;
mod report;
mod resource;
mod resp;
mod run;
mod topology;
mod worker;

use std::path::PathBuf;

/// The value after the LAST `name` (so arguments given to run.sh override
/// the ones it sets).
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .rposition(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("worker") => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("tokio runtime");
            match worker::WorkerArgs::parse(&args[1..]) {
                Ok(w) => match rt.block_on(worker::run(w)) {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("worker: {e}");
                        1
                    }
                },
                Err(e) => {
                    eprintln!("worker: {e}");
                    2
                }
            }
        }
        Some("run") => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(run_all(&args[1..]))
        }
        _ => {
            eprintln!("usage: fencelock-safety run [--quick] [...] | worker [...]");
            2
        }
    };
    std::process::exit(code);
}

async fn run_all(args: &[String]) -> i32 {
    let quick = args.iter().any(|a| a == "--quick");
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root");
    let seconds: f64 = flag(args, "--seconds")
        .map(|s| s.parse().expect("--seconds"))
        .unwrap_or(if quick { 5.0 } else { 25.0 });
    let langs: Vec<String> = flag(args, "--langs")
        .unwrap_or_else(|| "rust,python,wasm,node".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let workers = flag(args, "--workers")
        .map(|s| s.parse().expect("--workers"))
        .unwrap_or(4);
    let seed = flag(args, "--seed")
        .map(|s| s.parse().expect("--seed"))
        .unwrap_or_else(|| clock::mono_ns() | 1);
    let run_dir = flag(args, "--run-dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join(".build/safety"));
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let only: Option<Vec<String>> =
        flag(args, "--only").map(|s| s.split(',').map(str::to_owned).collect());
    let cfg = run::Config {
        seconds,
        langs,
        workers,
        run_dir,
        repo: repo.clone(),
        seed,
    };
    println!(
        "fencelock-safety: seed {seed}, {seconds} s per scenario, workers {} ({})",
        cfg.workers,
        cfg.langs.join(",")
    );
    let mut rows = Vec::new();
    for (i, spec) in run::scenarios().iter().enumerate() {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == spec.name))
        {
            continue;
        }
        let row = run::run_scenario(spec, &cfg, i as u64).await;
        println!("{}", report::line(&row));
        rows.push(row);
    }
    let table = report::table(&rows);
    println!("\n{table}");
    for row in &rows {
        report::print_details(row);
    }
    if let Some(out) = flag(args, "--out") {
        let fuzz = flag(args, "--fuzz-summary");
        let doc = report::document(&rows, &cfg, quick, fuzz.as_deref());
        let out_path = repo.join(&out);
        if let Some(parent) = out_path.parent() {
            std::fs::create_dir_all(parent).expect("report directory");
        }
        std::fs::write(&out_path, doc).expect("write report");
        println!("wrote {out}");
    }
    let total: usize = rows.iter().map(|r| r.verdict.critical_sections).sum();
    println!("critical sections in all: {total}");
    if !rows.is_empty() && rows.iter().all(|r| r.pass) {
        println!("SAFETY: PASS");
        0
    } else {
        println!("SAFETY: FAIL");
        1
    }
}
